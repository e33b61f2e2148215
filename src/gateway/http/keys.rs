//! Named API keys (`[serve.keys.NAME]`): each key is its own caller, with
//! the scopes and claims its table gives, for policies and logs.
//!
//! Invariants:
//! - a key is checked as the serve token is (`check_token`) when loaded,
//!   and never printed: `Debug` masks it, errors name its variable;
//! - an offered bearer is compared with every key, each in constant time
//!   and without stopping at a match, so the time taken says nothing of
//!   which key (if any) it was;
//! - the set is replaced whole on reload (`policy::Current`); a request reads the
//!   set in force when it arrives.

use std::path::Path;
use std::sync::Arc;

use crate::config::{check_token, KeySettings};
use crate::identity::{Identity, Proof};
use crate::policy::Current;

/// One key and the caller who holds it.
#[derive(Clone)]
pub struct NamedKey {
    token: String,
    pub identity: Arc<Identity>,
}

impl std::fmt::Debug for NamedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("NamedKey").field("subject", &self.identity.subject).field("token", &crate::config::MASK).finish()
    }
}

/// The keys in force, shared by the guard and the reload.
pub type KeyRing = Current<Vec<NamedKey>>;

/// The keys of `settings` (read from `file`), their references expanded by
/// `lookup`; an unset variable, or a key too short or plain to be a secret,
/// is an error naming the key.
pub fn load(settings: &[KeySettings], file: &Path, lookup: impl Fn(&str) -> Option<String>) -> Result<Vec<NamedKey>, String> {
    let mut keys: Vec<NamedKey> = Vec::with_capacity(settings.len());
    for key in settings {
        let token = key.token(file, &lookup).map_err(|error| error.to_string())?;
        let field = if key.token_file.is_some() { "token_file" } else { "token" };
        check_token(&token, &format!("`serve.keys.{}.{field}` of {}", key.subject, file.display()))?;
        if let Some(twin) = keys.iter().find(|other| other.token == token) {
            return Err(format!(
                "{}: the keys `{}` and `{}` are the same secret: give each caller its own",
                file.display(),
                twin.identity.subject,
                key.subject
            ));
        }
        let identity = Identity {
            subject: key.subject.clone(),
            client_id: None,
            scopes: key.scopes.clone(),
            claims: key.claims.clone(),
            proof: Proof::Key,
        };
        keys.push(NamedKey { token, identity: Arc::new(identity) });
    }
    Ok(keys)
}

/// The caller whose key is `offered`, looked for among all keys in
/// constant time per key.
pub fn holder(keys: &[NamedKey], offered: &[u8]) -> Option<Arc<Identity>> {
    let mut found = None;
    for key in keys {
        if constant_time_eq(offered, key.token.as_bytes()) {
            found = Some(key.identity.clone());
        }
    }
    found
}

/// Equality whose time depends on the lengths only, not on where the bytes differ.
pub(super) fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings(subject: &str, var: &str) -> KeySettings {
        KeySettings {
            subject: subject.into(),
            token: format!("${{{var}}}"),
            token_file: None,
            scopes: vec!["tools:call".into()],
            claims: Default::default(),
        }
    }

    #[test]
    fn keys_are_checked_found_and_never_shown() {
        let lookup = |name: &str| match name {
            "A" => Some("0f3a9c2e7b1d4a6f8e0c2b4d6f8a0c1e".to_string()),
            "B" => Some("9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b".to_string()),
            "SHORT" => Some("abc".to_string()),
            _ => None,
        };
        let file = Path::new("/etc/mcpvisor/servers.toml");
        let keys = load(&[settings("alice", "A"), settings("bob", "B")], file, lookup).unwrap();
        let bob = holder(&keys, b"9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4b").unwrap();
        assert_eq!((bob.subject.as_str(), bob.proof, bob.scopes.len()), ("bob", Proof::Key, 1));
        assert!(holder(&keys, b"9e8d7c6b5a4f3e2d1c0b9a8f7e6d5c4").is_none());
        assert!(!format!("{keys:?}").contains("0f3a"), "{keys:?}");
        let short = load(&[settings("carol", "SHORT")], file, lookup).unwrap_err();
        assert!(short.contains("serve.keys.carol.token") && !short.contains("abc"), "{short}");
        let unset = load(&[settings("dan", "UNSET")], file, lookup).unwrap_err();
        assert!(unset.contains("${UNSET}"), "{unset}");
        let twins = load(&[settings("alice", "A"), settings("eve", "A")], file, lookup).unwrap_err();
        assert!(twins.contains("`alice` and `eve` are the same secret"), "{twins}");
    }
}
