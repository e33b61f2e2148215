//! The audit log: one JSON line per tool call, written by a thread of its
//! own, to a file rotated by size or to stdout.
//!
//! A line: `{"time":"2026-11-23T16:31:32.120Z","caller":"…","server":"fs",
//! "tool":"read","arguments":{"sha256":"…"},"duration_ms":12.5,
//! "outcome":"ok","error_kind":null}`. `caller` is the label the call
//! carried (`CallTool::with_caller`: a gateway puts its client session
//! there), `null` if none; `subject` and `client_id` are those of the
//! identity the caller proved to the gateway (`[serve.auth]` tokens, keys;
//! `"token"` for the shared token), both absent without one. `arguments` is the SHA-256 of the arguments'
//! JSON (keys sorted), or, with [`AuditArguments::Redacted`], the arguments
//! with secrets masked by the crate's one rule ([`Redactor::named_json`]):
//! values under secret-looking keys (`token`, `password`, `api_key`, ...)
//! that could be secrets, exactly as a configuration's `env` values are,
//! and every secret of the server's configuration or with a secret's shape.
//! `outcome` is a [`Outcome`] label; `error_kind` the [`CallError::kind`].
//! `secrets`, present only when some were found, lists the secrets found in
//! the call's arguments and result by kind, never their values:
//! `[{"direction":"results","kind":"private_key","action":"masked","count":1}]`.
//! `upstream`, present only for a server that acts as each caller (auth type
//! `token_exchange`, or `per_caller`), is who the call reached it as, never
//! the token: `{"subject":"alice","audience":"https://jira.example","scope":"read"}`,
//! or `{"subject":"alice","audience":"process of issuer:alice"}` (a process of the caller's own).
//!
//! A call the gateway refused before it reached a server is a line too
//! ([`AuditLog::refused`]): `outcome` `denied` (the access policy, `rule`
//! naming the denying rule, `null` for the default), `rate_limited` (the
//! caller's own limit) or `error` (`error_kind` `unknown_tool`, `server`
//! `null`), `duration_ms` 0. An admin action is a line with `action`
//! (`restart`, `enable`, `disable`) instead of `tool` and `arguments`, its
//! caller's `subject`, and `outcome` `ok` or `error` ([`AuditLog::admin`]).
//!
//! Invariants:
//! - a call never waits for the disk: lines go through a bounded channel
//!   ([`AuditConfig::buffer`]); when it is full the line is dropped and
//!   counted ([`AuditLog::dropped`], `mcpvisor_audit_dropped_total`);
//! - a file never grows past `max_size` by more than one line: before a
//!   line that would pass it, `FILE` becomes `FILE.1`, `FILE.1` becomes
//!   `FILE.2`, ..., and `FILE.{keep}` is deleted (`keep = 0` keeps none);
//! - every line is one JSON object followed by `\n`;
//! - a line is on disk within a few milliseconds of its call's end (the
//!   writer wakes at most once per `GATHER` while calls keep coming).
//!
//! [`CallError::kind`]: crate::error::CallError::kind

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde_json::Value;

use super::{CallStart, Outcome};
use crate::config::redact::{Redactor, SecretKind};
pub use crate::config::{AuditArguments, AuditConfig, AuditTarget};
use crate::config::{Direction, SecretAction};
use crate::identity::Identity;

/// How long the writer lets lines gather after each write: at most this
/// late on disk, and at most `buffer` lines in the meantime.
const GATHER: Duration = Duration::from_millis(5);

enum Job {
    /// A finished call, written as a line on the writer's thread (the
    /// formatting stays off the calls' thread).
    Line(Box<Finished>),
    /// An admin action's line.
    Admin(Box<AdminLine>),
    /// Answered once every line sent before it is written and flushed.
    Flush(std::sync::mpsc::Sender<()>),
}

/// The sending side of the audit log; cheap to clone. The writer thread
/// ends when the last clone is dropped, after writing what was queued.
#[derive(Debug, Clone)]
pub struct AuditLog {
    jobs: SyncSender<Job>,
    dropped: Arc<AtomicU64>,
    arguments: AuditArguments,
}

