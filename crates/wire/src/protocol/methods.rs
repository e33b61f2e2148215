//! JSON-RPC method names used by MCP (2025-11-25 and 2026-07-28).

pub const INITIALIZE: &str = "initialize";
pub const INITIALIZED: &str = "notifications/initialized";
pub const DISCOVER: &str = "server/discover";
pub const PING: &str = "ping";

pub const TOOLS_LIST: &str = "tools/list";
pub const TOOLS_CALL: &str = "tools/call";
pub const RESOURCES_LIST: &str = "resources/list";
pub const RESOURCE_TEMPLATES_LIST: &str = "resources/templates/list";
pub const RESOURCES_READ: &str = "resources/read";
pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
pub const PROMPTS_LIST: &str = "prompts/list";
pub const PROMPTS_GET: &str = "prompts/get";
pub const COMPLETE: &str = "completion/complete";
pub const SET_LOG_LEVEL: &str = "logging/setLevel";
pub const SUBSCRIPTIONS_LISTEN: &str = "subscriptions/listen";
/// The skills extension (SEP-2640; its data types are the crate's `skills` module).
pub const SKILLS_LIST: &str = "skills/list";
pub const SKILLS_GET: &str = "skills/get";

pub const TASKS_GET: &str = "tasks/get";
pub const TASKS_RESULT: &str = "tasks/result";
pub const TASKS_CANCEL: &str = "tasks/cancel";
pub const TASKS_LIST: &str = "tasks/list";

/// Requests a server may send to its client.
pub const ROOTS_LIST: &str = "roots/list";
pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
pub const ELICITATION_CREATE: &str = "elicitation/create";

pub const CANCELLED: &str = "notifications/cancelled";
pub const PROGRESS: &str = "notifications/progress";
pub const LOG_MESSAGE: &str = "notifications/message";
pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
pub const RESOURCE_UPDATED: &str = "notifications/resources/updated";
pub const ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
pub const TASK_STATUS: &str = "notifications/tasks/status";
pub const SUBSCRIPTIONS_ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
