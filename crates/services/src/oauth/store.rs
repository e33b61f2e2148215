//! Tokens on disk: one JSON file per server under the user's configuration
//! directory (`$XDG_CONFIG_HOME/mcpvisor/tokens/`, else
//! `~/.config/mcpvisor/tokens/`), holding an entry per issuer, so a server
//! that moves to another authorization server keeps both logins apart.
//!
//! The directory is created 0700 and each file written 0600 (through a
//! temporary file of the same mode, renamed into place): tokens are never
//! readable by other users, not even for an instant. `Debug` of what is
//! kept here masks every secret.
//!
//! A gateway's callers' logins ([`TokenStore::sealed`]) are kept one file
//! per caller in the server's folder, encrypted (`sealed`): the file is
//! named by a keyed hash of the caller, and holds the caller's key beside
//! its tokens (for the admin's list); one whose login ended (no tokens
//! left) is deleted, so the file's presence is the login's.

use std::collections::BTreeMap;
use std::fmt;
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

use super::sealed::LoginKey;
use super::OAuthError;
use crate::config::MASK;

/// What is kept for one server: an entry per issuer, and which is current.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct ServerTokens {
    /// The issuer of the last login.
    pub current: Option<String>,
    #[serde(default)]
    pub issuers: BTreeMap<String, Entry>,
}

impl ServerTokens {
    pub fn current(&self) -> Option<&Entry> {
        self.issuers.get(self.current.as_deref()?)
    }
}

/// A login with one issuer.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Entry {
    /// The MCP endpoint (`resource`) the tokens are for.
    pub resource: String,
    /// A client registered dynamically (kept so refreshing works later);
    /// `None` for a client of the configuration.
    pub client: Option<StoredClient>,
    pub tokens: Option<Tokens>,
    /// The scopes the server asked for last (a step-up needing a login).
    #[serde(default)]
    pub wanted_scopes: Vec<String>,
    /// The DPoP key pair of this login (PKCS#8, base64url), which its
    /// DPoP-bound tokens need.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dpop_key: Option<String>,
}

/// A dynamically registered client.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct StoredClient {
    pub client_id: String,
    pub client_secret: Option<String>,
    pub auth_method: Option<String>,
}

/// An access token and what renews it.
#[derive(Clone, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tokens {
    pub access_token: String,
    pub refresh_token: Option<String>,
    /// Seconds since the Unix epoch; `None`: the server did not say.
    pub expires_at: Option<u64>,
    #[serde(default)]
    pub scopes: Vec<String>,
    /// Issued as `token_type` `DPoP`: sent with `Authorization: DPoP` and a
    /// proof made with the entry's `dpop_key`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub dpop: bool,
}

impl Tokens {
    /// Whether the token ends within `margin_secs` (or has ended).
    pub fn expires_within(&self, margin_secs: u64) -> bool {
        self.expires_at.is_some_and(|at| at <= now_secs().saturating_add(margin_secs))
    }
}

pub fn now_secs() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

impl fmt::Debug for Entry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Entry")
            .field("resource", &self.resource)
            .field("client", &self.client)
            .field("tokens", &self.tokens)
            .field("dpop_key", &self.dpop_key.as_ref().map(|_| MASK))
            .finish()
    }
}

impl fmt::Debug for StoredClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let secret = self.client_secret.as_ref().map(|_| MASK);
        f.debug_struct("StoredClient").field("client_id", &self.client_id).field("client_secret", &secret).finish()
    }
}

impl fmt::Debug for Tokens {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let refresh = self.refresh_token.as_ref().map(|_| MASK);
        f.debug_struct("Tokens")
            .field("access_token", &MASK)
            .field("refresh_token", &refresh)
            .field("expires_at", &self.expires_at)
            .field("scopes", &self.scopes)
            .field("dpop", &self.dpop)
            .finish()
    }
}

/// The token files of one directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TokenStore {
    dir: PathBuf,
    /// One caller's login, encrypted; `None`: plain files per server.
    sealed: Option<Sealed>,
}

/// Whose login a sealed store keeps, and the key that seals it.
#[derive(Clone)]
struct Sealed {
    key: Arc<LoginKey>,
    caller: String,
}

impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sealed").field("caller", &self.caller).finish_non_exhaustive()
    }
}

impl PartialEq for Sealed {
    fn eq(&self, other: &Sealed) -> bool {
        Arc::ptr_eq(&self.key, &other.key) && self.caller == other.caller
    }
}

impl Eq for Sealed {}

/// What a sealed file holds.
#[derive(Serialize, Deserialize)]
pub(super) struct SealedLogin {
    /// The caller's key (`Identity::caller_key`).
    pub(super) caller: String,
    pub(super) tokens: ServerTokens,
}

