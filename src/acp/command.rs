//! The slash commands of [`super::modes::commands`], answered without the
//! model: a prompt starting with `/tools`, `/servers`, `/reconnect` or
//! `/model`. Any other prompt starting with `/` goes to the model as it is.

use super::modes::Mode;
use super::session::Scope;
use super::ModelSwitch;
use crate::AgentHandle;
use crate::Handle;

/// What a slash command may act on.
pub struct Target<'a> {
    pub handle: &'a Handle,
    pub scope: &'a Scope,
    pub mode: Mode,
    pub agent: &'a AgentHandle,
    pub switch_model: Option<&'a ModelSwitch>,
}

/// The answer to `line` (the prompt without its `/`), or `None` when it is
/// no command of ours. `/tools` lists what the session's mode offers.
pub async fn run(target: Target<'_>, line: &str) -> Option<String> {
    let Target { handle, scope, mode, agent, switch_model } = target;
    let mut words = line.split_whitespace();
    Some(match words.next()? {
        "tools" => {
            let visible = scope.filter(mode);
            let mut names: Vec<String> =
                handle.list_tools().await.into_iter().filter(|entry| visible(entry)).map(|entry| entry.name).collect();
            names.sort();
            match names.is_empty() {
                true => "No tools are available in this session.".into(),
                false => format!("{} tools:\n{}", names.len(), names.join("\n")),
            }
        }
        "servers" => {
            let lines: Vec<String> = handle
                .status()
                .await
                .into_iter()
                .filter(|status| scope.sees(&status.name))
                .map(|status| format!("{}: {} ({} tools)", status.name, status.state.label(), status.tools))
                .collect();
            lines.join("\n")
        }
        "model" => match (words.next(), switch_model) {
            (None, _) => "Name the model: /model NAME (a model of the same provider).".into(),
            (Some(_), None) => "This session's model cannot be changed.".into(),
            (Some(name), Some(switch)) => match switch(name) {
                Ok(model) => {
                    let label = model.label();
                    agent.set_model(model);
                    format!("From the next request on, the model is {label}.")
                }
                Err(why) => format!("The model stays as it was: {why}"),
            },
        },
        "reconnect" => match words.next() {
            None => "Name the server: /reconnect SERVER (see /servers).".into(),
            Some(name) if !scope.sees(name) => format!("There is no server `{name}` in this session (see /servers)."),
            Some(name) => match handle.reconnect(name).await {
                Ok(()) => format!("Server `{name}` is reconnecting."),
                Err(error) => format!("Server `{name}` cannot be reconnected: {error}"),
            },
        },
        _ => return None,
    })
}
