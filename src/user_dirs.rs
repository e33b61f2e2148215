//! Where mcpvisor keeps what it writes for the user, as the XDG Base
//! Directory specification says: data (saved conversations) under
//! `$XDG_DATA_HOME/mcpvisor`, else `~/.local/share/mcpvisor`; caches (the
//! on-disk tool catalog) under `$XDG_CACHE_HOME/mcpvisor`, else
//! `~/.cache/mcpvisor`; state (the audit log of `serve`) under
//! `$XDG_STATE_HOME/mcpvisor`, else `~/.local/state/mcpvisor`. Empty variables count as unset and relative ones
//! are ignored, as the specification asks; `None` when not even `HOME` is set.

use std::path::PathBuf;

/// `$XDG_DATA_HOME/mcpvisor`, else `$HOME/.local/share/mcpvisor`.
pub fn data_dir(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    mcpvisor_dir(env, "XDG_DATA_HOME", ".local/share")
}

/// `$XDG_CACHE_HOME/mcpvisor`, else `$HOME/.cache/mcpvisor`.
pub fn cache_dir(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    mcpvisor_dir(env, "XDG_CACHE_HOME", ".cache")
}

/// `$XDG_STATE_HOME/mcpvisor`, else `$HOME/.local/state/mcpvisor`.
pub fn state_dir(env: impl Fn(&str) -> Option<String>) -> Option<PathBuf> {
    mcpvisor_dir(env, "XDG_STATE_HOME", ".local/state")
}

fn mcpvisor_dir(env: impl Fn(&str) -> Option<String>, variable: &str, under_home: &str) -> Option<PathBuf> {
    let var = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
    var(variable).filter(|dir| dir.is_absolute()).or_else(|| var("HOME").map(|home| home.join(under_home))).map(|dir| dir.join("mcpvisor"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |name| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
    }

    #[test]
    fn xdg_variables_win_over_home_unless_empty_or_relative() {
        assert_eq!(data_dir(env(&[("XDG_DATA_HOME", "/d"), ("HOME", "/h")])), Some("/d/mcpvisor".into()));
        assert_eq!(data_dir(env(&[("HOME", "/h")])), Some("/h/.local/share/mcpvisor".into()));
        assert_eq!(cache_dir(env(&[("XDG_CACHE_HOME", "/c"), ("HOME", "/h")])), Some("/c/mcpvisor".into()));
        assert_eq!(cache_dir(env(&[("XDG_CACHE_HOME", "rel"), ("HOME", "/h")])), Some("/h/.cache/mcpvisor".into()));
        assert_eq!(cache_dir(env(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")])), Some("/h/.cache/mcpvisor".into()));
        assert_eq!(state_dir(env(&[("XDG_STATE_HOME", "/s"), ("HOME", "/h")])), Some("/s/mcpvisor".into()));
        assert_eq!(state_dir(env(&[("HOME", "/h")])), Some("/h/.local/state/mcpvisor".into()));
        assert_eq!(data_dir(env(&[])), None);
    }
}