impl AuditLog {
    /// Opens the target and starts the writer thread.
    pub fn start(config: AuditConfig) -> io::Result<AuditLog> {
        let writer = Writer::open(&config)?;
        let (jobs, queue) = sync_channel(config.buffer.max(1));
        std::thread::Builder::new().name("mcpvisor-audit".into()).spawn(move || writer.run(queue))?;
        Ok(AuditLog { jobs, dropped: Arc::default(), arguments: config.arguments })
    }

    /// Lines dropped so far because the writer was behind.
    pub fn dropped(&self) -> u64 {
        self.dropped.load(Relaxed)
    }

    /// Waits (blocking, at most `timeout`) until every line sent so far is
    /// written and flushed; false if the writer did not answer in time.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (done, wait) = std::sync::mpsc::channel();
        self.jobs.send(Job::Flush(done)).is_ok() && wait.recv_timeout(timeout).is_ok()
    }

    pub(super) fn draft(&self, call: &CallStart<'_>) -> Draft {
        let mut draft = self.draft_of(call.caller, call.identity, Some(call.server), call.tool, call.arguments, call.redactor);
        draft.upstream = call.upstream.cloned();
        draft
    }

    fn draft_of(
        &self,
        caller: Option<&str>,
        identity: Option<&Identity>,
        server: Option<&str>,
        tool: &str,
        arguments: Option<&serde_json::Map<String, Value>>,
        redactor: &Redactor,
    ) -> Draft {
        let arguments = match (self.arguments, arguments) {
            (_, None) => Value::Null,
            (AuditArguments::Digest, Some(arguments)) => {
                let json = serde_json::to_vec(arguments).unwrap_or_default();
                let digest = ring::digest::digest(&ring::digest::SHA256, &json);
                serde_json::json!({ "sha256": hex(digest.as_ref()) })
            }
            (AuditArguments::Redacted, Some(arguments)) => redacted(arguments, redactor),
        };
        Draft {
            time: SystemTime::now(),
            caller: caller.map(str::to_owned),
            subject: identity.map(|identity| identity.subject.clone()),
            client_id: identity.and_then(|identity| identity.client_id.clone()),
            server: server.map(str::to_owned),
            tool: tool.to_owned(),
            arguments,
            rule: None,
            secrets: Vec::new(),
            upstream: None,
        }
    }

    /// Queues the line of a call that ended (`took`, `outcome`, `error_kind`).
    pub(super) fn write(&self, draft: Draft, took: Duration, outcome: Outcome, error_kind: Option<&'static str>) {
        self.send(Job::Line(Box::new(Finished { draft, took, outcome: outcome.label(), error_kind })));
    }

    /// Queues the line of a call refused before it reached a server (see the module).
    pub fn refused(&self, call: &RefusedCall<'_>) {
        let mut draft = self.draft_of(call.caller, call.identity, call.server, call.tool, call.arguments, call.redactor);
        draft.rule = call.rule.map(str::to_owned);
        let (outcome, error_kind) = match call.why {
            Refusal::Denied => ("denied", Some("policy")),
            Refusal::RateLimited => (Outcome::RateLimited.label(), Some("rate_limited")),
            Refusal::UnknownTool => (Outcome::Error.label(), Some("unknown_tool")),
        };
        self.send(Job::Line(Box::new(Finished { draft, took: Duration::ZERO, outcome, error_kind })));
    }

    /// Queues the line of an admin action on `server` by `identity` (none:
    /// a caller without credentials, on loopback); `error` when it failed.
    pub fn admin(&self, identity: Option<&Identity>, server: &str, action: &str, error: Option<&str>) {
        let line = AdminLine {
            time: SystemTime::now(),
            subject: identity.map(|identity| identity.subject.clone()),
            client_id: identity.and_then(|identity| identity.client_id.clone()),
            server: server.to_owned(),
            action: action.to_owned(),
            error: error.map(str::to_owned),
        };
        self.send(Job::Admin(Box::new(line)));
    }

    fn send(&self, job: Job) {
        if let Err(TrySendError::Full(_)) = self.jobs.try_send(job) {
            self.dropped.fetch_add(1, Relaxed);
        }
    }
}

