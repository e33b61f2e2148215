//! The confirmation policy's questions as `session/request_permission`:
//! the four answers map one to one onto [`Decision`]s, so "always" is
//! remembered per session by the agent's policy (for the tool, or for a
//! command's prefix, which the option's name says); a question the
//! editor cancels, fails or leaves when the turn is cancelled is
//! [`Decision::Cancelled`] (the call is not run). Questions go through the
//! session's [`Relay`], so each follows the updates queued before it.

use agent_client_protocol_schema::{PermissionOption, PermissionOptionKind, RequestPermissionOutcome};

use super::relay::Relay;
use crate::actors::agent::{ConfirmRequest, Decision};
use crate::actors::client_requests::Answering;

const CHOICES: [(&str, &str, PermissionOptionKind, Decision); 4] = [
    ("allow_once", "Allow", PermissionOptionKind::AllowOnce, Decision::AllowOnce),
    ("allow_always", "Always allow", PermissionOptionKind::AllowAlways, Decision::AllowAlways),
    ("reject_once", "Reject", PermissionOptionKind::RejectOnce, Decision::RejectOnce),
    ("reject_always", "Always reject", PermissionOptionKind::RejectAlways, Decision::RejectAlways),
];

/// An asker that puts each question to the editor through the session's `relay`.
pub fn asker(relay: Relay) -> Answering<ConfirmRequest> {
    Answering::function(move |request: ConfirmRequest| {
        let relay = relay.clone();
        async move { ask(&relay, request).await }
    })
}

async fn ask(relay: &Relay, request: ConfirmRequest) -> Decision {
    let name = |id: &str, name: &str| match id {
        "allow_always" => format!("{name} {}", request.always_allows),
        _ => name.to_string(),
    };
    let options = CHOICES.iter().map(|(id, label, kind, _)| PermissionOption::new(id.to_string(), name(id, label), *kind)).collect();
    match relay.ask_permission(request, options).await.map(|response| response.outcome) {
        Ok(RequestPermissionOutcome::Selected(selected)) => {
            CHOICES.iter().find(|(id, ..)| *id == &*selected.option_id.0).map_or(Decision::Cancelled, |choice| choice.3)
        }
        Ok(_) | Err(_) => Decision::Cancelled,
    }
}
