//! Prompts: `greet {name, style?}`, `plain`, and those added by `add_prompt`.

use serde_json::{json, Value};

use rmcp::model::GetPromptRequestParams;

use super::rpc::ErrorObject;

/// The styles `greet` accepts (and `completion/complete` offers).
pub const STYLES: [&str; 3] = ["formal", "casual", "pirate"];

pub fn list(added: &[String]) -> Vec<Value> {
    let mut prompts = vec![
        json!({
            "name": "greet",
            "title": "Greet",
            "description": "Greets someone in a style.",
            "arguments": [
                {"name": "name", "description": "Who to greet.", "required": true},
                {"name": "style", "description": "formal, casual or pirate (completable).", "required": false},
            ],
        }),
        json!({"name": "plain", "title": "Plain", "description": "A prompt without arguments."}),
    ];
    prompts.extend(added.iter().map(|name| json!({"name": name, "description": "Added by `add_prompt`."})));
    prompts
}

fn user_message(text: String) -> Value {
    json!({"role": "user", "content": {"type": "text", "text": text}})
}

/// `prompts/get`.
pub fn get(params: &GetPromptRequestParams, added: &[String]) -> Result<Value, ErrorObject> {
    let name = params.name.as_str();
    let argument = |field: &str| match params.arguments.as_ref().and_then(|a| a.get(field)) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(value)) => Ok(Some(value.as_str())),
        Some(other) => Err(ErrorObject::invalid_params(format!("prompt `{name}`: argument `{field}` must be a string, got {other}"))),
    };
    match name {
        "greet" => {
            let who = argument("name")?.ok_or_else(|| ErrorObject::invalid_params("prompt `greet`: missing required argument `name`"))?;
            let style = argument("style")?.unwrap_or("casual");
            if !STYLES.contains(&style) {
                return Err(ErrorObject::invalid_params(format!(
                    "prompt `greet`: argument `style` must be one of {}, got {style:?}",
                    STYLES.join(", ")
                )));
            }
            Ok(json!({"description": "A greeting.", "messages": [user_message(format!("Greet {who} in a {style} style."))]}))
        }
        "plain" => Ok(json!({"messages": [user_message("Say something plain.".into())]})),
        _ if added.iter().any(|a| a == name) => Ok(json!({"messages": [user_message(format!("This is the added prompt {name}."))]})),
        _ => Err(ErrorObject::invalid_params(format!("Unknown prompt: {name}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::server::request::ClientRequest;

    /// `prompts/get` with these params, parsed as the dispatcher parses them.
    fn get(params: &Value, added: &[String]) -> Result<Value, ErrorObject> {
        match ClientRequest::parse("prompts/get", params.clone())? {
            ClientRequest::GetPrompt(params) => super::get(&params, added),
            other => panic!("{other:?} is no prompts/get"),
        }
    }

    #[test]
    fn greet_uses_its_arguments_and_checks_them() {
        let got = get(&json!({"name": "greet", "arguments": {"name": "Ada", "style": "pirate"}}), &[]).unwrap();
        assert_eq!(got["messages"][0]["content"]["text"], "Greet Ada in a pirate style.");
        let casual = get(&json!({"name": "greet", "arguments": {"name": "Bo"}}), &[]).unwrap();
        assert_eq!(casual["messages"][0]["content"]["text"], "Greet Bo in a casual style.");
        for (params, expected) in [
            (json!({"name": "greet"}), "prompt `greet`: missing required argument `name`"),
            (json!({"name": "greet", "arguments": {"name": 1}}), "prompt `greet`: argument `name` must be a string"),
            (json!({"name": "greet", "arguments": {"name": "a", "style": "rude"}}), "argument `style` must be one of"),
            (json!({"name": "nope"}), "Unknown prompt: nope"),
            (json!({}), "prompts/get: `name`"),
        ] {
            assert!(get(&params, &[]).unwrap_err().message.contains(expected), "{params}");
        }
    }

    #[test]
    fn listed_prompts_get_without_optional_arguments() {
        let added = ["mine".to_owned()];
        let names: Vec<Value> = list(&added).iter().map(|p| p["name"].clone()).collect();
        assert_eq!(names, [json!("greet"), json!("plain"), json!("mine")]);
        assert_eq!(get(&json!({"name": "plain"}), &added).unwrap()["messages"][0]["role"], "user");
        assert!(get(&json!({"name": "mine"}), &added).is_ok());
    }
}
