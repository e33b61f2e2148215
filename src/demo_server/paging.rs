//! Cursor pagination shared by every `*/list` method.

use serde_json::{json, Value};

use super::rpc::RpcError;

/// One page of `items` as `{key: [...], nextCursor?}`. Cursors are only those
/// this server hands out: `page:<offset>` with `offset` a positive multiple of
/// the page size inside the list. A page size of 0 counts as 1.
pub fn page(method: &str, key: &str, items: Vec<Value>, params: &Value, page_size: usize) -> Result<Value, RpcError> {
    let page_size = page_size.max(1);
    let start = match params.get("cursor") {
        None | Some(Value::Null) => 0,
        Some(cursor) => cursor
            .as_str()
            .and_then(|c| c.strip_prefix("page:"))
            .and_then(|offset| offset.parse::<usize>().ok())
            .filter(|&offset| offset > 0 && offset < items.len() && offset % page_size == 0)
            .ok_or_else(|| RpcError::invalid_params(format!("{method}: unknown cursor {cursor}")))?,
    };
    let end = items.len().min(start + page_size);
    let more = end < items.len();
    let mut page = json!({ key: items.into_iter().skip(start).take(end - start).collect::<Vec<_>>() });
    if more {
        page["nextCursor"] = json!(format!("page:{end}"));
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        for cursor in [json!("nope"), json!("page:0"), json!("page:3"), json!("page:40"), json!(7)] {
            let error = page("prompts/list", "prompts", items.clone(), &json!({ "cursor": cursor }), 4).unwrap_err();
            assert!(error.message.starts_with("prompts/list: unknown cursor"), "{cursor}");
        }
    }
}
