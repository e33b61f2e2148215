//! The `mcpvisor` command line: one file per command group.
//!
//! Exit codes: 0 ok; 1 the tool answered `isError`; 2 usage or
//! configuration error; 3 connection or protocol error (and a demo whose
//! runtime did not behave as designed).

mod demo;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::demo_server::{self, DemoServerOptions};

#[derive(Debug, Parser)]
#[command(name = "mcpvisor", version, about = "Keeps MCP servers alive and answers every call, or says clearly why not")]
pub struct Cli {
    /// Machine-readable JSON on stdout.
    #[arg(long, global = true)]
    pub json: bool,
    /// More log output on stderr (-v info, -vv debug, -vvv trace).
    #[arg(short, long, action = clap::ArgAction::Count, global = true)]
    pub verbose: u8,
    /// No log output on stderr.
    #[arg(short, long, global = true, conflicts_with = "verbose")]
    pub quiet: bool,
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Start three demo servers, call them concurrently, kill one with SIGKILL
    /// mid-call, and show what the callers got, the restart and the final status.
    Demo,
    /// Run the bundled MCP server on stdin/stdout (the peer of tests and the demo).
    DemoServer(DemoServerOptions),
}

pub const EXIT_TOOL_ERROR: u8 = 1;
pub const EXIT_USAGE: u8 = 2;
pub const EXIT_CONNECTION: u8 = 3;

pub fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::DemoServer(options) => ExitCode::from(demo_server::run(options).clamp(0, 255) as u8),
        Command::Demo => {
            init_logging(&cli, "error");
            demo::run(cli.json)
        }
    }
}

/// Writes a line to stdout. A closed stdout (`mcpvisor ... | head`) is not
/// an error worth a panic: the rest of the output is dropped. (SIGPIPE stays
/// ignored, as Rust sets it: a server's closed stdin must not kill us.)
pub fn print_line(text: impl std::fmt::Display) {
    use std::io::Write;
    let _ = writeln!(std::io::stdout().lock(), "{text}");
}

/// Logs go to stderr; `RUST_LOG` overrides the verbosity flags.
fn init_logging(cli: &Cli, default: &str) {
    let level = match (cli.quiet, cli.verbose) {
        (true, _) => "off",
        (false, 0) => default,
        (false, 1) => "info",
        (false, 2) => "debug",
        _ => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).try_init();
}
