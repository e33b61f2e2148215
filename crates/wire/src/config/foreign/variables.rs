//! Other clients' variables turned into mcpvisor's `${NAME}` syntax, so
//! that they are expanded when servers start, not when files are read.

use super::{Entry, Format};
use crate::config::expand::{escape, Syntax};
use crate::error::ConfigError;

impl Entry<'_> {
    /// `text` of `field` with the format's variables in mcpvisor's syntax.
    pub(super) fn translate(&self, field: &str, text: &str) -> Result<String, ConfigError> {
        match self.context.format {
            Format::ClaudeDesktop | Format::ClaudeCode | Format::Gemini | Format::Zed => Ok(text.into()),
            Format::Cursor | Format::VsCode | Format::Windsurf => {
                self.replace_references(text, "${", |inner| self.editor_variable(field, inner))
            }
            Format::OpenCode => self.replace_references(text, "{", |inner| self.opencode_variable(field, inner)),
            // Codex reads its values as they are: a `$` is a `$`.
            Format::Codex => Ok(escape(text, Syntax::Braced)),
        }
    }

    /// Replaces each `{open}inner}` for which `replace` gives a value; other text stays.
    fn replace_references(
        &self,
        text: &str,
        open: &str,
        replace: impl Fn(&str) -> Result<Option<String>, ConfigError>,
    ) -> Result<String, ConfigError> {
        let mut out = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find(open) {
            let inner_start = start + open.len();
            let Some(length) = rest[inner_start..].find('}') else { break };
            let inner = &rest[inner_start..inner_start + length];
            out.push_str(&rest[..start]);
            match replace(inner)? {
                Some(value) => out.push_str(&value),
                None => out.push_str(&rest[start..=inner_start + length]),
            }
            rest = &rest[inner_start + length + 1..];
        }
        out.push_str(rest);
        Ok(out)
    }

    /// Cursor's and VS Code's `${...}` variables.
    fn editor_variable(&self, field: &str, inner: &str) -> Result<Option<String>, ConfigError> {
        let workspace = &self.context.workspace;
        Ok(Some(match inner.split_once(':') {
            Some(("env", name)) => format!("${{{name}}}"),
            Some(("input", id)) => match self.context.inputs.get(id) {
                Some(value) => escape(value, Syntax::Braced),
                None => {
                    let (file, server) = (self.context.file.into(), self.server.into());
                    return Err(ConfigError::PromptedInput { file, server, field: field.into(), id: id.into() });
                }
            },
            Some(_) => {
                let message =
                    format!("uses ${{{inner}}}, which only the editor can resolve; replace it with ${{ENV_VAR}} and set that variable");
                return Err(self.invalid(field, message));
            }
            None => match inner {
                "workspaceFolder" => escape(&workspace.to_string_lossy(), Syntax::Braced),
                "workspaceFolderBasename" => escape(&workspace.file_name().unwrap_or_default().to_string_lossy(), Syntax::Braced),
                "userHome" => "${HOME}".into(),
                "pathSeparator" | "/" => "/".into(),
                _ => return Ok(None),
            },
        }))
    }

    /// OpenCode's `{env:NAME}` and `{file:path}`.
    fn opencode_variable(&self, field: &str, inner: &str) -> Result<Option<String>, ConfigError> {
        match inner.split_once(':') {
            Some(("env", name)) => Ok(Some(format!("${{{name}}}"))),
            Some(("file", _)) => Err(self.invalid(
                field,
                format!("uses {{{inner}}}, which mcpvisor does not read; put the value in an environment variable and write {{env:NAME}}"),
            )),
            _ => Ok(None),
        }
    }
}