/// A call the gateway refused before it reached a server.
pub struct RefusedCall<'a> {
    pub caller: Option<&'a str>,
    pub identity: Option<&'a Identity>,
    /// `None` when the name leads to no server.
    pub server: Option<&'a str>,
    /// The server's own name of the tool, or the name the client sent when it leads nowhere.
    pub tool: &'a str,
    pub arguments: Option<&'a serde_json::Map<String, Value>>,
    /// Masks secrets in redacted arguments.
    pub redactor: &'a Redactor,
    pub why: Refusal,
    /// The denying rule (`None`: the default, or no policy refusal).
    pub rule: Option<&'a str>,
}

/// Why the gateway refused a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The access policy.
    Denied,
    /// The caller's own rate limit (`[serve.caller_limits]`).
    RateLimited,
    /// No served tool has that name.
    UnknownTool,
}

/// An admin action, on its way to the writer.
struct AdminLine {
    time: SystemTime,
    subject: Option<String>,
    client_id: Option<String>,
    server: String,
    action: String,
    error: Option<String>,
}

impl AdminLine {
    fn finish(self) -> String {
        let mut line = serde_json::json!({
            "time": rfc3339(self.time),
            "caller": "admin",
            "server": self.server,
            "action": self.action,
            "outcome": if self.error.is_some() { "error" } else { "ok" },
        });
        for (field, value) in [("subject", self.subject), ("client_id", self.client_id), ("error", self.error)] {
            if let Some(value) = value {
                line[field] = Value::String(value);
            }
        }
        line.to_string()
    }
}

/// A call that ended, on its way to the writer.
struct Finished {
    draft: Draft,
    took: Duration,
    /// An [`Outcome`] label, or `denied`.
    outcome: &'static str,
    error_kind: Option<&'static str>,
}

/// A call's line, waiting for its outcome.
pub(super) struct Draft {
    time: SystemTime,
    caller: Option<String>,
    subject: Option<String>,
    client_id: Option<String>,
    server: Option<String>,
    tool: String,
    arguments: Value,
    /// The policy rule that refused the call.
    rule: Option<String>,
    /// The secrets found in the call, by kind.
    secrets: Vec<SecretsLine>,
    /// Who the call reached its server as (a server that acts as each caller).
    upstream: Option<crate::identity::Upstream>,
}

/// Secrets of one kind found in a call, as its audit line lists them.
#[derive(Serialize)]
struct SecretsLine {
    direction: &'static str,
    kind: &'static str,
    action: &'static str,
    count: u32,
}

impl Draft {
    pub(super) fn secrets(&mut self, direction: Direction, kind: SecretKind, action: SecretAction, count: u32) {
        self.secrets.push(SecretsLine { direction: direction.as_str(), kind: kind.as_str(), action: action.as_str(), count });
    }
}

#[derive(Serialize)]
struct Line<'a> {
    time: String,
    caller: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    subject: &'a Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    client_id: &'a Option<String>,
    server: &'a Option<String>,
    tool: &'a str,
    arguments: &'a Value,
    duration_ms: f64,
    outcome: &'static str,
    error_kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    rule: &'a Option<String>,
    #[serde(skip_serializing_if = "<[_]>::is_empty")]
    secrets: &'a [SecretsLine],
    #[serde(skip_serializing_if = "Option::is_none")]
    upstream: &'a Option<crate::identity::Upstream>,
}

impl Draft {
    fn finish(self, took: Duration, outcome: &'static str, error_kind: Option<&'static str>) -> String {
        let line = Line {
            time: rfc3339(self.time),
            caller: &self.caller,
            subject: &self.subject,
            client_id: &self.client_id,
            server: &self.server,
            tool: &self.tool,
            arguments: &self.arguments,
            duration_ms: (took.as_secs_f64() * 1e6).round() / 1e3,
            outcome,
            error_kind,
            rule: &self.rule,
            secrets: &self.secrets,
            upstream: &self.upstream,
        };
        serde_json::to_string(&line).unwrap_or_default()
    }
}

