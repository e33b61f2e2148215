//! Users' logins by the authorization code, as a third party (GitHub,
//! Jira) sees them: the test says who approves the next authorization
//! (`approve_as`, no person involved), the tokens of that code (and those
//! refreshed from them) stand for that user, which `whoami` says, and a
//! user's tokens can be revoked at once (`revoke_user`: the endpoint and
//! the token endpoint then refuse them).

use std::collections::BTreeMap;
use std::sync::Mutex;

use super::exchange::Subject;
use super::{AuthServer, State};

/// Who approves authorizations, and what each code and refresh token stands for.
#[derive(Default)]
pub(super) struct Logins {
    approver: Mutex<Option<String>>,
    /// code or refresh token → user
    users: Mutex<BTreeMap<String, String>>,
}

impl AuthServer {
    /// The next authorizations are approved as `user`.
    pub fn approve_as(&self, user: &str) {
        *self.state.logins.approver.lock().unwrap() = Some(user.to_owned());
    }

    /// Revokes every token of `user`: its calls get 401, its refreshes `invalid_grant`.
    pub fn revoke_user(&self, user: &str) {
        let mine: Vec<String> = {
            let users = self.state.logins.users.lock().unwrap();
            users.iter().filter(|(_, who)| *who == user).map(|(token, _)| token.clone()).collect()
        };
        let subjects: Vec<String> = {
            let subjects = self.state.exchanges.subjects.lock().unwrap();
            subjects.iter().filter(|(_, subject)| subject.sub.as_deref() == Some(user)).map(|(token, _)| token.clone()).collect()
        };
        let mut issued = self.state.issued.lock().unwrap();
        for token in mine.iter().chain(&subjects) {
            issued.tokens.remove(token);
            issued.refresh.remove(token);
        }
    }
}

impl State {
    /// A code was issued: it stands for the approver, if one is set.
    pub(super) fn approved(&self, code: &str) {
        if let Some(user) = self.logins.approver.lock().unwrap().clone() {
            self.logins.users.lock().unwrap().insert(code.to_owned(), user);
        }
    }

    /// Tokens were issued for the grant of `form` (a code, or a refresh
    /// token): they stand for the user that one stood for.
    pub(super) fn issued_for(&self, form: &BTreeMap<String, String>, access: &str, refresh: &str, scope: &str) {
        let from = form.get("code").or_else(|| form.get("refresh_token"));
        let Some(user) = from.and_then(|from| self.logins.users.lock().unwrap().get(from).cloned()) else { return };
        self.logins.users.lock().unwrap().insert(refresh.to_owned(), user.clone());
        let subject = Subject { sub: Some(user), scope: scope.to_owned(), audience: None };
        self.exchanges.subjects.lock().unwrap().insert(access.to_owned(), subject);
    }
}
