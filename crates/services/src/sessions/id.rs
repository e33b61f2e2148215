//! Conversation ids: `YYYYMMDD-HHMMSS-mmm-rrrrrr`, the UTC creation time
//! to the millisecond and 24 random bits in hex, e.g.
//! `20261123-142501-042-7f3a9c`.
//!
//! Invariants: an id is exactly [`ID_LEN`] ASCII characters of digits,
//! lowercase hex and dashes in that layout, so it is safe as a file name
//! (no `/`, no `.`, never empty) and ids sort by creation time (to the
//! millisecond; ids of one millisecond differ by their random part, and
//! the store refuses to reuse a file, so they are unique). Ids given by
//! users are checked against the layout before any path is built.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::SessionError;

/// Length of every id.
pub const ID_LEN: usize = 26;

/// What each character of an id is: `d` a digit, `x` a lowercase hex digit, `-` itself.
const LAYOUT: &[u8; ID_LEN] = b"dddddddd-dddddd-ddd-xxxxxx";

/// An example, for error messages.
pub const EXAMPLE_ID: &str = "20261123-142501-042-7f3a9c";

/// The id of one saved conversation, also the stem of its file name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct SessionId(String);

impl SessionId {
    /// The id of a conversation started at `unix_ms` with random part `random` (its low 24 bits).
    pub fn at(unix_ms: u64, random: u32) -> SessionId {
        let seconds = unix_ms / 1000;
        let (year, month, day) = crate::civil_date::civil_from_days((seconds / 86_400) as i64);
        let of_day = seconds % 86_400;
        SessionId(format!(
            "{year:04}{month:02}{day:02}-{:02}{:02}{:02}-{:03}-{:06x}",
            of_day / 3600,
            of_day % 3600 / 60,
            of_day % 60,
            unix_ms % 1000,
            random & 0xff_ffff
        ))
    }

    /// Checks an id given by a user (`--resume ID`): surrounding blanks are
    /// ignored, anything else that is not an id is refused, saying why.
    pub fn parse(text: &str) -> Result<SessionId, SessionError> {
        let id = text.trim();
        let bad = |reason: String| Err(SessionError::BadId { id: text.to_string(), reason });
        if !id.is_ascii() {
            return bad("an id holds only digits, lowercase hex digits and dashes".into());
        }
        if id.len() != ID_LEN {
            return bad(format!("it has {} characters, an id has {ID_LEN}", id.len()));
        }
        for (at, (byte, kind)) in id.bytes().zip(LAYOUT).enumerate() {
            let fits = match kind {
                b'd' => byte.is_ascii_digit(),
                b'x' => byte.is_ascii_digit() || (b'a'..=b'f').contains(&byte),
                _ => byte == *kind,
            };
            if !fits {
                let wanted = match kind {
                    b'd' => "a digit",
                    b'x' => "a lowercase hex digit",
                    _ => "`-`",
                };
                return bad(format!("character {} should be {wanted}", at + 1));
            }
        }
        Ok(SessionId(id.to_string()))
    }

    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for SessionId {
    type Error = SessionError;

    fn try_from(text: String) -> Result<Self, Self::Error> {
        SessionId::parse(&text)
    }
}

impl From<SessionId> for String {
    fn from(id: SessionId) -> String {
        id.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_show_the_utc_creation_time_and_sort_by_it() {
        // 2026-11-23 14:25:01.042 UTC
        let id = SessionId::at(1_795_443_901_042, 0x7f3a9c);
        assert_eq!(id.as_str(), "20261123-142501-042-7f3a9c");
        assert_eq!(SessionId::at(0, 0).as_str(), "19700101-000000-000-000000");
        assert_eq!(SessionId::at(951_782_400_000, 1).as_str(), "20000229-000000-000-000001", "a leap day");
        let earlier = SessionId::at(1_795_443_901_042, 0xffffff);
        let later = SessionId::at(1_795_443_901_043, 0);
        assert!(earlier < later, "the time decides before the random part");
    }

    #[test]
    fn ids_parse_back() {
        let id = SessionId::at(1_795_443_901_042, 0xabc);
        assert_eq!(SessionId::parse(id.as_str()).unwrap(), id);
        assert_eq!(SessionId::parse(&format!("  {id}\n")).unwrap(), id, "blanks around a pasted id are ignored");
    }

    #[test]
    fn anything_but_an_id_is_refused_with_a_reason() {
        for (text, reason) in [
            ("", "it has 0 characters"),
            ("../../../../etc/passwd", "it has 22 characters"),
            ("20261123-142501-042-7f3a9c.jsonl", "it has 32 characters"),
            ("20261123-142501-042-7F3A9C", "character 22 should be a lowercase hex digit"),
            ("20261123/142501-042-7f3a9c", "character 9 should be `-`"),
            ("2026112a-142501-042-7f3a9c", "character 8 should be a digit"),
            ("..261123-142501-042-7f3a9c", "character 1 should be a digit"),
            ("20261123-142501-042-7f3a9ç", "an id holds only digits"),
        ] {
            let error = SessionId::parse(text).unwrap_err();
            assert!(matches!(&error, SessionError::BadId { .. }), "{text}: {error}");
            assert!(error.to_string().contains(reason), "{text}: {error}");
        }
    }
}
