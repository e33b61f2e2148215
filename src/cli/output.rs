//! What the command line prints: human text (coloured only on a terminal)
//! or JSON on stdout, errors on stderr, and the exit code.
//!
//! An error is one line on stderr starting with `error:`; details that do
//! not fit on it (a server's last stderr lines) follow, indented. With
//! `--json` the same error is also printed on stdout as
//! `{"error": {"message", "exit_code"}}`, so a script reading stdout
//! always gets JSON.

use std::io::IsTerminal;
use std::process::ExitCode;

use rmcp::model::{ContentBlock, ResourceContents};
use serde::Serialize;

use super::{secrets, EXIT_CONNECTION, EXIT_USAGE};
use crate::error::{CallError, ConfigError, ManageError};

/// Why a command stopped, and with which exit code.
#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub code: u8,
    pub message: String,
}

impl Failure {
    /// Exit 2: the command line or the configuration is wrong.
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure { code: EXIT_USAGE, message: message.into() }
    }

    /// Exit 3: a server could not be reached or answered wrongly.
    pub fn connection(message: impl Into<String>) -> Failure {
        Failure { code: EXIT_CONNECTION, message: message.into() }
    }
}

impl From<ConfigError> for Failure {
    fn from(error: ConfigError) -> Failure {
        Failure::usage(error.to_string())
    }
}

impl From<ManageError> for Failure {
    fn from(error: ManageError) -> Failure {
        Failure::usage(error.to_string())
    }
}

impl From<CallError> for Failure {
    /// Mistakes of the caller (a name, the arguments, a disabled or
    /// excluded tool) are usage errors; everything else is the server's or
    /// the connection's doing.
    fn from(error: CallError) -> Failure {
        let code = match error {
            CallError::UnknownTool { .. }
            | CallError::UnknownServer { .. }
            | CallError::InvalidArguments { .. }
            | CallError::NotPermitted { .. }
            | CallError::Disabled { .. } => EXIT_USAGE,
            _ => EXIT_CONNECTION,
        };
        Failure { code, message: error.to_string() }
    }
}

/// Prints the failure, if any, and turns the result into the exit code.
pub fn finish(result: Result<u8, Failure>, json: bool) -> ExitCode {
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => {
            let message = secrets::scrub(&failure.message);
            let mut lines = message.lines();
            eprintln!("error: {}", lines.next().unwrap_or_default());
            for line in lines {
                eprintln!("  {}", line.trim_start());
            }
            if json {
                print_json(&serde_json::json!({"error": {"message": message, "exit_code": failure.code}}));
            }
            ExitCode::from(failure.code)
        }
    }
}

/// Writes a line to stdout. A closed stdout (`mcpvisor ... | head`) is not
/// an error worth a panic: the rest of the output is dropped. (SIGPIPE stays
/// ignored, as Rust sets it: a server's closed stdin must not kill us.)
pub fn print_line(text: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{}", secrets::scrub(&text.to_string()));
}

/// Pretty JSON on stdout.
pub fn print_json<T: Serialize + ?Sized>(value: &T) {
    let mut value = match serde_json::to_value(value) {
        Ok(value) => value,
        Err(e) => return eprintln!("error: cannot write JSON: {e}"),
    };
    secrets::scrub_json(&mut value);
    match serde_json::to_string_pretty(&value) {
        Ok(text) => print_line(text),
        Err(e) => eprintln!("error: cannot write JSON: {e}"),
    }
}

/// Where a command's result goes: JSON, or text for people.
#[derive(Debug, Clone, Copy)]
pub struct Out {
    pub json: bool,
    colour: bool,
}

impl Out {
    /// Colour only when stdout is a terminal and `NO_COLOR` is not set.
    pub fn new(json: bool) -> Out {
        let colour = !json && std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty());
        Out { json, colour }
    }

    /// A human line (nothing with `--json`).
    pub fn line(&self, text: impl std::fmt::Display) {
        if !self.json {
            print_line(text);
        }
    }

    /// The JSON value (nothing without `--json`).
    pub fn json<T: Serialize + ?Sized>(&self, value: &T) {
        if self.json {
            print_json(value);
        }
    }

    pub fn bold(&self, text: &str) -> String {
        self.paint("1", text)
    }

    pub fn dim(&self, text: &str) -> String {
        self.paint("2", text)
    }

    pub fn good(&self, text: &str) -> String {
        self.paint("32", text)
    }

    pub fn bad(&self, text: &str) -> String {
        self.paint("31", text)
    }

    pub fn warn(&self, text: &str) -> String {
        self.paint("33", text)
    }

    fn paint(&self, code: &str, text: &str) -> String {
        if self.colour {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

/// A note on stderr that does not stop the command (`warning: ...`).
pub fn warn(message: impl std::fmt::Display) {
    eprintln!("warning: {}", secrets::scrub(&message.to_string()));
}

/// Rows padded into columns; the last column is not padded.
pub fn table(rows: &[Vec<String>]) -> Vec<String> {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> =
        (0..columns).map(|i| rows.iter().filter_map(|row| row.get(i)).map(|cell| cell.chars().count()).max().unwrap_or(0)).collect();
    rows.iter()
        .map(|row| {
            let mut line = String::new();
            for (i, cell) in row.iter().enumerate() {
                if i + 1 == row.len() {
                    line.push_str(cell);
                } else {
                    line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
                }
            }
            line.trim_end().to_string()
        })
        .collect()
}

/// A content block as text for people: text as it is, anything else as a
/// one-line summary (`--json` shows it whole).
pub fn content_text(content: &ContentBlock) -> String {
    match content {
        ContentBlock::Text(text) => text.text.clone(),
        ContentBlock::Image(image) => format!("[image {}, {} bytes base64]", image.mime_type, image.data.len()),
        ContentBlock::Audio(audio) => format!("[audio {}, {} bytes base64]", audio.mime_type, audio.data.len()),
        ContentBlock::ResourceLink(link) => format!("[resource link {} ({})]", link.uri, link.name),
        ContentBlock::Resource(embedded) => resource_text(&embedded.resource),
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// Resource contents as text: the text, or a summary of a blob.
pub fn resource_text(contents: &ResourceContents) -> String {
    match contents {
        ResourceContents::TextResourceContents { text, .. } => text.clone(),
        ResourceContents::BlobResourceContents { uri, mime_type, blob, .. } => {
            format!("[{uri}: {}, {} bytes base64; --json shows the data]", mime_type.as_deref().unwrap_or("binary"), blob.len())
        }
        other => serde_json::to_string(other).unwrap_or_default(),
    }
}

/// The first line of an optional text (descriptions in tables).
pub fn first_line(text: Option<&str>) -> String {
    text.and_then(|t| t.lines().next()).unwrap_or_default().to_string()
}

/// A listed item (resource or template) with its server, for `--json`.
pub fn with_server<T: Serialize>(server: &str, item: &T) -> serde_json::Value {
    let mut value = serde_json::to_value(item).unwrap_or_default();
    if let Some(object) = value.as_object_mut() {
        object.insert("server".into(), server.into());
    }
    value
}

/// A list of a server that does not offer it is empty, not an error.
pub fn offered<T>(result: Result<Vec<T>, CallError>) -> Result<Vec<T>, Failure> {
    match result {
        Err(CallError::Unsupported { .. }) => Ok(Vec::new()),
        other => other.map_err(Failure::from),
    }
}
