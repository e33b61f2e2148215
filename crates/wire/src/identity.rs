//! Who sent a request to the gateway, as the credentials they sent proved
//! it: the one value that authentication produces and that policies, the
//! audit log, rate limits and traces read.
//!
//! Invariants:
//! - an `Identity` exists only for a request whose credentials were checked;
//!   a gateway without authentication has none (`Option<Arc<Identity>>`);
//! - it never holds the credential itself (no token, no key): it may be
//!   logged.

use serde::Serialize;
use serde_json::{Map, Value};

/// How the caller proved who it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Proof {
    /// The gateway's one shared bearer token (`[serve] token`).
    SharedToken,
    /// A named key of `[serve]`'s configuration.
    Key,
    /// A JWT signed by the configured issuer.
    Jwt,
    /// An opaque token the issuer's introspection endpoint vouched for.
    Introspection,
}

/// The caller of one request (or of the session it opened).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Identity {
    /// The token's `sub`, or the key's name; `token` for the shared token.
    pub subject: String,
    /// The OAuth client the token was issued to (`client_id`, `azp`), if said.
    pub client_id: Option<String>,
    /// Granted scopes, as the token lists them.
    pub scopes: Vec<String>,
    /// The claims the configuration chose to keep (for policies and logs).
    pub claims: Map<String, Value>,
    pub proof: Proof,
}

impl Identity {
    /// The caller that knew the shared token: one identity for every holder.
    pub fn shared_token() -> Identity {
        Identity { subject: "token".into(), client_id: None, scopes: Vec::new(), claims: Map::new(), proof: Proof::SharedToken }
    }

    pub fn has_scope(&self, scope: &str) -> bool {
        self.scopes.iter().any(|granted| granted == scope)
    }

    /// The caller as per-caller state (rate limits) is keyed and named: the
    /// kind of credential and the subject, so a token whose `sub` is
    /// `alice` is not the named key `alice`, nor `token` the shared token.
    /// Tokens of the issuer (verified or introspected) share one kind: the
    /// issuer names its subjects.
    pub fn caller_key(&self) -> String {
        match self.proof {
            Proof::SharedToken => "shared-token".into(),
            Proof::Key => format!("key:{}", self.subject),
            Proof::Jwt | Proof::Introspection => format!("issuer:{}", self.subject),
        }
    }

    /// The caller as one grant: its [`Identity::caller_key`], the client it
    /// was issued to and its scopes. What is kept on a caller's behalf from
    /// one token (a token exchanged from it, a connection that uses that)
    /// is keyed by this, so it never serves a token of the same subject
    /// issued to another client or with other scopes: a client granted
    /// `read` does not act upstream with the `write` of another client.
    pub fn grant_key(&self) -> String {
        let mut scopes: Vec<&str> = self.scopes.iter().map(String::as_str).collect();
        scopes.sort_unstable();
        scopes.dedup();
        format!("{} client:{} scope:{}", self.caller_key(), self.client_id.as_deref().unwrap_or("-"), scopes.join(" "))
    }

    /// Whether two requests come from the same caller (a session stays with
    /// the caller that opened it).
    pub fn same_caller(&self, other: &Identity) -> bool {
        self.subject == other.subject && self.proof == other.proof && self.client_id == other.client_id
    }
}

/// Who a call reached its server as, when that server acts as each caller:
/// the subject, audience and scopes of the exchanged token, never the
/// token (auth type `token_exchange`); or the caller and `process of KEY`
/// for a process of its own (`per_caller`). Recorded in the audit log and traces.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Upstream {
    pub subject: String,
    pub audience: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn callers_are_told_apart_by_subject_proof_and_client() {
        let alice = Identity { subject: "alice".into(), scopes: vec!["tools:call".into()], proof: Proof::Jwt, ..Identity::shared_token() };
        assert!(alice.has_scope("tools:call") && !alice.has_scope("tools"));
        assert!(alice.same_caller(&Identity { scopes: Vec::new(), ..alice.clone() }));
        assert!(!alice.same_caller(&Identity { subject: "bob".into(), ..alice.clone() }));
        assert!(!alice.same_caller(&Identity { proof: Proof::Key, ..alice.clone() }));
        assert!(!alice.same_caller(&Identity { client_id: Some("cli".into()), ..alice.clone() }));
        assert_eq!(serde_json::to_value(Identity::shared_token()).unwrap()["proof"], "shared_token");
        let key = Identity { proof: Proof::Key, ..alice.clone() };
        let named_token = Identity { subject: "token".into(), proof: Proof::Key, ..alice.clone() };
        assert_ne!(alice.caller_key(), key.caller_key(), "a JWT's alice is not the key alice");
        assert_ne!(Identity::shared_token().caller_key(), named_token.caller_key());
        assert_eq!(alice.caller_key(), Identity { proof: Proof::Introspection, ..alice.clone() }.caller_key());
    }
}
