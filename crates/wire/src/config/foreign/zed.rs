//! Zed's `context_servers` (in `~/.config/zed/settings.json` and a
//! project's `.zed/settings.json`): `command` as a string with `args` and
//! `env` beside it, or (older files) an object `{path, args, env}`; `url`
//! and `headers` for a remote server; `enabled`. A server a Zed extension
//! provides (`"source": "extension"`, no command) cannot be run outside Zed.

use serde_json::Value as Json;

use super::Entry;
use crate::config::{ServerConfig, Transport};
use crate::error::ConfigError;

impl Entry<'_> {
    pub(super) fn zed(&self) -> Result<ServerConfig, ConfigError> {
        let source = self.raw_text("source")?;
        let mut config = match (self.get("command"), self.text("url")?) {
            (Some(Json::Object(command)), _) => {
                let nested = Entry::new(self.context, self.server, command);
                let program = nested.text("path")?.ok_or_else(|| self.invalid("command.path", "is missing: the program to run"))?;
                let mut config = ServerConfig::stdio(self.server, program, nested.strings("args")?.unwrap_or_default());
                config.env = nested.map("env")?;
                config
            }
            (Some(_), _) => {
                let program = self.text("command")?.unwrap_or_default();
                let mut config = ServerConfig::stdio(self.server, program, self.strings("args")?.unwrap_or_default());
                config.env = self.map("env")?;
                config
            }
            (None, Some(url)) => {
                let mut config = ServerConfig::remote(self.server, Transport::Http, url);
                config.headers = self.map("headers")?;
                config
            }
            (None, None) if source.as_deref() == Some("extension") => {
                let message = "is provided by a Zed extension, which only Zed can run; give it a `command` to run it from mcpvisor";
                return Err(self.invalid("", message));
            }
            (None, None) => return Err(self.invalid("", "has neither `command` (a local server) nor `url` (a remote one)")),
        };
        config.enabled = self.bool("enabled")?.unwrap_or(true);
        Ok(config)
    }
}
