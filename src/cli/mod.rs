//! The `mcpvisor` command line: one file per command group.
//!
//! | file | commands |
//! | --- | --- |
//! | `manage` | `add`, `remove`, `enable`, `disable` (edit mcpvisor's TOML) |
//! | `import` | `import` (list other tools' configurations, or copy them) |
//! | `trust` | `trust` (which project folders may start their servers) |
//! | `config` | `config schema` (the JSON Schema of mcpvisor's TOML) |
//! | `show` | `list`, `info` (configuration only, nothing is started) |
//! | `status` | `status`, `test` |
//! | `top` | `top` (a live view of the pool, local or a gateway's through `/admin`) |
//! | `tools` | `tools`, `call` |
//! | `resources` | `resources`, `read` |
//! | `prompts` | `prompts`, `prompt` |
//! | `agent` | `agent` (one prompt, or a chat) |
//! | `auth` | `auth`, `logout` (OAuth logins of remote servers) |
//! | `acp` | `acp` (the agent served to an editor over ACP) |
//! | `serve` | `serve` (every server served as one MCP server over stdio; `serve_http`: `--http`) |
//! | `demo` | `demo` (and `demo-server`, run from here) |
//!
//! Shared parts: `untrusted` (the notice about project files left out,
//! and what their servers would run), `environ` (our own environment block emptied at start,
//! so `/proc/PID/environ` shows no secret), `servers` (which servers a command sees), `nesting` (a
//! gateway never starts itself), `session` (a runtime for one command,
//! with spinners), `catalog` (the tools `tools` shows, live or from the
//! tool cache), `arguments` (`--arg k=v`),
//! `secrets` (scrubbing secret values from everything printed) and
//! `output` (human or JSON output, errors, exit codes).
//!
//! Exit codes: 0 ok; 1 the tool answered `isError`; 2 usage or
//! configuration error; 3 connection or protocol error (and a demo whose
//! runtime did not behave as designed); 4 the output could not be written.

mod accept;
mod acp;
mod agent;
mod arguments;
mod auth;
mod catalog;
mod config;
mod demo;
#[cfg(test)]
mod documented_examples;
mod environ;
mod import;
mod manage;
mod nesting;
mod otel;
mod output;
mod prompts;
mod resources;
mod scan;
mod secrets;
mod serve;
mod serve_access;
mod serve_audit;
mod serve_http;
mod serve_logins;
mod servers;
mod session;
mod show;
mod status;
mod tools;
mod top;
mod trust;
mod untrusted;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Parser, Subcommand};

use crate::demo_server::{self, DemoServerOptions};
pub use output::{print_line, Failure};

