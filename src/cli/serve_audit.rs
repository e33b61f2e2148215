//! Where `mcpvisor serve` writes its audit log of tool calls
//! ([`crate::telemetry::audit`]): on for `serve`, opt-in elsewhere.
//!
//! The path, first found: `--audit PATH` (`-` is stdout, refused for
//! stdio `serve`, whose stdout carries the protocol); the `[audit]` table's
//! `path`; `$XDG_STATE_HOME/mcpvisor/audit.jsonl`, else
//! `~/.local/state/mcpvisor/audit.jsonl`. The table's other settings (size,
//! files kept, arguments) apply whichever path wins. `--no-audit` writes
//! none. One line on stderr at start says where the log goes.

use std::path::PathBuf;

use clap::Args;

use super::output::{warn, Failure};
use super::servers::env;
use crate::telemetry::{AuditConfig, AuditTarget, Telemetry};

/// The default file's name, in the state directory.
const DEFAULT_FILE: &str = "audit.jsonl";

#[derive(Debug, Clone, Default, Args)]
pub struct AuditArgs {
    /// Write the audit log of tool calls to PATH (`-`: stdout, with --http
    /// only) instead of [audit] path or ~/.local/state/mcpvisor/audit.jsonl.
    #[arg(long, value_name = "PATH", conflicts_with = "no_audit")]
    pub audit: Option<PathBuf>,
    /// Write no audit log.
    #[arg(long)]
    pub no_audit: bool,
}

/// The telemetry `serve` runs with: its audit log opened (and announced on
/// stderr), unless turned off. `stdio`: the protocol is on stdout.
pub fn telemetry(args: &AuditArgs, table: Option<&AuditConfig>, stdio: bool) -> Result<Telemetry, Failure> {
    let Some(config) = chosen(args, table, stdio)? else {
        eprintln!("mcpvisor: audit log off");
        return Ok(Telemetry::default());
    };
    let place = match &config.target {
        AuditTarget::Stdout => "stdout".to_string(),
        AuditTarget::File(path) => path.display().to_string(),
    };
    let telemetry = Telemetry::default().with_audit(config).map_err(|e| {
        Failure::usage(format!("cannot open the audit log {place}: {e}; pass --audit PATH for another file, or --no-audit"))
    })?;
    eprintln!("mcpvisor: audit log at {place}");
    Ok(telemetry)
}

/// Where the log goes, `None` for none.
fn chosen(args: &AuditArgs, table: Option<&AuditConfig>, stdio: bool) -> Result<Option<AuditConfig>, Failure> {
    if args.no_audit {
        return Ok(None);
    }
    let settings = table.cloned();
    let config = match &args.audit {
        Some(path) if path.as_os_str() == "-" => {
            if stdio {
                return Err(Failure::usage(
                    "--audit -: over stdio, serve's stdout carries the MCP protocol; give the audit log a file, or serve with --http",
                ));
            }
            AuditConfig { target: AuditTarget::Stdout, ..settings.unwrap_or_else(AuditConfig::stdout) }
        }
        Some(path) => AuditConfig { target: AuditTarget::File(path.clone()), ..settings.unwrap_or_else(|| AuditConfig::file(path)) },
        None => match settings {
            Some(config) if config.target == AuditTarget::Stdout && stdio => {
                return Err(Failure::usage(
                    "the [audit] table says path = \"-\" (stdout), but over stdio serve's stdout carries the MCP protocol; \
                     pass --audit PATH or --no-audit, or give the table a file path",
                ));
            }
            Some(config) => config,
            None => match crate::user_dirs::state_dir(env) {
                Some(dir) => {
                    // mcpvisor's own directory: made private even when an older version left it open.
                    crate::user_dirs::ensure_private(&dir)
                        .map_err(|e| Failure::usage(format!("cannot make the state directory {} private: {e}", dir.display())))?;
                    AuditConfig::file(dir.join(DEFAULT_FILE))
                }
                None => {
                    warn("no audit log: neither XDG_STATE_HOME nor HOME is set; pass --audit PATH to keep one");
                    return Ok(None);
                }
            },
        },
    };
    Ok(Some(config))
}
