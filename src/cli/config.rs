//! `config`: mcpvisor's configuration file itself.
//!
//! `mcpvisor config schema` prints the JSON Schema of the native TOML
//! (`servers.toml`, `.mcpvisor.toml`), derived from the types the file is
//! read into ([`crate::config::native::json_schema`]); docs/servers.schema.json
//! is the same text, for editors (Taplo's `#:schema` directive, the Even
//! Better TOML extension).

use super::output::{print_line, Failure};
use super::Cli;
use crate::config::native;

#[derive(Debug, clap::Args)]
pub struct ConfigArgs {
    #[command(subcommand)]
    pub command: ConfigCommand,
}

#[derive(Debug, clap::Subcommand)]
pub enum ConfigCommand {
    /// Print the JSON Schema of mcpvisor's TOML (JSON, with or without --json).
    Schema,
}

/// The schema as printed: pretty JSON, with the final newline of a text file.
pub fn schema_text() -> String {
    let schema = native::json_schema();
    // A `Value` always serialises.
    serde_json::to_string_pretty(&schema).unwrap_or_default() + "\n"
}

pub fn run(_cli: &Cli, args: &ConfigArgs) -> Result<u8, Failure> {
    match args.command {
        ConfigCommand::Schema => {
            let text = schema_text();
            print_line(text.trim_end());
            Ok(0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_committed_schema_is_the_one_printed() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/servers.schema.json");
        let committed = std::fs::read_to_string(&path).unwrap_or_default();
        if std::env::var_os("MCPVISOR_BLESS_SCHEMA").is_some() {
            std::fs::write(&path, schema_text()).unwrap();
            return;
        }
        assert!(
            committed == schema_text(),
            "docs/servers.schema.json is not what `mcpvisor config schema` prints: run `MCPVISOR_BLESS_SCHEMA=1 cargo test --lib the_committed_schema` and commit it"
        );
    }
}