#[derive(Debug, Parser)]
#[command(name = "mcpvisor", version, about = "Keeps MCP servers alive and answers every call, or says clearly why not")]
pub struct Cli {
    /// Use only this configuration file (mcpvisor TOML, or an editor's JSON
    /// such as .mcp.json), instead of the user's and the project's files.
    #[arg(long, global = true, value_name = "FILE")]
    pub config: Option<PathBuf>,
    /// Machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// More log output on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// No log output on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Start at most N servers in one command (default 200, or
    /// $MCPVISOR_MAX_SERVERS); more is an error naming the count.
    #[arg(long, global = true, value_name = "N")]
    pub max_servers: Option<usize>,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Add a server to mcpvisor's configuration: `add NAME -- COMMAND [ARGS...]` or `add NAME --url URL`.
    Add(manage::AddArgs),
    /// Remove a server from mcpvisor's configuration.
    Remove(manage::NameArgs),
    /// Enable a server.
    Enable(manage::NameArgs),
    /// Disable a server (it stays configured but is not started).
    Disable(manage::NameArgs),
    /// List other tools' MCP configurations (Claude Code, Codex, Gemini CLI, Cursor, VS Code, Windsurf, Zed, ...), or copy a tool's or a file's servers into mcpvisor's.
    Import(import::ImportArgs),
    /// Trust a project folder (default: the current one): its project files (.mcp.json, .mcpvisor.toml, ...) start servers only once trusted, and only as they are now.
    Trust(trust::TrustArgs),
    /// mcpvisor's configuration file: `config schema` prints its JSON Schema (for editors: Taplo's `#:schema`).
    Config(config::ConfigArgs),
    /// List the configured servers and where each is defined (starts nothing).
    List,
    /// Show one server's whole configuration, secrets redacted (starts nothing).
    Info(show::InfoArgs),
    /// Start the enabled servers and show each one's state.
    Status,
    /// Connect to one server step by step, timing each step and explaining failures.
    Test(status::TestArgs),
    /// A live view of the servers (state, calls/s, latency, errors, CPU, memory), started here or a gateway's (`--url`); keys to sort, filter, restart, enable, disable.
    Top(top::TopArgs),
    /// List the tools of every server (or one), optionally searching names and descriptions.
    Tools(tools::ToolsArgs),
    /// Call a tool: `call SERVER TOOL [JSON] [--arg k=v]...`.
    Call(tools::CallArgs),
    /// Read every tool's texts for hidden Unicode, instructions to the model, shadowing of other servers' tools and data-carrying URLs.
    Scan(scan::ScanArgs),
    /// List the resources and resource templates of every server (or one).
    Resources(resources::ResourcesArgs),
    /// Read a resource: `read SERVER URI`.
    Read(resources::ReadArgs),
    /// List the prompts of every server (or one).
    Prompts(prompts::PromptsArgs),
    /// Get a prompt: `prompt SERVER NAME [--arg k=v]...`.
    Prompt(prompts::PromptArgs),
    /// Talk to a model that uses every configured server's tools: `agent -p PROMPT` for one answer, or a chat.
    Agent(agent::AgentArgs),
    /// Log in to a remote server with OAuth (opens a browser; prints the URL too).
    Auth(auth::AuthArgs),
    /// Forget the OAuth tokens kept for a server.
    Logout(auth::LogoutArgs),
    /// Serve the agent to an editor (Zed, JetBrains, ...) over the Agent Client Protocol on stdin/stdout.
    Acp(acp::AcpArgs),
    /// Serve every configured server as one MCP server on stdin/stdout (`--server NAME`: just that one, names unchanged).
    Serve(serve::ServeArgs),
    /// Start three demo servers, call them concurrently, kill one with SIGKILL
    /// mid-call, and show what the callers got, the restart and the final status.
    Demo,
    /// Run the bundled MCP server on stdin/stdout (the peer of tests and the demo).
    DemoServer(DemoServerOptions),
}

pub const EXIT_TOOL_ERROR: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_CONNECTION: u8 = 3;
/// The command's output could not be written to stdout (a full disk, an I/O error).
pub const EXIT_OUTPUT: u8 = 4;
/// The shell's convention for a command stopped by a signal (128 + SIGINT).
pub const EXIT_INTERRUPTED: u8 = 130;

pub fn main() -> ExitCode {
    // First, while no thread exists: our secrets leave /proc/PID/environ.
    environ::empty_initial_block();
    let cli = Cli::parse();
    match &cli.command {
        Command::DemoServer(options) => ExitCode::from(demo_server::run(options.clone()).clamp(0, 255) as u8),
        Command::Demo => {
            init_logging(&cli, "error");
            output::exit_code(demo::run(cli.json))
        }
        _ => {
            // Servers' errors are reported by the commands themselves.
            init_logging(&cli, "off");
            output::finish(run(&cli), cli.json)
        }
    }
}

