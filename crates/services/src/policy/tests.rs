use serde_json::{json, Map};

use super::*;
use crate::identity::Proof;

const FILE: &str = "/etc/mcpvisor/servers.toml";

fn policy(text: &str) -> Result<Policy, String> {
    let text = text.replace("[policy]", "[serve.policy]").replace("[[policy.rules]]", "[[serve.policy.rules]]");
    let document: toml_edit::DocumentMut = text.parse().unwrap();
    let settings = crate::config::read_serve(Path::new(FILE), &document["serve"]).map_err(|e| e.to_string())?;
    Policy::compile(&settings.policy.unwrap_or_default(), Path::new(FILE)).map_err(|e| e.to_string())
}

fn member(subject: &str, team: &str, scopes: &[&str]) -> Identity {
    let mut claims = Map::new();
    claims.insert("team".into(), json!(team));
    Identity { subject: subject.into(), client_id: None, scopes: scopes.iter().map(|s| s.to_string()).collect(), claims, proof: Proof::Key }
}

fn tool<'a>(server: &'a str, name: &'a str) -> Target<'a> {
    Target { server, kind: Kind::Tool, name, arguments: None }
}

const TEAMS: &str = r#"
[policy]
default = "deny"
[[policy.rules]]
name = "red-team-github"
effect = "allow"
servers = ["github*"]
tools = ["*"]
when = 'identity.claims.team == "red" && "tools:call" in identity.scopes'
[[policy.rules]]
name = "everyone-demo"
effect = "allow"
servers = ["demo"]
when = 'identity != null'
[[policy.rules]]
name = "no-deletes"
effect = "deny"
tools = ["delete_*"]
"#;

#[test]
fn rules_allow_by_identity_server_and_tool_and_deny_wins() {
    let policy = policy(TEAMS).unwrap();
    let alice = member("alice", "red", &["tools:call"]);
    let bob = member("bob", "blue", &["tools:call"]);
    assert_eq!(policy.check(Some(&alice), &tool("github-work", "create_issue")), Ok(()));
    let denied = policy.check(Some(&bob), &tool("github-work", "create_issue")).unwrap_err();
    assert_eq!((denied.rule, denied.reason.as_str()), (None, "no rule allows it; the default is deny"));
    assert_eq!(policy.check(Some(&bob), &tool("demo", "echo")), Ok(()));
    let prompt = Target { server: "demo", kind: Kind::Prompt, name: "greet", arguments: None };
    assert_eq!(policy.check(Some(&bob), &prompt), Ok(()), "a rule naming no kind covers prompts too");
    let deleting = policy.check(Some(&alice), &tool("github-work", "delete_repo")).unwrap_err();
    assert_eq!(deleting.rule.as_deref(), Some("no-deletes"));
    assert!(deleting.reason.contains("`no-deletes` denies"), "{}", deleting.reason);
    let resource = Target { server: "github-work", kind: Kind::Resource, name: "repo://x", arguments: None };
    assert!(policy.check(Some(&alice), &resource).is_err(), "a rule naming tools only does not cover resources");
}

#[test]
fn an_expression_that_fails_denies_naming_its_rule_and_null_identity_is_usable() {
    let policy = policy(TEAMS).unwrap();
    // Without an identity, `identity.claims` fails: the rule denies rather than allows.
    let failed = policy.check(None, &tool("github", "search")).unwrap_err();
    assert_eq!(failed.rule.as_deref(), Some("red-team-github"));
    assert!(failed.reason.contains("could not be evaluated"), "{}", failed.reason);
    assert!(policy.check(None, &tool("demo", "echo")).is_err(), "`identity != null` is false over stdio");
    let local = policy_text_allowing("identity == null");
    assert_eq!(local.check(None, &tool("any", "thing")), Ok(()));
    assert!(local.check(Some(&member("a", "red", &[])), &tool("any", "thing")).is_err());
    let not_boolean = policy_text_allowing("server").check(None, &tool("s", "t")).unwrap_err();
    assert!(not_boolean.reason.contains("not true or false"), "{}", not_boolean.reason);
}

fn policy_text_allowing(when: &str) -> Policy {
    policy(&format!("[policy]\ndefault = \"deny\"\n[[policy.rules]]\nname = \"r\"\neffect = \"allow\"\nwhen = '{when}'\n")).unwrap()
}

