//! What the command line prints: human text (coloured only on a terminal)
//! or JSON on stdout, errors on stderr, and the exit code.
//!
//! An error is one line on stderr starting with `error:`; details that do
//! not fit on it (a server's last stderr lines) follow, indented. With
//! `--json` the same error is also printed on stdout as
//! `{"error": {"message", "exit_code"}}`, so a script reading stdout
//! always gets JSON.
//!
//! Everything for stdout goes through [`print_line`], which flushes and
//! notices lost output; every human text goes through [`terminal_safe`].

use std::borrow::Cow;
use std::io::IsTerminal;
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use rmcp::model::{ContentBlock, ResourceContents};
use serde::Serialize;

use super::{secrets, EXIT_CONNECTION, EXIT_OUTPUT, EXIT_USAGE};
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
            | CallError::Withheld { .. }
            | CallError::SecretBlocked { .. }
            | CallError::Flagged { .. }
            | CallError::Disabled { .. } => EXIT_USAGE,
            _ => EXIT_CONNECTION,
        };
        Failure { code, message: error.to_string() }
    }
}

/// Prints the failure, if any, and turns the result into the exit code.
/// Output lost on stdout (see [`lost_output`]) makes it a failure too.
pub fn finish(result: Result<u8, Failure>, json: bool) -> ExitCode {
    let code = match result {
        Ok(code) => code,
        Err(failure) => {
            let message = secrets::scrub(&failure.message).into_owned();
            let mut lines = message.lines();
            eprintln!("error: {}", terminal_safe(lines.next().unwrap_or_default(), Layout::OneLine));
            for line in lines {
                eprintln!("  {}", terminal_safe(line.trim_start(), Layout::OneLine));
            }
            if json {
                print_json(&serde_json::json!({"error": {"message": message, "exit_code": failure.code}}));
            }
            failure.code
        }
    };
    exit_code(code)
}

/// `code`, unless output was lost on stdout: then an error on stderr and [`EXIT_OUTPUT`].
pub fn exit_code(code: u8) -> ExitCode {
    match lost_output() {
        Some(error) => {
            eprintln!("error: the output could not be written to stdout ({error}); it is incomplete");
            ExitCode::from(if code == 0 { EXIT_OUTPUT } else { code })
        }
        None => ExitCode::from(code),
    }
}

/// Set once stdout cannot take more: a closed pipe (quietly) or a write error.
static STDOUT_DONE: AtomicBool = AtomicBool::new(false);
/// The write error that lost output, if any (a closed pipe is not one).
static STDOUT_ERROR: Mutex<Option<String>> = Mutex::new(None);

/// Writes a line to stdout and flushes it: every byte the command line
/// prints on stdout goes through here. A closed pipe (`mcpvisor ... | head`)
/// ends the output quietly, as Unix tools do (SIGPIPE stays ignored, as
/// Rust sets it: a server's closed stdin must not kill us); any other write
/// error ends it too and is reported by `exit_code`.
pub fn print_line(text: impl std::fmt::Display) {
    use std::io::Write;
    if STDOUT_DONE.load(Ordering::Relaxed) {
        return;
    }
    let mut stdout = std::io::stdout().lock();
    let Err(error) = writeln!(stdout, "{text}").and_then(|()| stdout.flush()) else { return };
    STDOUT_DONE.store(true, Ordering::Relaxed);
    if error.kind() != std::io::ErrorKind::BrokenPipe {
        let mut lost = STDOUT_ERROR.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
        lost.get_or_insert_with(|| error.to_string());
    }
}

/// The error that made stdout lose output, if any.
pub fn lost_output() -> Option<String> {
    STDOUT_ERROR.lock().unwrap_or_else(|poisoned| poisoned.into_inner()).clone()
}

/// Pretty JSON on stdout, secrets masked inside its strings.
pub fn print_json<T: Serialize + ?Sized>(value: &T) {
    match serde_json::to_value(value) {
        Ok(mut value) => {
            secrets::scrub_json(&mut value);
            print_json_verbatim(&value);
        }
        Err(e) => eprintln!("error: cannot write JSON: {e}"),
    }
}

