//! The session modes an editor can switch between (`session/set_mode`),
//! and the slash commands it can offer (`available_commands_update`).
//!
//! | mode | confirmation | tools |
//! | --- | --- | --- |
//! | `ask` | the configured policy (default: ask unless read-only) | all |
//! | `auto` | never asks | all |
//! | `read-only` | the configured policy | only read-only ones (`readOnlyHint` and not destructive) |

use agent_client_protocol_schema::{AvailableCommand, AvailableCommandInput, SessionMode, SessionModeState, UnstructuredCommandInput};

use crate::config::ConfirmMode;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    Ask,
    Auto,
    ReadOnly,
}

const MODES: [(Mode, &str, &str, &str); 3] = [
    (Mode::Ask, "ask", "Ask", "Asks before tools that may change things, as the configuration says"),
    (Mode::Auto, "auto", "Auto", "Runs every tool without asking"),
    (Mode::ReadOnly, "read-only", "Read-only", "Offers only read-only tools"),
];

impl Mode {
    pub fn id(self) -> &'static str {
        MODES.iter().find(|(mode, ..)| *mode == self).map_or("ask", |(_, id, ..)| id)
    }

    pub fn parse(id: &str) -> Option<Mode> {
        MODES.iter().find(|(_, known, ..)| *known == id).map(|(mode, ..)| *mode)
    }

    /// The confirmation mode of this session mode, given the configured one.
    pub fn confirm(self, configured: ConfirmMode) -> ConfirmMode {
        match self {
            Mode::Auto => ConfirmMode::Never,
            Mode::Ask | Mode::ReadOnly => configured,
        }
    }

    pub fn state(self) -> SessionModeState {
        let modes =
            MODES.iter().map(|(_, id, name, about)| SessionMode::new(id.to_string(), name.to_string()).description(about.to_string()));
        SessionModeState::new(self.id().to_string(), modes.collect())
    }
}

/// `/tools`, `/servers`, `/reconnect SERVER`, `/model NAME`: answered by
/// the agent side itself, without the model.
pub fn commands() -> Vec<AvailableCommand> {
    vec![
        AvailableCommand::new("model", "Talk to another model of the same provider from the next request on")
            .input(AvailableCommandInput::Unstructured(UnstructuredCommandInput::new("model name"))),
        AvailableCommand::new("tools", "List the tools this session offers the model"),
        AvailableCommand::new("servers", "Show the MCP servers of this session and their state"),
        AvailableCommand::new("reconnect", "Restart an MCP server")
            .input(AvailableCommandInput::Unstructured(UnstructuredCommandInput::new("server name"))),
    ]
}