#[test]
fn expressions_see_the_target_and_the_arguments() {
    let policy = policy_text_allowing(r#"kind == "tool" && tool == name && arguments != null && arguments.repo.startsWith("public/")"#);
    let arguments = json!({"repo": "public/site"});
    let call = Target { server: "gh", kind: Kind::Tool, name: "read", arguments: Some(&arguments) };
    assert_eq!(policy.check(None, &call), Ok(()));
    let private = json!({"repo": "secret/x"});
    assert!(policy.check(None, &Target { arguments: Some(&private), ..call }).is_err());
    let listed = policy.check(None, &Target { arguments: None, ..call });
    assert_eq!(listed.unwrap_err().rule, None, "in a list `arguments` is null: the rule does not apply, the default denies");
    let missing = json!({});
    assert_eq!(policy.check(None, &Target { arguments: Some(&missing), ..call }).unwrap_err().rule.as_deref(), Some("r"));
}

#[test]
fn no_policy_allows_everything_and_a_bad_expression_is_a_config_error() {
    assert!(Policy::default().allows_everything());
    assert_eq!(Policy::default().check(None, &tool("a", "b")), Ok(()));
    let broken = policy("[policy]\n[[policy.rules]]\nname = \"broken\"\neffect = \"allow\"\nwhen = 'identity.('\n").unwrap_err();
    assert!(broken.starts_with(FILE) && broken.contains("`serve.policy.rules.broken.when` is not a valid CEL expression"), "{broken}");
}

#[test]
fn the_current_policy_is_replaced_whole() {
    let current = Current::new(Policy::default());
    let before = current.get();
    current.set(policy_text_allowing("false"));
    assert!(before.allows_everything() && !current.get().allows_everything());
}

#[test]
fn evaluation_errors_quoted_in_denials_are_bounded() {
    let policy = policy_text_allowing("arguments.text + 1 == 2");
    let arguments = json!({"text": "x".repeat(10_000)});
    let denied = policy.check(None, &Target { server: "s", kind: Kind::Tool, name: "t", arguments: Some(&arguments) }).unwrap_err();
    assert!(denied.reason.contains("could not be evaluated") && denied.reason.len() < 400, "{}", denied.reason.len());
}

fn with_argument_rule(when: &str) -> Result<Policy, String> {
    policy(&format!("[policy]\ndefault = \"allow\"\n[[policy.rules]]\nname = \"guard\"\neffect = \"deny\"\nwhen = '{when}'\n"))
}

fn call<'a>(arguments: &'a Value) -> Target<'a> {
    Target { server: "files", kind: Kind::Tool, name: "read_file", arguments: Some(arguments) }
}

#[test]
fn a_rule_with_an_unknown_name_or_function_is_refused_at_load() {
    let error = with_argument_rule("argument.path == \"/x\"").unwrap_err();
    assert!(error.contains(FILE) && error.contains("serve.policy.rules.guard.when"), "{error}");
    assert!(error.contains("uses `argument`") && error.contains("arguments"), "{error}");
    let error = with_argument_rule("arguments.path.lowerAscii() == \"/x\"").unwrap_err();
    assert!(error.contains("uses `lowerAscii()`") && error.contains("path.within"), "{error}");
}

#[test]
fn a_rule_too_costly_for_a_small_input_is_refused_at_load() {
    let nested = "arguments.a.all(a, arguments.a.all(b, arguments.a.all(c, arguments.a.all(d, d in arguments.a))))";
    let error = with_argument_rule(nested).unwrap_err();
    assert!(error.contains("over the budget") && error.contains("faster than n^4"), "{error}");
}

#[test]
fn a_rule_over_its_budget_for_this_input_denies_without_running() {
    let policy = with_argument_rule("arguments.items.all(x, arguments.items.filter(y, y == x).size() == 1) == false").unwrap();
    let small = json!({"items": ["a", "b", "c"]});
    assert_eq!(policy.check(None, &call(&small)), Ok(()), "three distinct items: the rule runs and does not deny");
    let large = json!({"items": (0..20_000).map(|i| format!("item-{i}")).collect::<Vec<_>>()});
    let started = std::time::Instant::now();
    let denial = policy.check(None, &call(&large)).unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!(denial.rule.as_deref(), Some("guard"));
    assert!(denial.reason.contains("over the budget") && denial.reason.contains("size 20"), "{}", denial.reason);
    assert!(policy.estimate(None, &call(&large)) > STEP_BUDGET);
    assert!(policy.estimate(None, &call(&small)) < 1_000.0);
}

#[test]
fn path_helpers_judge_a_path_as_the_server_resolves_it() {
    let policy = with_argument_rule("!path.within(arguments.path, \"/srv/public\")").unwrap();
    let allowed = json!({"path": "/srv/public/./notes/../readme.txt"});
    assert_eq!(policy.check(None, &call(&allowed)), Ok(()));
    for escaping in ["/srv/public/../private/secrets.txt", "/srv//public/../../etc/passwd", "/srv/publicity/x", "srv/public/a"] {
        let arguments = json!({ "path": escaping });
        assert!(policy.check(None, &call(&arguments)).is_err(), "{escaping}");
    }
    let missing = json!({});
    assert!(policy.check(None, &call(&missing)).is_err(), "no path: the rule cannot be evaluated, which denies");
}
