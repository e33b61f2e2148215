//! Log levels (RFC 5424 order) for `notifications/message`, `logging/setLevel`
//! and the modern per-request `_meta["io.modelcontextprotocol/logLevel"]`.

use serde_json::Value;

const LEVELS: [&str; 8] = ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];

/// A level; a message is sent when its level is at least the threshold.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Level(usize);

impl Level {
    /// Everything passes: the legacy threshold until `logging/setLevel`.
    pub const DEBUG: Level = Level(0);

    pub fn parse(value: &Value) -> Option<Level> {
        let name = value.as_str()?;
        LEVELS.iter().position(|l| *l == name).map(Level)
    }

    pub fn name(self) -> &'static str {
        LEVELS[self.0]
    }

    /// What an error message says a level must be.
    pub fn expected() -> String {
        format!("one of {}", LEVELS.join(", "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn levels_parse_by_name_and_order_by_severity() {
        let (debug, error) = (Level::parse(&json!("debug")).unwrap(), Level::parse(&json!("error")).unwrap());
        assert!(debug < error && debug == Level::DEBUG);
        assert_eq!(error.name(), "error");
        assert_eq!(Level::parse(&json!("loud")), None);
        assert_eq!(Level::parse(&json!(3)), None);
    }
}
