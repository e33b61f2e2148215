//! `mcpvisor auth` and `mcpvisor logout` against a real authorization
//! server on loopback: the login is completed without a browser by
//! following the printed URL, as a user on a machine without one would.

use crate::oauth_server;

use std::io::{BufRead, BufReader};
use std::os::unix::fs::PermissionsExt;
use std::process::Stdio;

use crate::cli_support::Sandbox;
use crate::oauth_server::{AuthServer, Options};

/// Runs `mcpvisor auth NAME --no-browser`, follows the URL it prints, and
/// returns its exit code, stdout and stderr.
async fn auth_following_the_printed_url(sandbox: &Sandbox, name: &str) -> (i32, String, String) {
    let mut child =
        sandbox.std_cmd(["auth", name, "--no-browser"]).stdout(Stdio::piped()).stderr(Stdio::piped()).spawn().expect("mcpvisor runs");
    let stderr = child.stderr.take().unwrap();
    let (url_sender, url) = tokio::sync::oneshot::channel();
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut sender = Some(url_sender);
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if line.starts_with("http") {
                if let Some(sender) = sender.take() {
                    let _ = sender.send(line.clone());
                }
            }
            lines.push(line);
        }
        lines.join("\n")
    });
    if let Ok(url) = url.await {
        let _ = rustls::crypto::ring::default_provider().install_default();
        reqwest::get(&url).await.expect("the authorization URL is followed to the loopback listener");
    }
    let output = tokio::task::spawn_blocking(move || child.wait_with_output()).await.unwrap().unwrap();
    let stderr = reader.join().unwrap();
    (output.status.code().unwrap_or(-1), String::from_utf8_lossy(&output.stdout).into_owned(), stderr)
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_logs_in_through_the_printed_url_and_logout_forgets_the_tokens() {
    let server = AuthServer::start(Options::default()).await;
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!("[servers.remote]\nurl = \"{}\"\n", server.mcp()));

    let (code, stdout, stderr) = auth_following_the_printed_url(&sandbox, "remote").await;
    assert_eq!(code, 0, "stdout: {stdout}\nstderr: {stderr}");
    assert!(stdout.contains(&format!("Logged in to `remote` with {}", server.issuer())), "{stdout}");
    let tokens = sandbox.home.join("xdg/mcpvisor/tokens");
    let file = tokens.join("remote.json");
    assert_eq!(std::fs::metadata(&tokens).unwrap().permissions().mode() & 0o777, 0o700);
    assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
    assert_eq!(server.grants("authorization_code").len(), 1);
    assert!(!stdout.contains("access-") && !stderr.contains("access-"), "no token is printed");

    let logout = sandbox.cmd(["logout", "remote"]).output().unwrap();
    assert!(String::from_utf8_lossy(&logout.stdout).contains("Forgot the tokens of `remote`"));
    assert!(!file.exists());
    let again = sandbox.cmd(["logout", "remote"]).output().unwrap();
    assert!(again.status.success() && String::from_utf8_lossy(&again.stdout).contains("No tokens were kept"));
}

#[tokio::test(flavor = "multi_thread")]
async fn auth_refuses_servers_that_do_not_use_oauth() {
    let sandbox = Sandbox::new();
    sandbox.write_user_file(
        "[servers.local]\ncommand = \"true\"\n\n[servers.keyed]\nurl = \"http://127.0.0.1:9/mcp\"\nauth = { type = \"bearer\", token = \"static-token-value\" }\n",
    );
    for (name, expected) in [("local", "not a remote server"), ("keyed", "configured with a bearer token, not OAuth")] {
        let output = sandbox.cmd(["auth", name, "--no-browser"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{stderr}");
        assert!(stderr.contains(expected) && !stderr.contains("static-token-value"), "{stderr}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_machine_client_logs_in_without_a_browser_and_info_hides_its_secret() {
    let server = AuthServer::start(Options { client_secret: Some(("machine", "machine-secret-value")), ..Options::default() }).await;
    let sandbox = Sandbox::new();
    sandbox.write_user_file(&format!(
        "[servers.ci]\nurl = \"{}\"\nauth = {{ type = \"oauth\", grant = \"client_credentials\", client_id = \"machine\", client_secret = \"${{CI_SECRET}}\" }}\n",
        server.mcp()
    ));
    let output = sandbox.cmd(["auth", "ci", "--no-browser"]).env("CI_SECRET", "machine-secret-value").output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    assert!(!stderr.contains("http"), "no authorization URL for a machine client: {stderr}");
    assert!(server.to("/authorize").is_empty() && server.grants("client_credentials").len() == 1);

    let info = sandbox.cmd(["info", "ci"]).env("CI_SECRET", "machine-secret-value").output().unwrap();
    let shown = String::from_utf8_lossy(&info.stdout);
    assert!(shown.contains("oauth (client_credentials), client_id machine, client_secret ${CI_SECRET}"), "{shown}");
    assert!(!shown.contains("machine-secret-value"), "{shown}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workload_logs_in_with_the_platform_token_its_configuration_names() {
    let platform = oauth_server::PlatformKey::new();
    let server = AuthServer::start(Options { assertion_key: Some(platform.public_key()), ..Options::default() }).await;
    let assertion = platform.token(&server.issuer(), 300);
    let sandbox = Sandbox::new();
    let token_file = sandbox.write("workload-token", &format!("{assertion}\n"));
    sandbox.write_user_file(&format!(
        "[servers.job]\nurl = \"{}\"\nauth = {{ type = \"oauth\", grant = \"jwt_bearer\", client_id = \"workload\", assertion_file = \"{}\" }}\n",
        server.mcp(),
        token_file.display()
    ));
    let output = sandbox.cmd(["auth", "job", "--no-browser"]).output().unwrap();
    let (stdout, stderr) = (String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
    assert!(output.status.success(), "stdout: {stdout}\nstderr: {stderr}");
    let grants = server.grants(oauth_server::JWT_BEARER);
    assert_eq!(grants.len(), 1);
    assert_eq!(grants[0].form.get("assertion"), Some(&assertion), "the file's token, without its newline");
    assert!(server.to("/authorize").is_empty(), "no browser");
}
