//! Cursor pagination of every server-side `*/list` (the demo server's and
//! the gateway's): one cursor format.
//!
//! A cursor is `page:<offset>`: the index of the page's first item, a
//! positive multiple of the page size. Only cursors this server could have
//! handed out are accepted; an offset past the end (the list shrank since,
//! as the gateway's does when a server goes away) is an empty last page.

use serde::Serialize;
use serde_json::{json, Value};

use crate::protocol::{error_codes, ErrorObject};

/// The prefix of every cursor handed out.
const CURSOR_PREFIX: &str = "page:";

/// Where one `*/list` page starts: a cursor this server could have handed
/// out, checked before any item is gathered. Copy it into work that lists
/// later (the gateway's lists wait for the pool).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pager {
    method: &'static str,
    key: &'static str,
    start: usize,
    page_size: usize,
}

impl Pager {
    /// The page `cursor` (`None`: the first) of `method`'s list, whose
    /// items are under `key`. A page size of 0 counts as 1.
    pub fn new(method: &'static str, key: &'static str, cursor: Option<&str>, page_size: usize) -> Result<Pager, ErrorObject> {
        let page_size = page_size.max(1);
        let start = match cursor {
            None => 0,
            Some(cursor) => cursor
                .strip_prefix(CURSOR_PREFIX)
                .and_then(|offset| offset.parse::<usize>().ok())
                .filter(|&offset| offset > 0 && offset % page_size == 0)
                .ok_or_else(|| unknown_cursor(method, &json!(cursor)))?,
        };
        Ok(Pager { method, key, start, page_size })
    }

    /// The page of `items` as `{key: [...], nextCursor?}`. Only the page's
    /// items are serialized.
    pub fn page<T: Serialize>(self, items: Vec<T>) -> Result<Value, ErrorObject> {
        let Pager { method, key, start, page_size } = self;
        let end = items.len().min(start.saturating_add(page_size));
        let more = end < items.len();
        let items: Vec<T> = items.into_iter().skip(start).take(end.saturating_sub(start)).collect();
        let items = serde_json::to_value(items)
            .map_err(|error| ErrorObject::new(error_codes::INTERNAL_ERROR, format!("{method}: a page could not be written: {error}")))?;
        let mut page = json!({ key: items });
        if more {
            page["nextCursor"] = json!(format!("{CURSOR_PREFIX}{end}"));
        }
        Ok(page)
    }
}

/// The -32602 of a cursor this server never gave.
pub fn unknown_cursor(method: &str, cursor: &Value) -> ErrorObject {
    ErrorObject::invalid_params(format!("{method}: unknown cursor {cursor} (pass back a `nextCursor` this server gave)"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::protocol::error_codes;

    /// One page as a client's params ask for it.
    fn page<T: Serialize>(
        method: &'static str,
        key: &'static str,
        items: Vec<T>,
        params: &Value,
        size: usize,
    ) -> Result<Value, ErrorObject> {
        let cursor = match params.get("cursor") {
            None | Some(Value::Null) => None,
            Some(Value::String(cursor)) => Some(cursor.as_str()),
            Some(other) => return Err(unknown_cursor(method, other)),
        };
        Pager::new(method, key, cursor, size)?.page(items)
    }

    #[test]
    fn pages_walk_every_item_once() {
        let items: Vec<Value> = (0..10).map(|i| json!(i)).collect();
        for page_size in [0, 1, 3, 4, 10, 100] {
            let (mut seen, mut params, mut pages) = (Vec::new(), json!({}), 0);
            loop {
                let page = page("x/list", "xs", items.clone(), &params, page_size).unwrap();
                pages += 1;
                seen.extend(page["xs"].as_array().unwrap().iter().cloned());
                match page.get("nextCursor") {
                    Some(cursor) => params = json!({ "cursor": cursor }),
                    None => break,
                }
            }
            assert_eq!(seen, items);
            assert_eq!(pages, items.len().div_ceil(page_size.max(1)));
        }
    }

    #[test]
    fn unknown_cursors_are_invalid_params_naming_the_method() {
        let items: Vec<Value> = (0..10).map(|i| json!(i)).collect();
        for cursor in [json!("nope"), json!("page:0"), json!("page:3"), json!("100"), json!(7)] {
            let error = page("prompts/list", "prompts", items.clone(), &json!({ "cursor": cursor }), 4).unwrap_err();
            assert_eq!(error.code, error_codes::INVALID_PARAMS);
            assert!(error.message.starts_with("prompts/list: unknown cursor"), "{cursor}");
        }
    }

    #[test]
    fn a_cursor_past_a_shrunk_list_is_an_empty_last_page() {
        let items: Vec<Value> = (0..250).map(|i| json!(i)).collect();
        let last = page("tools/list", "tools", items.clone(), &json!({"cursor": "page:200"}), 100).unwrap();
        assert_eq!((last["tools"].as_array().unwrap().len(), last.get("nextCursor")), (50, None));
        let past = page("tools/list", "tools", items, &json!({"cursor": "page:900"}), 100).unwrap();
        assert_eq!(past, json!({"tools": []}));
    }
}
