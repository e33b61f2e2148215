//! The scanner against its two corpora: the reference servers' real tools
//! (none may be flagged) and known attacks (each must be, by the rules it
//! names). Counts are printed for the closing note (`--nocapture`).

use serde_json::Value;

use super::scan::{rules_loaded, scan, OtherTool, Severity, ToolText};

fn fixture(name: &str) -> Value {
    // The corpora live with the workspace's other fixtures, two folders up.
    let path = format!("{}/../../tests/fixtures/scan/{name}", env!("CARGO_MANIFEST_DIR"));
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

fn tool_text(tool: &Value) -> ToolText<'_> {
    ToolText {
        server: tool["server"].as_str().unwrap_or("suspect"),
        name: tool["name"].as_str().unwrap_or("tool"),
        title: tool["title"].as_str(),
        description: tool["description"].as_str(),
        input_schema: tool.get("inputSchema"),
        output_schema: tool.get("outputSchema"),
    }
}

#[test]
fn the_rule_file_loads() {
    assert!(rules_loaded().unwrap() >= 10, "{:?}", rules_loaded());
}

#[test]
fn no_tool_of_the_reference_servers_is_flagged() {
    let corpus = fixture("reference_tools.json");
    let tools = corpus["tools"].as_array().unwrap();
    let others: Vec<OtherTool> =
        tools.iter().map(|tool| OtherTool { server: tool["server"].as_str().unwrap(), name: tool["name"].as_str().unwrap() }).collect();
    let mut flagged = Vec::new();
    for tool in tools {
        let findings = scan(&tool_text(tool), &others);
        if !findings.is_empty() {
            flagged.push(format!("{}/{}: {findings:?}", tool["server"], tool["name"]));
        }
    }
    println!("reference corpus: {} tools, {} flagged", tools.len(), flagged.len());
    assert!(tools.len() >= 40, "{}", tools.len());
    assert!(flagged.is_empty(), "false positives:\n{}", flagged.join("\n"));
}

#[test]
fn every_known_attack_is_found_by_the_rules_it_names() {
    let corpus = fixture("attacks.json");
    let attacks = corpus["attacks"].as_array().unwrap();
    let mut missed = Vec::new();
    let mut detected = 0;
    for attack in attacks {
        let others: Vec<OtherTool> = attack["others"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|other| OtherTool { server: other["server"].as_str().unwrap(), name: other["name"].as_str().unwrap() })
            .collect();
        let findings = scan(&tool_text(attack), &others);
        let found: Vec<&str> = findings.iter().map(|finding| finding.rule.as_str()).collect();
        let expected: Vec<&str> = attack["expect"].as_array().unwrap().iter().map(|rule| rule.as_str().unwrap()).collect();
        let missing: Vec<&&str> = expected.iter().filter(|rule| !found.contains(rule)).collect();
        if findings.iter().any(|finding| finding.severity >= Severity::Medium) {
            detected += 1;
        }
        if !missing.is_empty() {
            missed.push(format!("{}: missing {missing:?}, found {found:?}", attack["name"]));
        }
    }
    println!("attack corpus: {detected} of {} detected at medium or above", attacks.len());
    assert_eq!(detected, attacks.len(), "undetected attacks:\n{}", missed.join("\n"));
    assert!(missed.is_empty(), "rules that did not fire:\n{}", missed.join("\n"));
}

#[test]
fn findings_quote_little_and_show_hidden_characters() {
    let hidden: String = "secret".chars().map(|c| char::from_u32(0xE0000 + c as u32).unwrap()).collect();
    let description = format!("Echo.{hidden} {}", "x".repeat(500));
    let findings = scan(
        &ToolText { server: "s", name: "t", title: None, description: Some(&description), input_schema: None, output_schema: None },
        &[],
    );
    let finding = findings.iter().find(|finding| finding.rule == "tag-characters").unwrap();
    assert!(finding.excerpt.contains("<U+E0073>"), "{}", finding.excerpt);
    assert!(finding.excerpt.chars().count() <= 120 * 9, "{}", finding.excerpt.len());
    assert_eq!((finding.severity, finding.field.as_str()), (Severity::High, "description"));
}

#[test]
fn an_emoji_sequence_and_a_plain_url_are_not_findings() {
    let description = "Greets 👩\u{200D}💻 users; docs at https://example.com/docs.";
    assert!(scan(
        &ToolText { server: "s", name: "t", title: None, description: Some(description), input_schema: None, output_schema: None },
        &[]
    )
    .is_empty());
}
