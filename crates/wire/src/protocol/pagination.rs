//! Cursor pagination of the `*/list` methods, bounded.
//!
//! One [`Paginator`] follows one listing (tools, resources, templates or
//! prompts) whoever drives it: the connection's own listing at start-up
//! and the typed list operations alike. Invariants:
//! - at most `max_pages` pages are asked for: a server that still hands out
//!   a `nextCursor` after that is in error ("pagination did not end");
//! - at most `max_items` items are taken, all pages together;
//! - a cursor equal to the one just sent is an error (the listing would not
//!   advance); an empty cursor ends the listing, as an absent one does;
//! - a page is read without copying: its list is deserialised straight
//!   from the answer's text into the caller's item type.

use std::borrow::Cow;
use std::collections::HashMap;

use serde::Deserialize;
use serde_json::value::RawValue;

/// How far one listing may go.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ListBounds {
    pub max_pages: usize,
    pub max_items: usize,
}

/// Follows the pages of one listing.
#[derive(Debug)]
pub struct Paginator {
    method: &'static str,
    field: &'static str,
    bounds: ListBounds,
    /// The cursor of the page asked for next (`None`: the first page).
    cursor: Option<String>,
    /// Pages taken so far.
    pages: usize,
    /// Items taken so far.
    items: usize,
}

impl Paginator {
    /// A listing of `method` whose pages carry their items in `field`.
    pub fn new(method: &'static str, field: &'static str, bounds: ListBounds) -> Paginator {
        Paginator { method, field, bounds, cursor: None, pages: 0, items: 0 }
    }

    pub fn method(&self) -> &'static str {
        self.method
    }

    /// The number (from 1) of the page asked for next, or being waited for.
    pub fn page(&self) -> usize {
        self.pages + 1
    }

    /// The params of the next request: `{}` or `{"cursor": ...}`.
    pub fn params(&self) -> serde_json::Value {
        match &self.cursor {
            Some(cursor) => serde_json::json!({ "cursor": cursor }),
            None => serde_json::json!({}),
        }
    }

    /// Takes the answer to the page asked for: its items, and whether
    /// another page is to be asked for. The error is a sentence saying what
    /// was wrong with the page and which page it was.
    pub fn take<'a, T: Deserialize<'a>>(&mut self, answer: &'a RawValue) -> Result<(Vec<T>, bool), String> {
        let page_no = self.page();
        let (method, field) = (self.method, self.field);
        let wrong = |what: String| format!("{method} page {page_no}: {what}");
        let members: HashMap<Cow<'a, str>, &'a RawValue> = serde_json::from_str(answer.get())
            .map_err(|_| wrong(format!("the answer is {}, not an object with a `{field}` list", describe(answer))))?;
        let list = members.get(field).ok_or_else(|| wrong(format!("the answer has no `{field}` list")))?;
        let found: Vec<T> = serde_json::from_str(list.get()).map_err(|e| wrong(format!("the `{field}` list cannot be read: {e}")))?;
        let next = match members.get("nextCursor").map(|c| serde_json::from_str::<Option<String>>(c.get())) {
            None | Some(Ok(None)) => None,
            Some(Ok(Some(cursor))) if cursor.is_empty() => None,
            Some(Ok(Some(cursor))) => Some(cursor),
            Some(Err(_)) => return Err(wrong("its `nextCursor` is not a string".into())),
        };
        self.pages += 1;
        self.items += found.len();
        if self.items > self.bounds.max_items {
            return Err(format!(
                "{method} returned more than {} items (max_list_items); raise max_list_items if the server really offers that many",
                self.bounds.max_items
            ));
        }
        let Some(next) = next else { return Ok((found, false)) };
        if self.cursor.as_deref() == Some(next.as_str()) {
            return Err(wrong(format!("pagination does not advance: the server handed out cursor {next:?} again")));
        }
        if self.pages >= self.bounds.max_pages {
            return Err(format!(
                "{method} pagination did not end after {} pages: the server still handed out a nextCursor; raise max_list_pages if it really offers that many pages",
                self.pages
            ));
        }
        self.cursor = Some(next);
        Ok((found, true))
    }
}

/// A short description of a JSON value's kind, for errors.
pub fn describe(value: &RawValue) -> &'static str {
    match value.get().trim_start().as_bytes().first() {
        Some(b'{') => "an object",
        Some(b'[') => "an array",
        Some(b'"') => "a string",
        Some(b'n') => "null",
        Some(b't' | b'f') => "a boolean",
        Some(_) => "a number",
        None => "empty",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.into()).unwrap()
    }

    const BOUNDS: ListBounds = ListBounds { max_pages: 3, max_items: 5 };

    #[test]
    fn follows_cursors_to_the_end() {
        let mut p = Paginator::new("tools/list", "tools", BOUNDS);
        assert_eq!(p.params(), serde_json::json!({}));
        let (items, more) = p.take::<u32>(&raw(r#"{"tools":[1,2],"nextCursor":"a"}"#)).unwrap();
        assert_eq!((items, more, p.page()), (vec![1, 2], true, 2));
        assert_eq!(p.params(), serde_json::json!({"cursor": "a"}));
        let (items, more) = p.take::<u32>(&raw(r#"{"tools":[3],"nextCursor":""}"#)).unwrap();
        assert_eq!((items, more), (vec![3], false));
    }

    #[test]
    fn fresh_cursors_on_empty_pages_end_after_max_pages() {
        let mut p = Paginator::new("tools/list", "tools", BOUNDS);
        for n in 0..2 {
            assert!(p.take::<u32>(&raw(&format!(r#"{{"tools":[],"nextCursor":"c{n}"}}"#))).unwrap().1);
        }
        let error = p.take::<u32>(&raw(r#"{"tools":[],"nextCursor":"c9"}"#)).unwrap_err();
        assert!(error.starts_with("tools/list pagination did not end after 3 pages"), "{error}");
    }

    #[test]
    fn bad_pages_are_described() {
        let mut p = Paginator::new("prompts/list", "prompts", BOUNDS);
        assert_eq!(
            p.take::<u32>(&raw("null")).unwrap_err(),
            "prompts/list page 1: the answer is null, not an object with a `prompts` list"
        );
        assert_eq!(p.take::<u32>(&raw("{}")).unwrap_err(), "prompts/list page 1: the answer has no `prompts` list");
        assert!(p.take::<u32>(&raw(r#"{"prompts":[1],"nextCursor":5}"#)).unwrap_err().contains("not a string"));
        assert!(p.take::<u32>(&raw(r#"{"prompts":[1,2,3,4,5,6]}"#)).unwrap_err().contains("more than 5 items"));
        let mut p = Paginator::new("prompts/list", "prompts", BOUNDS);
        p.take::<u32>(&raw(r#"{"prompts":[],"nextCursor":"x"}"#)).unwrap();
        assert!(p.take::<u32>(&raw(r#"{"prompts":[],"nextCursor":"x"}"#)).unwrap_err().contains("does not advance"));
    }
}