/// The arguments as the one redaction rule shows them ([`Redactor::named_json`]).
fn redacted(arguments: &serde_json::Map<String, Value>, redactor: &Redactor) -> Value {
    let mut value = Value::Object(arguments.clone());
    redactor.named_json(&mut value);
    value
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(2 * bytes.len());
    for byte in bytes {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

/// `2026-11-23T16:31:32.120Z`.
fn rfc3339(time: SystemTime) -> String {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or_default();
    let (days, rest) = ((since.as_secs() / 86_400) as i64, since.as_secs() % 86_400);
    let (year, month, day) = crate::civil_date::civil_from_days(days);
    let (h, m, s) = (rest / 3600, rest / 60 % 60, rest % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{:03}Z", since.subsec_millis())
}

/// The writer thread's side.
struct Writer {
    target: AuditTarget,
    out: Box<dyn Write + Send>,
    size: u64,
    max_size: u64,
    keep: usize,
}

impl Writer {
    fn open(config: &AuditConfig) -> io::Result<Writer> {
        let (out, size): (Box<dyn Write + Send>, u64) = match &config.target {
            AuditTarget::Stdout => (Box::new(io::stdout()), 0),
            AuditTarget::File(path) => {
                let file = open_append(path)?;
                let size = file.metadata()?.len();
                (Box::new(BufWriter::new(file)), size)
            }
        };
        Ok(Writer { target: config.target.clone(), out, size, max_size: config.max_size, keep: config.keep })
    }

    fn run(mut self, queue: Receiver<Job>) {
        while let Ok(job) = queue.recv() {
            self.handle(job);
            // Flush when the queue is drained, not after every line.
            while let Ok(job) = queue.try_recv() {
                self.handle(job);
            }
            if let Err(error) = self.out.flush() {
                tracing::warn!("audit log: cannot write: {error}");
            }
            // Lines gather meanwhile: a busy gateway wakes this thread once
            // per GATHER, not once per call.
            std::thread::sleep(GATHER);
        }
    }

    fn handle(&mut self, job: Job) {
        match job {
            Job::Line(finished) => {
                let Finished { draft, took, outcome, error_kind } = *finished;
                if let Err(error) = self.line(&draft.finish(took, outcome, error_kind)) {
                    tracing::warn!("audit log: cannot write: {error}");
                }
            }
            Job::Admin(line) => {
                if let Err(error) = self.line(&line.finish()) {
                    tracing::warn!("audit log: cannot write: {error}");
                }
            }
            Job::Flush(done) => {
                let _ = self.out.flush();
                let _ = done.send(());
            }
        }
    }

    fn line(&mut self, line: &str) -> io::Result<()> {
        let bytes = line.len() as u64 + 1;
        if let AuditTarget::File(path) = &self.target {
            if self.size > 0 && self.size + bytes > self.max_size {
                self.out.flush()?;
                rotate(path, self.keep)?;
                self.out = Box::new(BufWriter::new(open_append(path)?));
                self.size = 0;
            }
        }
        self.out.write_all(line.as_bytes())?;
        self.out.write_all(b"\n")?;
        self.size += bytes;
        Ok(())
    }
}

/// The log holds who called what: 0600, in a directory created 0700.
fn open_append(path: &Path) -> io::Result<File> {
    crate::user_dirs::open_private_append(path)
}

/// `FILE.{n}` → `FILE.{n+1}` down to `FILE` → `FILE.1`; the oldest beyond `keep` goes.
fn rotate(path: &Path, keep: usize) -> io::Result<()> {
    let numbered = |n: usize| PathBuf::from(format!("{}.{n}", path.display()));
    if keep == 0 {
        return std::fs::remove_file(path);
    }
    let _ = std::fs::remove_file(numbered(keep));
    for n in (1..keep).rev() {
        if numbered(n).exists() {
            std::fs::rename(numbered(n), numbered(n + 1))?;
        }
    }
    std::fs::rename(path, numbered(1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::MASK;

    #[test]
    fn a_writer_that_falls_behind_makes_lines_drop_and_be_counted_never_wait() {
        let (jobs, _stuck_writer) = sync_channel(2);
        let log = AuditLog { jobs, dropped: Arc::default(), arguments: AuditArguments::Digest };
        for i in 0..5 {
            let draft = Draft {
                time: SystemTime::now(),
                caller: None,
                subject: None,
                client_id: None,
                server: Some("s".into()),
                tool: format!("t{i}"),
                arguments: Value::Null,
                rule: None,
                secrets: Vec::new(),
                upstream: None,
            };
            log.write(draft, Duration::ZERO, Outcome::Ok, None);
        }
        assert_eq!(log.dropped(), 3);
    }

    #[test]
    fn a_line_says_who_the_call_reached_its_server_as_only_when_it_acted_as_its_caller() {
        let log = AuditLog { jobs: sync_channel(1).0, dropped: Arc::default(), arguments: AuditArguments::Digest };
        let line = |upstream: Option<crate::identity::Upstream>| {
            let mut draft = log.draft_of(None, None, Some("jira"), "search", None, &Redactor::default());
            draft.upstream = upstream;
            serde_json::from_str::<Value>(&draft.finish(Duration::ZERO, "ok", None)).unwrap()
        };
        assert!(line(None).get("upstream").is_none());
        let upstream = crate::identity::Upstream { subject: "alice".into(), audience: "https://jira.example".into(), scope: None };
        assert_eq!(line(Some(upstream))["upstream"], serde_json::json!({"subject": "alice", "audience": "https://jira.example"}));
    }

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_millis(1_795_451_492_120)), "2026-11-23T16:31:32.120Z");
        assert_eq!(rfc3339(UNIX_EPOCH + Duration::from_secs(951_782_400)), "2000-02-29T00:00:00.000Z");
    }

    /// One rule: an argument is masked exactly when the same name and value
    /// in a server's `env` would be (numbers, setting words and `${VAR}`
    /// references under secret-looking names stay visible in both).
    #[test]
    fn arguments_are_masked_exactly_as_configuration_values_are() {
        let named = [
            ("API_KEY", "abc"),
            ("MAX_TOKENS", "1000"),
            ("AUTH_REQUIRED", "false"),
            ("ACCESS_TOKEN", "${TOKEN}"),
            ("PASSWORD", "hunter2"),
            ("PATH_HINT", "/tmp/x"),
            ("NOTE", "plain words"),
        ];
        let config = named.iter().fold(crate::config::ServerConfig::stdio("s", "c", ["a"]), |c, (k, v)| c.with_env(*k, *v));
        let by_config = config.redacted().env;
        let arguments = named.iter().map(|(k, v)| (k.to_string(), Value::from(*v))).collect();
        let Value::Object(by_audit) = redacted(&arguments, &Redactor::default()) else { unreachable!() };
        for (name, value) in named {
            let (config_masked, audit_masked) = (by_config[name] == MASK, by_audit[name] == MASK);
            assert_eq!(audit_masked, config_masked, "{name} = {value}: audit masked {audit_masked}, configuration {config_masked}");
        }
        assert!(by_config["API_KEY"] == MASK && by_config["MAX_TOKENS"] == "1000", "the cases cover both answers");
    }

    #[test]
    fn redaction_masks_secret_keys_and_configured_secrets_only() {
        let redactor = Redactor::with_secrets(["s3cr3t-value-123".to_string()]);
        let arguments = serde_json::json!({"path": "/tmp/x", "api_key": "abc", "nested": {"password": "p", "note": "uses s3cr3t-value-123"}, "limit": 5});
        let Value::Object(arguments) = arguments else { unreachable!() };
        let shown = redacted(&arguments, &redactor).to_string();
        assert!(!shown.contains("abc\"") && !shown.contains("s3cr3t-value-123") && !shown.contains("\"p\""), "{shown}");
        assert!(shown.contains("/tmp/x") && shown.contains("\"limit\":5"), "{shown}");
    }
}
