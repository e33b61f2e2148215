//! The confirmation policy's questions as `session/request_permission`:
//! the four answers map one to one onto [`Decision`]s, so "always" is
//! remembered per session and tool by the agent's policy; a question the
//! editor cancels, fails or leaves when the turn is cancelled is
//! [`Decision::Cancelled`] (the call is not run).

use std::sync::Arc;

use agent_client_protocol_schema::{
    PermissionOption, PermissionOptionKind, RequestPermissionOutcome, RequestPermissionRequest, RequestPermissionResponse, ToolCallUpdate,
    ToolCallUpdateFields,
};

use super::room::Room;
use crate::actors::agent::{ConfirmRequest, Decision};
use crate::actors::client_requests::Answering;

const CHOICES: [(&str, &str, PermissionOptionKind, Decision); 4] = [
    ("allow_once", "Allow", PermissionOptionKind::AllowOnce, Decision::AllowOnce),
    ("allow_always", "Always allow", PermissionOptionKind::AllowAlways, Decision::AllowAlways),
    ("reject_once", "Reject", PermissionOptionKind::RejectOnce, Decision::RejectOnce),
    ("reject_always", "Always reject", PermissionOptionKind::RejectAlways, Decision::RejectAlways),
];

/// An asker that puts each question to the editor of `room`.
pub fn asker(room: Arc<Room>) -> Answering<ConfirmRequest> {
    Answering::function(move |request: ConfirmRequest| {
        let room = room.clone();
        async move { ask(&room, request).await }
    })
}

async fn ask(room: &Room, request: ConfirmRequest) -> Decision {
    let options = CHOICES.iter().map(|(id, name, kind, _)| PermissionOption::new(id.to_string(), name.to_string(), *kind)).collect();
    // The tool call is already shown (it is pending); the question refers to it.
    let fields = ToolCallUpdateFields::new().raw_input(request.arguments.clone());
    let question = RequestPermissionRequest::new(room.session_id.clone(), ToolCallUpdate::new(request.call_id.clone(), fields), options);
    let answer: Result<RequestPermissionResponse, _> = room.peer.request("session/request_permission", &question).await;
    match answer.map(|response| response.outcome) {
        Ok(RequestPermissionOutcome::Selected(selected)) => {
            CHOICES.iter().find(|(id, ..)| *id == &*selected.option_id.0).map_or(Decision::Cancelled, |choice| choice.3)
        }
        Ok(_) | Err(_) => Decision::Cancelled,
    }
}
