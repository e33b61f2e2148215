//! `completion/complete`: `greet`'s `style` and the item template's `id`.

use rmcp::model::{CompleteRequestParams, Reference};
use serde_json::{json, Value};

use super::prompts::STYLES;
use super::resources::ITEM_TEMPLATE;
use super::rpc::ErrorObject;

/// Item ids offered for `demo://item/{id}`.
const ITEM_IDS: u32 = 30;
/// At most this many values per answer (the spec's limit is 100); `hasMore` tells the rest.
const MAX_VALUES: usize = 10;

pub fn complete(params: &CompleteRequestParams) -> Result<Value, ErrorObject> {
    let (argument, prefix) = (params.argument.name.as_str(), params.argument.value.as_str());
    let candidates: Vec<String> = match &params.r#ref {
        Reference::Prompt(prompt) => match (prompt.name.as_str(), argument) {
            ("greet", "style") => STYLES.iter().map(|s| s.to_string()).collect(),
            ("greet", "name") => Vec::new(),
            (prompt, _) => {
                return Err(ErrorObject::invalid_params(format!(
                    "completion/complete: no completion for prompt `{prompt}` argument `{argument}`"
                )))
            }
        },
        Reference::Resource(resource) => match (resource.uri.as_str(), argument) {
            (ITEM_TEMPLATE, "id") => (1..=ITEM_IDS).map(|id| id.to_string()).collect(),
            (uri, _) => {
                return Err(ErrorObject::invalid_params(format!("completion/complete: no completion for `{uri}` argument `{argument}`")))
            }
        },
        other => return Err(ErrorObject::invalid_params(format!("completion/complete: no completion for {other:?}"))),
    };
    let matching: Vec<String> = candidates.into_iter().filter(|c| c.starts_with(prefix)).collect();
    let total = matching.len();
    let values: Vec<String> = matching.into_iter().take(MAX_VALUES).collect();
    Ok(json!({"completion": {"values": values, "total": total, "hasMore": total > MAX_VALUES}}))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::request::ClientRequest;

    /// `completion/complete` with these params, parsed as the dispatcher parses them.
    fn complete(params: &Value) -> Result<Value, ErrorObject> {
        match ClientRequest::parse("completion/complete", params.clone())? {
            ClientRequest::Complete(params) => super::complete(&params),
            other => panic!("{other:?} is no completion"),
        }
    }

    fn prompt(argument: &str, value: &str) -> Value {
        json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": argument, "value": value}})
    }

    fn item(value: &str) -> Value {
        json!({"ref": {"type": "ref/resource", "uri": ITEM_TEMPLATE}, "argument": {"name": "id", "value": value}})
    }

    #[test]
    fn styles_and_ids_are_filtered_by_prefix_with_total_and_has_more() {
        assert_eq!(complete(&prompt("style", "p")).unwrap()["completion"], json!({"values": ["pirate"], "total": 1, "hasMore": false}));
        assert_eq!(complete(&prompt("style", "")).unwrap()["completion"]["values"], json!(["formal", "casual", "pirate"]));
        assert_eq!(complete(&prompt("name", "A")).unwrap()["completion"]["total"], 0);
        let ones = complete(&item("1")).unwrap()["completion"].clone();
        assert_eq!(ones, json!({"values": ["1", "10", "11", "12", "13", "14", "15", "16", "17", "18"], "total": 11, "hasMore": true}));
        assert_eq!(complete(&item("")).unwrap()["completion"]["total"], 30);
    }

    #[test]
    fn unknown_references_and_bad_params_are_invalid() {
        let cases = [
            json!({"ref": {"type": "ref/prompt", "name": "plain"}, "argument": {"name": "x", "value": ""}}),
            json!({"ref": {"type": "ref/resource", "uri": "demo://other/{id}"}, "argument": {"name": "id", "value": ""}}),
            json!({"ref": {"type": "ref/tool"}, "argument": {"name": "id", "value": ""}}),
            json!({"ref": {"type": "ref/prompt", "name": "greet"}, "argument": {"name": "style"}}),
            json!({}),
        ];
        for params in cases {
            assert_eq!(complete(&params).unwrap_err().code, super::super::rpc::INVALID_PARAMS, "{params}");
        }
    }
}