/// Every command but the demo ones: a result of `Ok(exit code)` or a failure.
fn run(cli: &Cli) -> Result<u8, Failure> {
    let out = output::Out::new(cli.json);
    match &cli.command {
        Command::Add(args) => manage::add(cli, &out, args),
        Command::Remove(args) => manage::remove(cli, &out, args),
        Command::Enable(args) => manage::set_enabled(cli, &out, args, true),
        Command::Disable(args) => manage::set_enabled(cli, &out, args, false),
        Command::Import(args) => import::import(cli, &out, args),
        Command::Trust(args) => trust::trust(cli, &out, args),
        Command::Config(args) => config::run(cli, args),
        Command::List => show::list(cli, &out),
        Command::Info(args) => show::info(cli, &out, args),
        Command::Status => with_runtime(|| status::status(cli, &out)),
        Command::Test(args) => with_runtime(|| status::test(cli, &out, args)),
        Command::Top(args) => with_runtime(|| top::run(cli, &out, args)),
        Command::Tools(args) => with_runtime(|| tools::tools(cli, &out, args)),
        Command::Call(args) => with_runtime(|| tools::call(cli, &out, args)),
        Command::Scan(args) => with_runtime(|| scan::scan(cli, &out, args)),
        Command::Resources(args) => with_runtime(|| resources::resources(cli, &out, args)),
        Command::Read(args) => with_runtime(|| resources::read(cli, &out, args)),
        Command::Prompts(args) => with_runtime(|| prompts::prompts(cli, &out, args)),
        Command::Prompt(args) => with_runtime(|| prompts::prompt(cli, &out, args)),
        Command::Agent(args) => agent::run(cli, args),
        Command::Auth(args) => with_runtime(|| auth::auth(cli, &out, args)),
        Command::Logout(args) => auth::logout(&out, args),
        Command::Acp(args) => acp::run(cli, args),
        Command::Serve(args) => serve::run(cli, args),
        Command::Demo | Command::DemoServer(_) => unreachable!("handled in main"),
    }
}

/// Runs a command that talks to servers on a small tokio runtime (the
/// actors themselves run on the runtime's own thread).
///
/// Ctrl-C (SIGINT) or SIGTERM stops the command: dropping it drops its
/// runtime handle, which stops every server it started (stdin closed,
/// SIGTERM, SIGKILL, reaped) before the process exits with 130. The servers
/// run in their own process groups, so without this they would outlive us.
fn with_runtime<F, Fut>(command: F) -> Result<u8, Failure>
where
    F: FnOnce() -> Fut,
    Fut: std::future::Future<Output = Result<u8, Failure>>,
{
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| Failure::connection(format!("cannot start a tokio runtime: {e}")))?;
    runtime.block_on(async {
        tokio::select! {
            result = command() => result,
            signal = interrupted() => Err(stopped_by(signal)),
        }
    })
}

/// The failure of a command that `signal` stopped.
fn stopped_by(signal: &str) -> Failure {
    Failure { code: EXIT_INTERRUPTED, message: format!("interrupted by {signal}; the servers were stopped") }
}

/// Resolves on SIGINT or SIGTERM, naming it; never, if neither can be watched.
async fn interrupted() -> &'static str {
    use tokio::signal::unix::{signal, SignalKind};
    match (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) {
        (Ok(mut int), Ok(mut term)) => tokio::select! {
            _ = int.recv() => "Ctrl-C (SIGINT)",
            _ = term.recv() => "SIGTERM",
        },
        _ => std::future::pending().await,
    }
}

/// Seconds, as a positive number (fractions allowed).
pub fn parse_seconds(text: &str) -> Result<Duration, String> {
    match text.parse::<f64>() {
        Ok(secs) if secs > 0.0 && secs.is_finite() && secs < 1e9 => Ok(Duration::from_secs_f64(secs)),
        _ => Err(format!("`{text}` is not a number of seconds greater than zero, like 30 or 2.5")),
    }
}

/// Logs go to stderr, with secret values scrubbed; `RUST_LOG` overrides the
/// verbosity flags.
fn init_logging(cli: &Cli, default: &str) {
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "off",
        (false, 0) => default,
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let ansi = std::io::IsTerminal::is_terminal(&std::io::stderr());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_ansi(ansi).with_writer(secrets::log_writer()).try_init();
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_definition_is_consistent() {
        use clap::CommandFactory;
        super::Cli::command().debug_assert();
    }
}
