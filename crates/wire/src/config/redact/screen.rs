//! Screening a text for secrets: each one found is named by its kind and
//! counted, and only the kinds the caller asks for are masked. What passes
//! between a model and a server (tool arguments, tool results) goes
//! through here (`integrity::secrets` in the services layer decides what
//! to mask, refuse or let through).
//!
//! Invariants:
//! - the shapes and the known values are those of [`Redactor::text`]
//!   (`patterns`, `Redactor::secrets`): nothing is recognised twice over;
//! - secrets that overlap or touch are one secret, of the first kind in
//!   [`SecretKind::ALL`] among them (a configured token inside an
//!   `Authorization` header is one `configured` secret), masked whole or
//!   left whole;
//! - a text [`Redactor::might_hold`] clears is returned borrowed, with
//!   nothing found, after one pass over it and no allocation.

use std::borrow::Cow;
use std::ops::Range;

use super::{mask_spans, patterns, Redactor};
pub use crate::secret::SecretKind;

/// How many secrets of each kind were found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Found {
    counts: [u32; SecretKind::ALL.len()],
}

impl Found {
    pub fn is_empty(&self) -> bool {
        self.counts.iter().all(|count| *count == 0)
    }

    pub fn count(&self, kind: SecretKind) -> u32 {
        self.counts[kind as usize]
    }

    /// Counts one more secret of `kind`.
    pub fn add(&mut self, kind: SecretKind) {
        self.counts[kind as usize] = self.counts[kind as usize].saturating_add(1);
    }

    /// Adds every count of `other`.
    pub fn extend(&mut self, other: &Found) {
        for (mine, theirs) in self.counts.iter_mut().zip(other.counts) {
            *mine = mine.saturating_add(theirs);
        }
    }

    /// The kinds found, each with its count, in [`SecretKind::ALL`]'s order.
    pub fn kinds(&self) -> impl Iterator<Item = (SecretKind, u32)> + '_ {
        SecretKind::ALL.into_iter().map(|kind| (kind, self.count(kind))).filter(|(_, count)| *count > 0)
    }

    /// The first kind found (the one a refusal names), if any.
    pub fn first(&self) -> Option<SecretKind> {
        self.kinds().next().map(|(kind, _)| kind)
    }
}

impl Redactor {
    /// False only when [`Redactor::screen`] surely finds nothing in `text`:
    /// one pass over it, no allocation. Works on JSON text as well (a
    /// secret's JSON-escaped form is known too), so a raw answer can be
    /// cleared before it is parsed.
    pub fn might_hold(&self, text: &str) -> bool {
        patterns::might_hold(text) || self.known.as_ref().is_some_and(|known| known.is_match(text))
    }

    /// The secrets of `text` counted by kind, and the text with those of
    /// the kinds `mask` says masked (borrowed when none was).
    pub fn screen<'t>(&self, text: &'t str, mask: impl Fn(SecretKind) -> bool) -> (Cow<'t, str>, Found) {
        let mut found = Found::default();
        if !self.might_hold(text) {
            return (Cow::Borrowed(text), found);
        }
        let mut hits = patterns::hits_for(text, patterns::needs(text));
        if self.known.as_ref().is_some_and(|known| known.is_match(text)) {
            for secret in self.secrets.iter() {
                hits.extend(text.match_indices(secret.as_str()).map(|(at, _)| (at..at + secret.len(), SecretKind::Configured)));
            }
        }
        let mut masked = Vec::new();
        for (span, kind) in group(hits) {
            found.add(kind);
            if mask(kind) {
                masked.push(span);
            }
        }
        (mask_spans(text, &masked), found)
    }
}

