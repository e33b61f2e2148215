//! `secrets`: what a server's tool calls may carry past mcpvisor, per
//! direction (arguments a model sends to the server, results the server
//! sends back). Plain data; the check itself is `integrity::secrets`.
//!
//! In a file: `secrets = "mask"` (both directions), or
//! `secrets = { arguments = "block", results = "mask" }` (a direction left
//! out keeps its default).

use super::redact::SecretKind;
use super::Keyword;
pub use crate::secret::Direction;

/// What happens to the secrets found in one direction of a server's calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SecretsMode {
    /// Nothing set: private keys and the configured secrets' values (of
    /// every configured server) are masked; every other shape is let
    /// through and counted (docs/security.md says why).
    #[default]
    Default,
    /// Every secret found is masked.
    Mask,
    /// A call whose arguments (or result) hold a secret is refused (or
    /// its result withheld), with an error naming the kind of secret.
    Block,
    /// Everything is let through, and still counted.
    Allow,
}

impl Keyword for SecretsMode {
    const CHOICES: &'static [(&'static str, Self)] =
        &[("default", SecretsMode::Default), ("mask", SecretsMode::Mask), ("block", SecretsMode::Block), ("allow", SecretsMode::Allow)];
}

/// What was done with one secret found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum SecretAction {
    Masked,
    /// The call was refused, or its result withheld.
    Blocked,
    /// Let through (and counted).
    Allowed,
}

impl SecretAction {
    pub const ALL: [SecretAction; 3] = [SecretAction::Masked, SecretAction::Blocked, SecretAction::Allowed];

    pub fn as_str(self) -> &'static str {
        match self {
            SecretAction::Masked => "masked",
            SecretAction::Blocked => "blocked",
            SecretAction::Allowed => "allowed",
        }
    }
}

impl SecretsMode {
    /// What this mode does with a secret of `kind`.
    pub fn action(self, kind: SecretKind) -> SecretAction {
        match self {
            SecretsMode::Mask => SecretAction::Masked,
            SecretsMode::Block => SecretAction::Blocked,
            SecretsMode::Allow => SecretAction::Allowed,
            SecretsMode::Default => match kind {
                SecretKind::Configured | SecretKind::PrivateKey => SecretAction::Masked,
                _ => SecretAction::Allowed,
            },
        }
    }
}

/// A server's `secrets` setting: one mode per direction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct SecretsPolicy {
    pub arguments: SecretsMode,
    pub results: SecretsMode,
}

impl SecretsPolicy {
    /// The same mode both ways.
    pub fn both(mode: SecretsMode) -> SecretsPolicy {
        SecretsPolicy { arguments: mode, results: mode }
    }

    pub fn mode(&self, direction: Direction) -> SecretsMode {
        match direction {
            Direction::Arguments => self.arguments,
            Direction::Results => self.results,
        }
    }

    pub fn is_default(&self) -> bool {
        *self == SecretsPolicy::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_masks_private_keys_and_configured_values_and_counts_the_rest() {
        let mode = SecretsMode::Default;
        assert_eq!(mode.action(SecretKind::Configured), SecretAction::Masked);
        assert_eq!(mode.action(SecretKind::PrivateKey), SecretAction::Masked);
        for kind in [SecretKind::Token, SecretKind::Authorization, SecretKind::UrlPassword, SecretKind::NamedValue] {
            assert_eq!(mode.action(kind), SecretAction::Allowed);
        }
        for kind in SecretKind::ALL {
            assert_eq!(SecretsMode::Block.action(kind), SecretAction::Blocked);
            assert_eq!(SecretsMode::Allow.action(kind), SecretAction::Allowed);
            assert_eq!(SecretsMode::Mask.action(kind), SecretAction::Masked);
        }
    }
}
