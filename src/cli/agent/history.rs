//! Which conversation `mcpvisor agent` goes on with, and where it is saved
//! ([`crate::sessions`]): a new one, `--resume ID`, or `--continue` (the
//! most recent). Secrets are masked with the servers' redactor and the
//! model key before anything is written. A store that cannot be used
//! (no home directory, a read-only disk) costs only the saving: the agent
//! runs, and a warning says so; a conversation asked for by id that cannot
//! be read is a usage error.

use super::{AgentArgs, Setup};
use crate::cli::output::{warn, Failure};
use crate::cli::secrets;
use crate::llm::ChatMessage;
use crate::sessions::{NewSession, SessionId, SessionStore, SessionWriter};

/// The conversation an agent starts with.
pub struct Opened {
    pub journal: Option<SessionWriter>,
    pub messages: Vec<ChatMessage>,
    /// The saved system prompt of a resumed conversation.
    pub system: Option<String>,
}

impl Opened {
    pub fn id(&self) -> Option<String> {
        self.journal.as_ref().map(|journal| journal.id().to_string())
    }
}

/// Resumes what the flags name, or starts a new saved conversation.
pub fn open(args: &AgentArgs, setup: &Setup) -> Result<Opened, Failure> {
    let wanted = match (&args.resume, args.continue_last) {
        (Some(id), _) => Some(SessionId::parse(id).map_err(|e| Failure::usage(e.to_string()))?),
        (None, true) => {
            let store = SessionStore::default_location().map_err(|e| Failure::usage(e.to_string()))?;
            let latest = store.latest().map_err(|e| Failure::usage(e.to_string()))?;
            Some(latest.ok_or_else(|| Failure::usage(format!("there is no saved conversation to continue in {}", store.dir().display())))?)
        }
        (None, false) => None,
    };
    let Some(id) = wanted else { return Ok(start(setup)) };
    let store = SessionStore::default_location().map_err(|e| Failure::usage(e.to_string()))?;
    let (saved, journal) = store.resume(&id, redactor(setup)).map_err(|e| Failure::usage(e.to_string()))?;
    for warning in &saved.warnings {
        warn(format_args!("conversation {id}: {warning}"));
    }
    Ok(Opened { journal: Some(journal), messages: saved.messages, system: saved.started.system })
}

/// A new saved conversation (unsaved, with a warning, when the store cannot be used).
pub fn start(setup: &Setup) -> Opened {
    let created = SessionStore::default_location().and_then(|store| {
        let cwd = std::env::current_dir().ok().map(|dir| dir.display().to_string());
        store.create(NewSession { model: setup.model.label(), cwd, system: Some(setup.system.clone()) }, redactor(setup))
    });
    let journal = match created {
        Ok(journal) => Some(journal),
        Err(error) => {
            warn(format_args!("this conversation is not saved: {error}"));
            None
        }
    };
    Opened { journal, messages: Vec::new(), system: None }
}

pub(super) fn redactor(setup: &Setup) -> crate::config::Redactor {
    secrets::redactor().with_more(setup.key.clone())
}
