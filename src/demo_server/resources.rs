//! Resources: `demo://counter`, `demo://blob`, `demo://item/{id}` and the
//! ones added by `add_resource` (`demo://added/NAME`).

use serde_json::{json, Value};

use super::era::RequestEra;
use super::rpc::{ErrorObject, RESOURCE_NOT_FOUND};

pub const COUNTER_URI: &str = "demo://counter";
const BLOB_URI: &str = "demo://blob";
const ITEM_PREFIX: &str = "demo://item/";
pub const ITEM_TEMPLATE: &str = "demo://item/{id}";
const ADDED_PREFIX: &str = "demo://added/";
/// Items listed by `resources/list`; any other id still reads through the template.
const LISTED_ITEMS: u64 = 3;

pub fn added_uri(name: &str) -> String {
    format!("{ADDED_PREFIX}{name}")
}

fn blob_bytes() -> Vec<u8> {
    (0u8..16).collect()
}

/// Everything `resources/list` shows, in order.
pub fn list(added: &[String]) -> Vec<Value> {
    let mut resources = vec![
        json!({"uri": COUNTER_URI, "name": "counter", "title": "Counter", "description": "How many times `touch` ran.", "mimeType": "text/plain"}),
        json!({"uri": BLOB_URI, "name": "blob", "title": "Blob", "description": "Bytes 0 to 15.", "mimeType": "application/octet-stream", "size": 16}),
    ];
    resources.extend(
        (1..=LISTED_ITEMS).map(|id| json!({"uri": format!("{ITEM_PREFIX}{id}"), "name": format!("item {id}"), "mimeType": "text/plain"})),
    );
    resources.extend(added.iter().map(|name| json!({"uri": added_uri(name), "name": name, "mimeType": "text/plain"})));
    resources
}

pub fn templates() -> Vec<Value> {
    vec![json!({"uriTemplate": ITEM_TEMPLATE, "name": "item", "title": "Item", "description": "Any item by id.", "mimeType": "text/plain"})]
}

/// The content of `uri`, or `None` when there is no such resource.
pub fn contents(uri: &str, counter: u64, added: &[String]) -> Option<Value> {
    let text = |text: String| Some(json!({"uri": uri, "mimeType": "text/plain", "text": text}));
    match uri {
        COUNTER_URI => text(counter.to_string()),
        BLOB_URI => Some(
            json!({"uri": uri, "mimeType": "application/octet-stream", "blob": base64::Engine::encode(&base64::engine::general_purpose::STANDARD, blob_bytes())}),
        ),
        _ => match (uri.strip_prefix(ITEM_PREFIX), uri.strip_prefix(ADDED_PREFIX)) {
            (Some(id), _) if !id.is_empty() && !id.contains('/') => text(format!("item {id}")),
            (_, Some(name)) if added.iter().any(|a| a == name) => text(format!("added resource {name}")),
            _ => None,
        },
    }
}

/// `resources/read`. Unknown URIs: -32002 in the legacy era, -32602 in the modern one (SEP-2164).
pub fn read(uri: &str, counter: u64, added: &[String], era: RequestEra) -> Result<Value, ErrorObject> {
    match contents(uri, counter, added) {
        Some(contents) => Ok(json!({ "contents": [contents] })),
        None => {
            let code = if era.is_legacy() { RESOURCE_NOT_FOUND } else { super::rpc::INVALID_PARAMS };
            Err(ErrorObject::new(code, format!("Resource not found: {uri}")).with_data(json!({ "uri": uri })))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_listed_resource_reads() {
        let added = ["mine".to_owned()];
        for resource in list(&added) {
            let uri = resource["uri"].as_str().unwrap();
            let read = read(uri, 7, &added, RequestEra::Legacy).unwrap();
            assert_eq!(read["contents"][0]["uri"], uri);
        }
        assert_eq!(contents(COUNTER_URI, 7, &[]).unwrap()["text"], "7");
        assert_eq!(contents(BLOB_URI, 0, &[]).unwrap()["blob"], "AAECAwQFBgcICQoLDA0ODw==");
        assert_eq!(contents("demo://item/42", 0, &[]).unwrap()["text"], "item 42");
        assert_eq!(contents("demo://added/mine", 0, &added).unwrap()["text"], "added resource mine");
    }

    #[test]
    fn unknown_uris_are_not_found_per_era() {
        for uri in ["demo://nope", "demo://item/", "demo://added/other", "demo://item/1/2"] {
            let legacy = read(uri, 0, &[], RequestEra::Legacy).unwrap_err();
            assert_eq!((legacy.code, legacy.data), (RESOURCE_NOT_FOUND, Some(json!({ "uri": uri }))));
            let modern = read(uri, 0, &[], RequestEra::Modern { log_level: None }).unwrap_err();
            assert_eq!(modern.code, super::super::rpc::INVALID_PARAMS);
        }
    }
}
