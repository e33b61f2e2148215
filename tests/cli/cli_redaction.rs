//! One redaction model: values that cannot be secrets are left alone (so
//! answers and JSON stay intact), and secrets in args, URLs, tokens of a
//! known shape and multi-line values are masked in listings, errors,
//! stderr tails and logs.

use crate::cli_support::{demo_table, reports_on, stderr, stdout, Sandbox};

#[test]
fn values_that_cannot_be_secrets_are_not_masked_and_json_stays_valid() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!("{}env = {{ MAX_TOKENS = \"1000\", AUTH_REQUIRED = \"false\" }}\n", demo_table("demo", &[])));
    sandbox.cmd(["call", "demo", "add", r#"{"a": 999, "b": 1}"#]).assert().success().stdout("1000\n");

    let (result, code) = sandbox.json(["--json", "call", "demo", "add", r#"{"a": 999, "b": 1}"#]);
    assert_eq!((code, result["structuredContent"]["sum"].as_f64()), (0, Some(1000.0)), "{result}");
    let (tools, code) = sandbox.json(["--json", "tools"]);
    assert_eq!(code, 0);
    let add = tools.as_array().unwrap().iter().find(|t| t["name"] == "add").expect("the add tool");
    assert_eq!(add["annotations"]["readOnlyHint"], true, "{add}");

    let (list, _) = sandbox.json(["--json", "list"]);
    assert_eq!((list[0]["env"]["MAX_TOKENS"].as_str(), list[0]["env"]["AUTH_REQUIRED"].as_str()), (Some("1000"), Some("false")));
}

const PEM: &str = "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7\nVJTUt9Us8cKjMzEfYyjiWA4R4ypbHOdAa3vtbXGKHKL0x8Ex8Hk\n-----END PRIVATE KEY-----";

/// Secrets given in ways `list` masks; the server prints its args and env on stderr, then exits.
const SECRETS: [&str; 6] = [
    "key-abcdef123",
    "tok-abcdef123",
    "pw-abcdef123",
    "PASS-url-987",
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7",
    "VJTUt9Us8cKjMzEfYyjiWA4R4ypbHOdAa3vtbXGKHKL0x8Ex8Hk",
];

fn leaky_sandbox() -> Sandbox {
    let sandbox = Sandbox::new();
    let script = r#"printf '%s\n' "$@" >&2; printf '%s\n' "$TLS_KEY" "$DSN" >&2; exit 3"#;
    let args = [script, "leaky", "--api-key", "key-abcdef123", "--token=tok-abcdef123", "--password", "pw-abcdef123"];
    let args: Vec<String> = args.iter().map(|a| format!("{a:?}")).collect();
    sandbox.write_user_file(&format!(
        "{}\n[servers.leaky]\ncommand = \"sh\"\nargs = [\"-c\", {}]\nrestart = \"never\"\n[servers.leaky.env]\nDSN = \"postgres://u:PASS-url-987@db.example/app\"\nTLS_KEY = '''\n{PEM}'''\n",
        demo_table("demo", &[]),
        args.join(", ")
    ));
    sandbox
}

#[test]
fn secrets_in_args_urls_and_multi_line_values_never_reach_errors_tails_or_logs() {
    let sandbox = leaky_sandbox();
    let listings = [vec!["list".to_string()], vec!["info".to_string(), "leaky".to_string(), "--json".to_string()]];
    for args in reports_on("leaky").into_iter().chain(listings) {
        let output = sandbox.cmd(&args).output().unwrap();
        let shown = stdout(&output) + &stderr(&output);
        for secret in SECRETS {
            assert!(!shown.contains(secret), "{args:?} shows {secret}:\n{shown}");
        }
        if args[0] != "list" && args[0] != "info" {
            assert!(shown.contains("postgres://u:***@db.example/app"), "{args:?} shows the lines, masked:\n{shown}");
        }
        if args.iter().any(|a| a == "--json") {
            serde_json::from_str::<serde_json::Value>(&stdout(&output)).unwrap_or_else(|e| panic!("{args:?}: not JSON ({e})"));
        }
    }
}

#[test]
fn listings_mask_url_passwords_bearer_credentials_token_shapes_and_signatures() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(concat!(
        "[servers.s]\ncommand = \"srv\"\n",
        "args = [\"--db\", \"mysql://root:hunter22@db/x\", \"-H\", \"Authorization: Bearer abc.def.123456\", ",
        "\"https://acct.blob.core.windows.net/c?sv=2020-08-04&sig=Zm9vYmFy%2Bx\"]\n",
        "env = { GH = \"ghp_abcdefghijklmnopqrstuvwxyz0123456789\", DATABASE_URL = \"postgres://u:pa55word@host/db\", REGION = \"eu-west-1\" }\n",
    ));
    for args in [vec!["list"], vec!["list", "--json"], vec!["info", "s"], vec!["info", "s", "--json"]] {
        let output = sandbox.cmd(&args).output().unwrap();
        assert!(output.status.success(), "{args:?}: {}", stderr(&output));
        let shown = stdout(&output);
        for secret in ["hunter22", "abc.def.123456", "Zm9vYmFy", "ghp_abcdefghij", "pa55word"] {
            assert!(!shown.contains(secret), "{args:?} shows {secret}:\n{shown}");
        }
        assert!(shown.contains("mysql://root:***@db/x") && shown.contains("sig=***"), "{args:?}:\n{shown}");
        if args[0] == "info" {
            assert!(shown.contains("eu-west-1") && shown.contains("postgres://u:***@host/db"), "{args:?}:\n{shown}");
        }
    }
}
