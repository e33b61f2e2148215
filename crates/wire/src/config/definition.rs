//! A server's definition as kept between loading the configuration and
//! using it: memory that grows with the file read, not with how it parses.
//!
//! A parsed [`ServerConfig`] costs about ten times its entry's text (its
//! inline fields, a tree node per map), so an editor's file of many
//! servers is kept as its text, once (or the part holding its servers,
//! when that is the smaller part), and each server as the place of its
//! entry in that text; a command that uses a server parses the entry
//! again ([`foreign::parse_entry`]), which gives the server that was
//! checked when the file was loaded. Servers that cannot be read again the
//! same way (an `envFile`, which is read anew each time; Codex's TOML;
//! mcpvisor's own files) are kept parsed.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use super::foreign::{self, Format};
use super::{Scope, ServerConfig};
use crate::error::ConfigError;

/// The text an editor's servers are read again from: the file's (its
/// comments stripped), or the part of it holding its servers; `path` is
/// the file's.
#[derive(Debug, PartialEq, Eq)]
pub struct EditorText {
    pub path: PathBuf,
    pub text: String,
}

/// A server's definition, as kept.
#[derive(Debug, Clone, PartialEq)]
pub enum Definition {
    /// The server, parsed.
    Parsed(Box<ServerConfig>),
    /// An editor's entry, kept as its text; `entry` is its range in
    /// `file.text`, a whole JSON value that parsed into a valid server.
    Editor { file: Arc<EditorText>, entry: Range<usize>, format: Format, name: Box<str>, scope: Scope, enabled: bool },
}

impl Definition {
    pub fn parsed(config: ServerConfig) -> Definition {
        Definition::Parsed(Box::new(config))
    }

    /// `config`, read from the entry at `entry` in `file.text`: kept as
    /// that place when parsing the entry again gives `config` back (it reads
    /// no other file), else parsed.
    pub fn from_editor(config: ServerConfig, format: Format, file: &Arc<EditorText>, entry: Option<Range<usize>>) -> Definition {
        let rereadable = |entry: &Range<usize>| file.text.get(entry.clone()).is_some_and(|text| !text.contains("\"envFile\""));
        match entry.filter(rereadable) {
            Some(entry) => Definition::Editor {
                file: Arc::clone(file),
                entry,
                format,
                name: config.name.as_str().into(),
                scope: config.scope,
                enabled: config.enabled,
            },
            None => Definition::parsed(config),
        }
    }

    pub fn name(&self) -> &str {
        match self {
            Definition::Parsed(config) => &config.name,
            Definition::Editor { name, .. } => name,
        }
    }

    pub fn enabled(&self) -> bool {
        match self {
            Definition::Parsed(config) => config.enabled,
            Definition::Editor { enabled, .. } => *enabled,
        }
    }

    /// The server, parsed (again, for an editor's entry).
    pub fn config(&self) -> Result<ServerConfig, ConfigError> {
        match self {
            Definition::Parsed(config) => Ok(ServerConfig::clone(config)),
            Definition::Editor { file, entry, format, name, scope, .. } => {
                let text = file.text.get(entry.clone()).unwrap_or_default();
                let found = foreign::parse_entry(&file.path, *format, name, text)?;
                Ok(ServerConfig { scope: *scope, ..found.config })
            }
        }
    }
}

/// Where `part` (a slice of `text`) lies in `text`; `None` when it is not a slice of it.
pub(crate) fn range_within(text: &str, part: &str) -> Option<Range<usize>> {
    let start = (part.as_ptr() as usize).checked_sub(text.as_ptr() as usize)?;
    let range = start..start.checked_add(part.len())?;
    text.get(range.clone()).map(|_| range)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn editor_text(text: &str) -> Arc<EditorText> {
        Arc::new(EditorText { path: PathBuf::from("/project/.mcp.json"), text: text.into() })
    }

    #[test]
    fn an_entry_is_kept_as_its_place_and_parses_to_the_same_server() {
        let file = editor_text(r#"{"mcpServers": {"fs": {"command": "npx", "args": ["-y", "${env:ROOT}"], "env": {"A": "1"}}}}"#);
        let (format, servers) = foreign::parse_each(&file.path, &file.text, &Default::default()).unwrap();
        let found = servers.into_iter().next().unwrap().unwrap();
        let place = file.text.find(r#"{"command""#).unwrap()..file.text.len() - 2;
        assert_eq!(range_within(&file.text, &file.text[place.clone()]), Some(place.clone()));
        let config = ServerConfig { scope: Scope::Project, ..found.config.clone() };
        let definition = Definition::from_editor(config, format, &file, Some(place.clone()));
        assert!(matches!(&definition, Definition::Editor { entry: range, .. } if *range == place));
        assert_eq!((definition.name(), definition.enabled()), ("fs", true));
        assert_eq!(definition.config().unwrap(), ServerConfig { scope: Scope::Project, ..found.config });
    }

    #[test]
    fn entries_that_read_another_file_or_lie_elsewhere_are_kept_parsed() {
        let config = ServerConfig::stdio("x", "run", ["a"]);
        let elsewhere = String::from(r#"{"command": "run"}"#);
        let file = editor_text(r#"{"a": {"command": "run", "envFile": ".env"}}"#);
        assert_eq!(range_within(&file.text, &elsewhere), None);
        let past_the_end = Some(6..file.text.len() + 1);
        assert_eq!(Definition::from_editor(config.clone(), Format::ClaudeCode, &file, past_the_end), Definition::parsed(config.clone()));
        let with_env_file = Some(6..file.text.len() - 1);
        assert_eq!(Definition::from_editor(config.clone(), Format::ClaudeCode, &file, with_env_file), Definition::parsed(config));
    }
}