impl TokenStore {
    pub fn new(dir: impl Into<PathBuf>) -> TokenStore {
        TokenStore { dir: dir.into(), sealed: None }
    }

    /// `caller`'s login to one server, in that server's folder `dir`,
    /// sealed with `key` ([`super::sealed`]).
    pub fn sealed(dir: impl Into<PathBuf>, key: Arc<LoginKey>, caller: &str) -> TokenStore {
        TokenStore { dir: dir.into(), sealed: Some(Sealed { key, caller: caller.to_owned() }) }
    }

    /// `tokens/` in mcpvisor's directory of the user's configuration:
    /// `$XDG_CONFIG_HOME/mcpvisor`, else `$HOME/.config/mcpvisor`.
    pub fn user(env: impl Fn(&str) -> Option<String>) -> Option<TokenStore> {
        let var = |name: &str| env(name).filter(|value| !value.is_empty()).map(PathBuf::from);
        let config = var("XDG_CONFIG_HOME").filter(|dir| dir.is_absolute()).or_else(|| var("HOME").map(|home| home.join(".config")))?;
        Some(TokenStore::new(config.join("mcpvisor").join("tokens")))
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The file of a server: its name, with bytes outside `[A-Za-z0-9_-]`
    /// written as `%XX` so that two names never share a file (a sealed
    /// store's: the keyed hash of its caller).
    pub fn file(&self, server: &str) -> PathBuf {
        if let Some(sealed) = &self.sealed {
            return self.dir.join(format!("{}.login", sealed.key.file_name(&sealed.caller)));
        }
        self.dir.join(format!("{}.json", escaped(server)))
    }

    /// What a sealed file's additional data binds it to.
    fn place(&self, server: &str) -> String {
        let file = self.file(server);
        format!("{server}/{}", file.file_name().map(|name| name.to_string_lossy()).unwrap_or_default())
    }

    /// The bytes of a file as kept: sealed, or plain JSON.
    fn encode(&self, server: &str, tokens: &ServerTokens) -> Result<Vec<u8>, OAuthError> {
        let encoding = |e: serde_json::Error| OAuthError::new(format!("cannot encode tokens: {e}"));
        match &self.sealed {
            Some(sealed) => {
                let login = SealedLogin { caller: sealed.caller.clone(), tokens: tokens.clone() };
                sealed.key.seal(&self.place(server), &serde_json::to_vec(&login).map_err(encoding)?)
            }
            None => serde_json::to_vec_pretty(tokens).map_err(encoding),
        }
    }

    /// What a file's bytes hold.
    fn decode(&self, server: &str, bytes: &[u8]) -> Result<ServerTokens, String> {
        match &self.sealed {
            Some(sealed) => {
                let plain = sealed.key.open(&self.place(server), bytes).ok_or("it does not open with serve.login_key")?;
                let login: SealedLogin = serde_json::from_slice(&plain).map_err(|e| e.to_string())?;
                Ok(login.tokens)
            }
            None => serde_json::from_slice(bytes).map_err(|e| e.to_string()),
        }
    }
}

/// `name` with bytes outside `[A-Za-z0-9_-]` written as `%XX`.
pub(super) fn escaped(server: &str) -> String {
    let mut name = String::new();
    for byte in server.bytes() {
        if byte.is_ascii_alphanumeric() || byte == b'_' || byte == b'-' {
            name.push(byte as char);
        } else {
            name.push_str(&format!("%{byte:02X}"));
        }
    }
    name
}

impl TokenStore {
    /// What is kept for `server`; nothing when there is no file.
    /// A caller's sealed login that does not open (`login_key` changed, the
    /// file altered) is no login: it is deleted, with a warning, and the
    /// caller asked to log in again.
    pub fn load(&self, server: &str) -> Result<ServerTokens, OAuthError> {
        let path = self.file(server);
        match std::fs::read(&path) {
            Ok(bytes) if self.sealed.is_some() => Ok(self.decode(server, &bytes).unwrap_or_else(|why| {
                tracing::warn!(server, file = %path.display(), "a caller's stored login cannot be read ({why}); it is deleted");
                let _ = std::fs::remove_file(&path);
                ServerTokens::default()
            })),
            Ok(bytes) => self.decode(server, &bytes).map_err(|e| {
                OAuthError::new(format!(
                    "the token file {} of server {server:?} cannot be read ({e}); delete it and log in again",
                    path.display()
                ))
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(ServerTokens::default()),
            Err(e) => Err(OAuthError::new(format!("cannot read the token file {}: {e}", path.display()))),
        }
    }

    /// Writes what is kept for `server` (directory 0700, file 0600).
    pub fn save(&self, server: &str, tokens: &ServerTokens) -> Result<(), OAuthError> {
        if self.sealed.is_some() && tokens.current().and_then(|entry| entry.tokens.as_ref()).is_none() {
            // A caller's login that ended is no login: its file goes.
            return self.forget(server).map(drop);
        }
        let fail = |what: &str, e: std::io::Error| OAuthError::new(format!("cannot {what} {}: {e}", self.dir.display()));
        crate::user_dirs::ensure_private(&self.dir).map_err(|e| fail("create or restrict", e))?;
        let path = self.file(server);
        let temporary = path.with_extension(format!("json.{}.tmp", std::process::id()));
        let text = self.encode(server, tokens)?;
        let write = || -> std::io::Result<()> {
            let _ = std::fs::remove_file(&temporary);
            let mut file = std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(&temporary)?;
            file.write_all(&text)?;
            file.sync_all()?;
            std::fs::rename(&temporary, &path)
        };
        write().map_err(|e| {
            let _ = std::fs::remove_file(&temporary);
            OAuthError::new(format!("cannot write the token file {}: {e}", path.display()))
        })
    }

    /// Forgets every login of `server`; false when there was none.
    pub fn forget(&self, server: &str) -> Result<bool, OAuthError> {
        let path = self.file(server);
        match std::fs::remove_file(&path) {
            Ok(()) => Ok(true),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
            Err(e) => Err(OAuthError::new(format!("cannot delete the token file {}: {e}", path.display()))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_are_distinct_for_distinct_servers() {
        let store = TokenStore::new("/t");
        assert_eq!(store.file("github"), PathBuf::from("/t/github.json"));
        assert_ne!(store.file("a/b"), store.file("a_b"));
        assert_eq!(store.file("../x"), PathBuf::from("/t/%2E%2E%2Fx.json"));
    }

    #[test]
    fn user_directory_follows_xdg_config_home_then_home() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            move |name: &str| vars.iter().find(|(n, _)| *n == name).map(|(_, v)| v.to_string())
        };
        assert_eq!(TokenStore::user(env(&[("XDG_CONFIG_HOME", "/x"), ("HOME", "/h")])).unwrap().dir(), Path::new("/x/mcpvisor/tokens"));
        assert_eq!(
            TokenStore::user(env(&[("XDG_CONFIG_HOME", "rel"), ("HOME", "/h")])).unwrap().dir(),
            Path::new("/h/.config/mcpvisor/tokens")
        );
        assert_eq!(TokenStore::user(env(&[])), None);
    }

    #[test]
    fn a_sealed_login_is_kept_per_caller_and_one_that_does_not_open_is_no_login() {
        use base64::Engine;
        let key = |byte: u8| {
            let text = base64::engine::general_purpose::STANDARD.encode([byte; 32]);
            Arc::new(LoginKey::from_base64(&text).unwrap())
        };
        let dir = tempfile::tempdir().unwrap();
        let tokens = Tokens { access_token: "access-1".into(), refresh_token: None, expires_at: None, scopes: vec![], dpop: false };
        let entry = Entry { resource: "r".into(), client: None, tokens: Some(tokens), wanted_scopes: vec![], dpop_key: None };
        let kept = ServerTokens { current: Some("i".into()), issuers: [("i".to_owned(), entry)].into() };
        let alice = TokenStore::sealed(dir.path(), key(1), "key:alice");
        alice.save("gh", &kept).unwrap();
        assert_eq!(alice.load("gh").unwrap().current().and_then(|e| e.tokens.clone()).unwrap().access_token, "access-1");
        assert!(TokenStore::sealed(dir.path(), key(1), "key:bob").load("gh").unwrap().current().is_none(), "bob's is his own");
        let rotated = TokenStore::sealed(dir.path(), key(2), "key:alice");
        assert_ne!(rotated.file("gh"), alice.file("gh"), "names are keyed");
        std::fs::copy(alice.file("gh"), rotated.file("gh")).unwrap();
        assert!(rotated.load("gh").unwrap().current().is_none(), "a login sealed with another key is none");
        assert!(!rotated.file("gh").exists(), "and it is deleted");
        let mut ended = kept.clone();
        ended.issuers.get_mut("i").unwrap().tokens = None;
        alice.save("gh", &ended).unwrap();
        assert!(!alice.file("gh").exists(), "a login without tokens is no file");
    }

    #[test]
    fn debug_masks_tokens_and_secrets() {
        let entry = Entry {
            resource: "https://r/mcp".into(),
            client: Some(StoredClient { client_id: "id".into(), client_secret: Some("client-secret-value".into()), auth_method: None }),
            tokens: Some(Tokens {
                access_token: "access-token-value".into(),
                refresh_token: Some("refresh-token-value".into()),
                expires_at: None,
                scopes: vec![],
                dpop: true,
            }),
            wanted_scopes: vec![],
            dpop_key: Some("dpop-key-value".into()),
        };
        let shown = format!("{entry:?}");
        assert!(!shown.contains("value"), "{shown}");
    }
}