/// One line of compact JSON on stdout (JSON lines), secrets masked inside its strings.
pub fn print_json_line<T: Serialize + ?Sized>(value: &T) {
    match serde_json::to_value(value) {
        Ok(mut value) => {
            secrets::scrub_json(&mut value);
            print_line(value);
        }
        Err(e) => eprintln!("error: cannot write JSON: {e}"),
    }
}

/// Pretty JSON on stdout, exactly as given.
fn print_json_verbatim<T: Serialize + ?Sized>(value: &T) {
    match serde_json::to_string_pretty(value) {
        Ok(text) => print_line(text),
        Err(e) => eprintln!("error: cannot write JSON: {e}"),
    }
}

/// Whether a text may span lines when shown.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// A name, a table cell, a status: newlines and tabs are escaped too.
    OneLine,
    /// A message or a tool's text: newlines and tabs stay (`\r\n` becomes `\n`).
    Block,
}

/// `text` safe to print on a terminal: control characters (C0, DEL, C1,
/// so every escape sequence), and bidirectional overrides and isolates
/// are shown escaped (`\u{1b}`, `\n`), so a server cannot move the
/// cursor, recolour or retitle the terminal, or make text read otherwise
/// than it is. Every human text goes through here; `--json` does not.
pub fn terminal_safe(text: &str, layout: Layout) -> Cow<'_, str> {
    let kept = |c: char| layout == Layout::Block && (c == '\n' || c == '\t');
    let unsafe_char = |c: char| (c.is_control() && !kept(c)) || is_bidi_control(c);
    if !text.chars().any(unsafe_char) {
        return Cow::Borrowed(text);
    }
    let text = if layout == Layout::Block { Cow::Owned(text.replace("\r\n", "\n")) } else { Cow::Borrowed(text) };
    let mut safe = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if unsafe_char(c) {
            safe.extend(c.escape_default());
        } else {
            safe.push(c);
        }
    }
    Cow::Owned(safe)
}

/// Characters that reorder the text around them (Trojan Source).
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// A report's text as shown on a terminal: secrets masked, then made safe.
pub fn report_text(text: &str, layout: Layout) -> String {
    terminal_safe(&secrets::scrub(text), layout).into_owned()
}

/// How a piece of a human line is painted (on a terminal only).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paint {
    Plain,
    Bold,
    Dim,
    Good,
    Bad,
    Warn,
}

/// A piece of a human line: its text and its paint. The text is made safe
/// ([`Layout::OneLine`]) before the colour codes are put around it.
#[derive(Debug, Clone)]
pub struct Piece(pub Paint, pub String);

impl Piece {
    pub fn plain(text: impl Into<String>) -> Piece {
        Piece(Paint::Plain, text.into())
    }
}