/// Joins the hits that overlap or touch, each group named by its first kind; sorted.
fn group(mut hits: Vec<(Range<usize>, SecretKind)>) -> Vec<(Range<usize>, SecretKind)> {
    hits.retain(|(span, _)| span.start < span.end);
    hits.sort_by_key(|(span, _)| span.start);
    let mut groups: Vec<(Range<usize>, SecretKind)> = Vec::with_capacity(hits.len());
    for (span, kind) in hits {
        match groups.last_mut() {
            Some((last, last_kind)) if span.start <= last.end => {
                last.end = last.end.max(span.end);
                *last_kind = (*last_kind).min(kind);
            }
            _ => groups.push((span, kind)),
        }
    }
    groups
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "-----BEGIN RSA PRIVATE KEY-----\nMIIEpAIBAAKCAQEA7\n-----END RSA PRIVATE KEY-----";

    #[test]
    fn kinds_are_found_and_only_those_asked_for_masked() {
        let redactor = Redactor::with_secrets(["tok-of-server-a-123".to_string()]);
        let text = format!("key:\n{KEY}\nand tok-of-server-a-123 and ghp_abcdefghijklmnopqrstuvwxyz0123 done");
        let (masked, found) = redactor.screen(&text, |kind| matches!(kind, SecretKind::PrivateKey | SecretKind::Configured));
        assert_eq!(masked, "key:\n***\nand *** and ghp_abcdefghijklmnopqrstuvwxyz0123 done");
        assert_eq!((found.count(SecretKind::PrivateKey), found.count(SecretKind::Configured), found.count(SecretKind::Token)), (1, 1, 1));
        assert_eq!(found.first(), Some(SecretKind::PrivateKey));
        let (all, _) = redactor.screen(&text, |_| true);
        assert_eq!(all, "key:\n***\nand *** and *** done");
    }

    #[test]
    fn overlapping_secrets_are_one_of_the_first_kind() {
        let redactor = Redactor::with_secrets(["ghp_abcdefghijklmnopqrstuvwxyz0123".to_string()]);
        let (masked, found) = redactor.screen("Authorization: Bearer ghp_abcdefghijklmnopqrstuvwxyz0123", |_| true);
        assert_eq!(masked, "Authorization: Bearer ***");
        assert_eq!(found.kinds().collect::<Vec<_>>(), vec![(SecretKind::Configured, 1)]);
    }

    #[test]
    fn a_text_without_secrets_is_borrowed_and_cleared_by_the_pre_check() {
        let redactor = Redactor::with_secrets(["s3cr3t-value".to_string()]);
        for text in ["the weather in Paris is 21 degrees", "{\"items\":[1,2,3],\"next\":null}", ""] {
            assert!(!redactor.might_hold(text), "{text}");
            let (out, found) = redactor.screen(text, |_| true);
            assert!(matches!(out, Cow::Borrowed(_)) && found.is_empty(), "{text}");
        }
        assert!(redactor.might_hold("x s3cr3t-value y"), "a known value");
        assert!(redactor.might_hold("{\"k\":\"-----BEGIN RSA PRIVATE KEY-----\\nMII\"}"), "JSON text");
        let (out, found) = redactor.screen("my token count is 5", |_| true);
        assert!(matches!(out, Cow::Borrowed(_)) && found.is_empty(), "a trigger word alone is no secret");
    }

    /// The pre-check never clears a text in which the shapes find something.
    #[test]
    fn the_pre_check_is_a_superset_of_every_shape() {
        let redactor = Redactor::default();
        let texts = [
            KEY,
            "postgres://u:PASS@host/db",
            "Authorization: Basic dXNlcjpwYXNz",
            "sent Bearer eyJhbGciOi to it",
            "jwt eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.sig-nature_x",
            "--api-key abc123",
            "PWD=hunter22",
            "?sig=abc%2F",
        ];
        let shapes = super::super::patterns::TOKEN_SHAPES.iter().map(|(prefix, least)| format!("x {prefix}{} y", "a".repeat(*least + 2)));
        for text in texts.iter().map(|text| text.to_string()).chain(shapes) {
            assert!(!patterns::hits(&text).is_empty() && redactor.might_hold(&text), "{text}");
            assert_eq!(patterns::hits_for(&text, patterns::needs(&text)), patterns::hits(&text), "{text}");
        }
    }

    proptest::proptest! {
        #[test]
        fn the_pre_check_never_clears_a_text_with_a_shape_and_the_finders_it_picks_find_all(text in "([a-zA-Z_:=@/ -]{0,6}(key|Token|PASS|sig|pwd|ghp_|AKIA|://|Bearer |eyJ)?[a-zA-Z0-9_.:=@/ -]{0,40}){0,3}") {
            let all = patterns::hits(&text);
            if !all.is_empty() {
                proptest::prop_assert!(patterns::might_hold(&text), "{}", text);
            }
            proptest::prop_assert_eq!(patterns::hits_for(&text, patterns::needs(&text)), all, "{}", text);
        }
    }
}