/// Where a command's result goes: JSON, or text for people.
///
/// What mcpvisor reports ([`Out::line`], [`Out::json`]) is redacted; what
/// a server answered ([`Out::answer`], [`Out::answer_json`]) is shown as
/// answered (`secrets` says why). Human text is always made
/// [`terminal_safe`]; JSON keeps exact values.
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

    /// A human line of mcpvisor's report (nothing with `--json`).
    pub fn line(&self, text: impl std::fmt::Display) {
        if !self.json {
            print_line(report_text(&text.to_string(), Layout::Block));
        }
    }

    /// A human line made of painted pieces (nothing with `--json`).
    pub fn pieces(&self, pieces: impl IntoIterator<Item = Piece>) {
        if self.json {
            return;
        }
        let mut line = String::new();
        for Piece(paint, text) in pieces {
            let text = report_text(&text, Layout::OneLine);
            let code = match paint {
                Paint::Plain => None,
                Paint::Bold => Some("1"),
                Paint::Dim => Some("2"),
                Paint::Good => Some("32"),
                Paint::Bad => Some("31"),
                Paint::Warn => Some("33"),
            };
            match code.filter(|_| self.colour) {
                Some(code) => line.push_str(&format!("\x1b[{code}m{text}\x1b[0m")),
                None => line.push_str(&text),
            }
        }
        print_line(line);
    }

    /// A human line of a server's answer, unredacted (nothing with `--json`).
    pub fn answer(&self, text: impl std::fmt::Display) {
        if !self.json {
            print_line(terminal_safe(&text.to_string(), Layout::Block));
        }
    }

    /// The JSON value of mcpvisor's report, redacted (nothing without `--json`).
    pub fn json<T: Serialize + ?Sized>(&self, value: &T) {
        if self.json {
            print_json(value);
        }
    }

    /// A JSON array of mcpvisor's report, redacted, written item by item:
    /// the items are made only with `--json`, and never all at once, so a
    /// long list costs one item's memory. The text is what pretty-printing
    /// the whole array gives.
    pub fn json_array<T: Serialize>(&self, items: impl IntoIterator<Item = T>) {
        if !self.json {
            return;
        }
        let mut items = items.into_iter().peekable();
        if items.peek().is_none() {
            return print_line("[]");
        }
        print_line("[");
        while let Some(item) = items.next() {
            let mut value = match serde_json::to_value(&item) {
                Ok(value) => value,
                Err(e) => return eprintln!("error: cannot write JSON: {e}"),
            };
            secrets::scrub_json(&mut value);
            let text = serde_json::to_string_pretty(&value).unwrap_or_default();
            let separator = if items.peek().is_some() { "," } else { "" };
            print_line(format_args!("  {}{separator}", text.replace('\n', "\n  ")));
        }
        print_line("]");
    }

    /// The JSON value of a server's answer, exactly (nothing without `--json`).
    pub fn answer_json<T: Serialize + ?Sized>(&self, value: &T) {
        if self.json {
            print_json_verbatim(value);
        }
    }
}

/// A note on stderr that does not stop the command (`warning: ...`).
pub fn warn(message: impl std::fmt::Display) {
    eprintln!("warning: {}", report_text(&message.to_string(), Layout::Block));
}

/// Rows padded into columns; the last column is not padded. Cells are
/// made [`terminal_safe`] on one line first, so no cell breaks the table.
/// Lines are made one at a time, as they are printed.
pub fn table(rows: &[Vec<String>]) -> impl Iterator<Item = String> + '_ {
    aligned(rows.iter())
}

/// [`table`] of rows made as they are walked: `rows` is walked twice (the
/// widths, then the lines), so a long table is never held whole.
pub fn aligned<R>(rows: impl Iterator<Item = R> + Clone) -> impl Iterator<Item = String>
where
    R: AsRef<[String]>,
{
    let mut widths: Vec<usize> = Vec::new();
    for row in rows.clone() {
        for (i, cell) in row.as_ref().iter().enumerate() {
            let width = terminal_safe(cell, Layout::OneLine).chars().count();
            match widths.get_mut(i) {
                Some(widest) => *widest = width.max(*widest),
                None => widths.push(width),
            }
        }
    }
    rows.map(move |row| {
        let row = row.as_ref();
        let mut line = String::new();
        for (i, cell) in row.iter().enumerate() {
            let cell = terminal_safe(cell, Layout::OneLine);
            if i + 1 == row.len() {
                line.push_str(&cell);
            } else {
                line.push_str(&format!("{cell:<width$}  ", width = widths[i]));
            }
        }
        line.trim_end().to_string()
    })
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
        Err(error) if not_offered(&error).is_some() => Ok(Vec::new()),
        other => other.map_err(Failure::from),
    }
}

/// Why `error` means the server does not offer what was asked, if it does:
/// the runtime knows the capability is missing, or the server answered
/// -32601 (method not found). The runtime sends `resources/list` and
/// `prompts/list` whatever the server announced, so a server that
/// announced only tools answers the latter, and that is no failure.
pub fn not_offered(error: &CallError) -> Option<String> {
    match error {
        CallError::Unsupported { capability, .. } => Some(format!("not offered (no {capability} capability)")),
        CallError::Rpc { code: METHOD_NOT_FOUND, tool, .. } => Some(format!("not offered (the server does not implement {tool})")),
        _ => None,
    }
}

/// JSON-RPC's "method not found".
const METHOD_NOT_FOUND: i64 = -32601;
