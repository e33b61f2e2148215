//! OAuth 2.1 against a real authorization server on loopback
//! (`oauth_server`), driven through the credentials seam the way the HTTP
//! transport drives it: send with `headers()`, report 401/403 to
//! `refused()`, retry on `Retry`.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::Arc;

use crate::oauth_server::{AuthServer, Iss, Meta, Options, PlatformKey, Prm, JWT_BEARER};
use mcpvisor::config::{Auth, Grant, IdentityProvider, OAuthConfig, ServerConfig, Transport};
use mcpvisor::oauth::{Authorizer, FollowRedirects, OAuthCredentials, TokenStore, MAX_STEP_UPS};
use mcpvisor::transport::credentials::{Challenge, Credentials, Renewal, RequestLine};

fn server_config(server: &AuthServer, oauth: OAuthConfig) -> ServerConfig {
    let mut config = ServerConfig::remote("remote", Transport::Http, server.mcp());
    config.auth = Some(Auth::OAuth(oauth));
    config
}

/// Credentials keeping tokens in `dir`, logging in headlessly when `headless`.
fn credentials(server: &AuthServer, oauth: OAuthConfig, dir: &Path, headless: bool) -> OAuthCredentials {
    let authorizer = headless.then(|| Arc::new(FollowRedirects::new().unwrap()) as Arc<dyn Authorizer>);
    OAuthCredentials::new(&server_config(server, oauth), Some(TokenStore::new(dir)), authorizer).unwrap()
}

/// One MCP request as the transport makes it: the status it finally got,
/// or the message of a login left to the user, or the credentials' error.
async fn call(credentials: &dyn Credentials, url: &str) -> Result<u16, String> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let http = reqwest::Client::new();
    for _ in 0..8 {
        let headers = credentials.headers(RequestLine { method: "POST", url }).await.map_err(|e| e.message)?;
        let mut request = http.post(url).body("{}");
        for (name, value) in headers {
            request = request.header(name, value);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status().as_u16();
        if status != 401 && status != 403 {
            return Ok(status);
        }
        let www_authenticate = response.headers().get("www-authenticate").map(|v| v.to_str().unwrap().to_owned());
        match credentials.refused(Challenge { status, www_authenticate, resource: url.into() }).await.map_err(|e| e.message)? {
            Renewal::Retry => continue,
            Renewal::NeedsLogin { message } => return Err(format!("needs login: {message}")),
        }
    }
    Err("still refused after 8 retries".into())
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path).unwrap().permissions().mode() & 0o777
}

#[tokio::test(flavor = "multi_thread")]
async fn login_discovers_from_the_challenge_registers_sends_resource_and_keeps_tokens_private() {
    let server = AuthServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let tokens = dir.path().join("tokens");
    assert_eq!(call(&credentials(&server, OAuthConfig::default(), &tokens, true), &server.mcp()).await, Ok(200));

    let paths: Vec<String> = server.requests().into_iter().map(|r| r.path).collect();
    assert_eq!(paths[1], "/custom/resource-metadata", "the challenge's resource_metadata comes first: {paths:?}");
    let registration: serde_json::Value = serde_json::from_str(&server.to("/register")[0].body).unwrap();
    assert_eq!(registration["application_type"], "native", "dynamic registration of a native client");
    assert_eq!(registration["redirect_uris"][0].as_str().map(|uri| uri.starts_with("http://127.0.0.1:")), Some(true));
    let authorize = &server.to("/authorize")[0];
    assert_eq!(authorize.query.get("resource"), Some(&server.mcp()));
    assert_eq!(authorize.query.get("code_challenge_method").map(String::as_str), Some("S256"));
    assert_eq!(authorize.query.get("client_id").map(String::as_str), Some("dynamic-client"));
    let exchange = &server.grants("authorization_code")[0];
    assert_eq!(exchange.form.get("resource"), Some(&server.mcp()));

    assert_eq!(mode(&tokens), 0o700);
    assert_eq!(mode(&tokens.join("remote.json")), 0o600);
    // A new connection uses the kept token without logging in again.
    assert_eq!(call(&credentials(&server, OAuthConfig::default(), &tokens, false), &server.mcp()).await, Ok(200));
    assert_eq!(server.to("/authorize").len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn an_authorization_server_in_clear_text_off_loopback_is_refused_before_anything_is_sent() {
    // `.invalid` never resolves: without the check the error would be a failed lookup.
    let clear = Options { authorization_servers: Some(vec!["http://auth.invalid".into()]), ..Options::default() };
    let server = AuthServer::start(clear).await;
    let dir = tempfile::tempdir().unwrap();
    let error = call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await.unwrap_err();
    assert!(error.contains("http://auth.invalid uses http://, which OAuth refuses"), "{error}");
    assert!(error.contains("https"), "{error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_token_endpoint_redirecting_elsewhere_gets_no_code_and_no_verifier() {
    let elsewhere = AuthServer::start(Options::default()).await;
    let redirecting = Options { token_redirect: Some(format!("{}/token", elsewhere.base)), ..Options::default() };
    let server = AuthServer::start(redirecting).await;
    let dir = tempfile::tempdir().unwrap();
    let error = call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await.unwrap_err();
    assert!(error.contains("answered HTTP 307, a redirect to"), "{error}");
    assert!(error.contains("follow no redirect"), "{error}");
    assert_eq!(server.to("/token").len(), 1, "the code was exchanged at the configured endpoint only");
    assert!(elsewhere.requests().is_empty(), "nothing reached the other origin: {:?}", elsewhere.requests());
    let verifier = server.to("/token")[0].form.get("code_verifier").cloned().unwrap_or_default();
    assert!(!verifier.is_empty() && !error.contains(&verifier), "the verifier is never shown: {error}");
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_is_found_at_path_aware_well_known_urls_and_by_openid_discovery() {
    let cases = [
        (Prm::PathAware, Meta::OAuth, "/tenant", "/.well-known/oauth-authorization-server/tenant"),
        (Prm::PathAware, Meta::OpenIdInserted, "/tenant", "/.well-known/openid-configuration/tenant"),
        (Prm::Root, Meta::OpenIdAppended, "/tenant", "/tenant/.well-known/openid-configuration"),
        (Prm::Root, Meta::OpenIdInserted, "", "/.well-known/openid-configuration"),
        (Prm::Absent, Meta::OAuth, "", "/.well-known/oauth-authorization-server"),
    ];
    for (prm, meta, issuer_path, metadata_path) in cases {
        let server = AuthServer::start(Options { prm, meta, issuer_path, ..Options::default() }).await;
        let dir = tempfile::tempdir().unwrap();
        let result = call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await;
        assert_eq!(result, Ok(200), "{prm:?} {meta:?} {issuer_path:?}");
        assert_eq!(server.to(metadata_path).len(), 1, "{metadata_path}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_server_without_any_metadata_gets_the_2025_03_26_default_endpoints() {
    let server = AuthServer::start(Options { prm: Prm::Absent, meta: Meta::Absent, iss: Iss::Absent, ..Options::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await, Ok(200));
    assert_eq!((server.to("/register").len(), server.to("/authorize").len(), server.grants("authorization_code").len()), (1, 1, 1));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_2025_03_26_server_names_its_own_issuer_and_its_redirects_are_checked_against_it() {
    // No resource metadata: the metadata at the origin names the issuer
    // `<origin>/oauth`, which is taken (there is none to compare it with).
    for (iss, logs_in) in [(Iss::Correct, true), (Iss::Wrong, false)] {
        let server = AuthServer::start(Options { prm: Prm::Absent, declared_issuer: Some("/oauth"), iss, ..Options::default() }).await;
        let dir = tempfile::tempdir().unwrap();
        let outcome = call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await;
        if logs_in {
            assert_eq!(outcome, Ok(200));
            let kept: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("remote.json")).unwrap()).unwrap();
            assert_eq!(kept["current"], format!("{}/oauth", server.base));
        } else {
            assert!(outcome.unwrap_err().contains("mix-up"), "the redirect's iss is checked against the declared issuer");
            assert!(server.grants("authorization_code").is_empty());
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn metadata_for_another_resource_or_issuer_is_refused() {
    let cases = [
        (Options { declared_resource: Some("http://other.example/mcp"), ..Options::default() }, "not for"),
        (Options { declared_issuer: Some("https://evil.example"), ..Options::default() }, "RFC 8414"),
    ];
    for (options, expected) in cases {
        let server = AuthServer::start(options).await;
        let dir = tempfile::tempdir().unwrap();
        let error = call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await.unwrap_err();
        assert!(error.contains(expected), "{error}");
        assert!(server.to("/authorize").is_empty() && server.to("/register").is_empty());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_step_up_needing_the_user_is_remembered_for_the_next_login() {
    let options = Options { challenge_scope: Some("read"), required_scope: Some("admin"), ..Options::default() };
    let server = AuthServer::start(options).await;
    let dir = tempfile::tempdir().unwrap();
    let connection = credentials(&server, OAuthConfig::default(), dir.path(), false);
    assert!(call(&connection, &server.mcp()).await.unwrap_err().contains("for the scopes \"read\""));
    let login = FollowRedirects::new().unwrap();
    let logged_in = connection.log_in(&login, std::time::Duration::from_secs(60)).await.unwrap();
    assert_eq!(logged_in.scopes, ["read"]);
    let error = call(&connection, &server.mcp()).await.unwrap_err();
    assert!(error.contains("for the scopes \"read admin\""), "{error}");
    let logged_in = connection.log_in(&login, std::time::Duration::from_secs(60)).await.unwrap();
    assert_eq!((logged_in.issuer, logged_in.scopes), (server.issuer(), vec!["read".to_owned(), "admin".to_owned()]));
    assert_eq!(call(&connection, &server.mcp()).await, Ok(200));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_authorization_server_without_pkce_s256_is_refused_before_anything_is_sent() {
    let server = AuthServer::start(Options { pkce: false, ..Options::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let error = call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await.unwrap_err();
    assert!(error.contains("PKCE"), "{error}");
    assert!(server.to("/register").is_empty() && server.to("/authorize").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn clients_come_from_the_configuration_then_a_metadata_document_then_registration() {
    let document = "https://client.example/mcpvisor.json".to_owned();
    let cases = [
        (false, OAuthConfig { client_id: Some("pre-registered".into()), ..OAuthConfig::default() }, "pre-registered", 0),
        (true, OAuthConfig { client_metadata_url: Some(document.clone()), ..OAuthConfig::default() }, document.as_str(), 0),
        (false, OAuthConfig { client_metadata_url: Some(document.clone()), ..OAuthConfig::default() }, "dynamic-client", 1),
    ];
    for (cimd, oauth, client_id, registrations) in cases {
        let server = AuthServer::start(Options { cimd, ..Options::default() }).await;
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(call(&credentials(&server, oauth, dir.path(), true), &server.mcp()).await, Ok(200));
        assert_eq!(server.to("/authorize")[0].query.get("client_id").map(String::as_str), Some(client_id));
        assert_eq!(server.grants("authorization_code")[0].form.get("client_id").map(String::as_str), Some(client_id));
        assert_eq!(server.to("/register").len(), registrations, "{client_id}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_redirect_naming_another_issuer_or_none_when_one_is_promised_is_refused() {
    for iss in [Iss::Wrong, Iss::Absent] {
        let server = AuthServer::start(Options { iss, advertise_iss: true, ..Options::default() }).await;
        let dir = tempfile::tempdir().unwrap();
        let error = call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await.unwrap_err();
        assert!(error.contains("iss"), "{iss:?}: {error}");
        assert!(!error.contains("code-"), "the code is not shown: {error}");
        assert!(server.grants("authorization_code").is_empty(), "{iss:?}: the code was not exchanged");
    }
    // A server that does not promise `iss` may leave it out.
    let server = AuthServer::start(Options { iss: Iss::Absent, advertise_iss: false, ..Options::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await, Ok(200));
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_token_is_refreshed_once_for_every_waiting_caller() {
    let server = AuthServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await, Ok(200));
    // The kept token ends: as if time had passed.
    let file = dir.path().join("remote.json");
    let mut kept: serde_json::Value = serde_json::from_slice(&std::fs::read(&file).unwrap()).unwrap();
    let issuer = server.issuer();
    let old_token = kept["issuers"][&issuer]["tokens"]["access_token"].clone();
    kept["issuers"][&issuer]["tokens"]["expires_at"] = 1.into();
    std::fs::write(&file, kept.to_string()).unwrap();

    let waiting = credentials(&server, OAuthConfig::default(), dir.path(), false);
    let mcp = server.mcp();
    let line = RequestLine { method: "POST", url: &mcp };
    let headers = futures::future::join_all((0..8).map(|_| waiting.headers(line))).await;
    assert_eq!(server.grants("refresh_token").len(), 1, "one refresh for eight callers");
    let first = headers[0].as_ref().unwrap().clone();
    assert!(headers.iter().all(|h| h.as_ref().unwrap() == &first), "every caller got the new token");
    assert_ne!(first[0].1, format!("Bearer {}", old_token.as_str().unwrap()));
    assert_eq!(call(&waiting, &server.mcp()).await, Ok(200));
    assert_eq!(server.grants("refresh_token")[0].form.get("resource"), Some(&server.mcp()));
}

#[tokio::test(flavor = "multi_thread")]
async fn callers_refused_together_share_one_login() {
    let server = AuthServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let shared = credentials(&server, OAuthConfig::default(), dir.path(), true);
    let mcp = server.mcp();
    let results = futures::future::join_all((0..6).map(|_| call(&shared, &mcp))).await;
    assert!(results.iter().all(|r| *r == Ok(200)), "{results:?}");
    assert_eq!(server.to("/authorize").len(), 1, "one login for six refused callers");
}

#[tokio::test(flavor = "multi_thread")]
async fn step_up_adds_the_missing_scope_and_gives_up_after_the_limit() {
    let options = Options { challenge_scope: Some("read"), required_scope: Some("admin"), ..Options::default() };
    let server = AuthServer::start(options).await;
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await, Ok(200));
    let scopes: Vec<String> = server.to("/authorize").iter().map(|r| r.query.get("scope").cloned().unwrap_or_default()).collect();
    assert_eq!(scopes, ["read", "read admin"], "the challenge's scope first, then the union for the step-up");

    let server = AuthServer::start(Options { always_insufficient: true, ..Options::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let error = call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await.unwrap_err();
    assert!(error.contains("insufficient_scope"), "{error}");
    assert!(server.to("/authorize").len() as u32 <= 1 + MAX_STEP_UPS, "{} logins", server.to("/authorize").len());
}

#[tokio::test(flavor = "multi_thread")]
async fn scopes_come_from_the_resource_metadata_when_the_challenge_names_none() {
    let server = AuthServer::start(Options { scopes_supported: vec!["files", "search"], ..Options::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await, Ok(200));
    assert_eq!(server.to("/authorize")[0].query.get("scope").map(String::as_str), Some("files search"));
    let bare = AuthServer::start(Options::default()).await;
    assert_eq!(call(&credentials(&bare, OAuthConfig::default(), dir.path(), true), &bare.mcp()).await, Ok(200));
    assert_eq!(bare.to("/authorize")[0].query.get("scope"), None, "no scope parameter when nothing names one");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_machine_client_authenticates_with_its_secret_without_a_browser() {
    let server = AuthServer::start(Options { client_secret: Some(("machine", "machine-secret-value")), ..Options::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let oauth = |secret: &str| OAuthConfig {
        client_id: Some("machine".into()),
        client_secret: Some(secret.into()),
        grant: Grant::ClientCredentials,
        scopes: vec!["jobs".into()],
        ..OAuthConfig::default()
    };
    assert_eq!(call(&credentials(&server, oauth("machine-secret-value"), dir.path(), false), &server.mcp()).await, Ok(200));
    assert!(server.to("/authorize").is_empty());
    let grant = &server.grants("client_credentials")[0];
    assert!(grant.headers["authorization"].starts_with("Basic "));
    assert_eq!((grant.form.get("resource"), grant.form.get("scope").map(String::as_str)), (Some(&server.mcp()), Some("jobs")));

    let other = tempfile::tempdir().unwrap();
    let error = call(&credentials(&server, oauth("wrong-secret-value"), other.path(), false), &server.mcp()).await.unwrap_err();
    assert!(error.contains("invalid_client (unknown client credentials machine:***)"), "the server's echo is shown masked: {error}");
    assert!(!error.contains("wrong-secret-value"), "{error}");
}

/// A JWT client's PEM and the public key the server checks: ES256 with a
/// key made now, RS256 with the test key of `tests/fixtures`.
fn jwt_keys() -> [(String, Vec<u8>, bool); 2] {
    use base64::Engine;
    use ring::signature::{EcdsaKeyPair, KeyPair, RsaKeyPair, ECDSA_P256_SHA256_FIXED_SIGNING};
    use rustls_pki_types::pem::PemObject;
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).unwrap();
    let ecdsa = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).unwrap();
    let body = base64::engine::general_purpose::STANDARD.encode(pkcs8.as_ref());
    let lines: Vec<&str> = body.as_bytes().chunks(64).map(|c| std::str::from_utf8(c).unwrap()).collect();
    let ecdsa_pem = format!("-----BEGIN PRIVATE KEY-----\n{}\n-----END PRIVATE KEY-----\n", lines.join("\n"));
    let rsa_pem = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/tests/fixtures/oauth_test_rsa_key.pem")).unwrap();
    let der = rustls_pki_types::PrivatePkcs8KeyDer::from_pem_slice(rsa_pem.as_bytes()).unwrap();
    let rsa = RsaKeyPair::from_pkcs8(der.secret_pkcs8_der()).unwrap();
    [(ecdsa_pem, ecdsa.public_key().as_ref().to_vec(), false), (rsa_pem, rsa.public().as_ref().to_vec(), true)]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_machine_client_authenticates_with_a_private_key_jwt() {
    for (pem, public_key, jwt_rsa) in jwt_keys() {
        let server = AuthServer::start(Options { jwt_public_key: Some(public_key), jwt_rsa, ..Options::default() }).await;
        let dir = tempfile::tempdir().unwrap();
        let oauth = OAuthConfig {
            client_id: Some("jwt-client".into()),
            private_key: Some(pem),
            grant: Grant::ClientCredentials,
            ..OAuthConfig::default()
        };
        assert_eq!(call(&credentials(&server, oauth, dir.path(), false), &server.mcp()).await, Ok(200), "RSA: {jwt_rsa}");
        let grant = &server.grants("client_credentials")[0];
        assert!(!grant.headers.contains_key("authorization"), "no secret: the assertion authenticates");
        assert_eq!(grant.form.get("client_id").map(String::as_str), Some("jwt-client"));
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn without_an_authorizer_a_login_is_left_to_the_user() {
    let server = AuthServer::start(Options { challenge_scope: Some("read"), ..Options::default() }).await;
    let dir = tempfile::tempdir().unwrap();
    let error = call(&credentials(&server, OAuthConfig::default(), dir.path(), false), &server.mcp()).await.unwrap_err();
    assert!(error.starts_with("needs login: "), "{error}");
    assert!(error.contains("\"remote\"") && error.contains(&server.issuer()) && error.contains("read"), "{error}");
    assert!(server.to("/authorize").is_empty() && server.to("/register").is_empty());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_login_made_by_another_process_is_picked_up_at_the_next_refusal() {
    let server = AuthServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let connection = credentials(&server, OAuthConfig::default(), dir.path(), false);
    assert!(call(&connection, &server.mcp()).await.unwrap_err().starts_with("needs login"));
    // `mcpvisor auth` in another process, sharing the token directory.
    assert_eq!(call(&credentials(&server, OAuthConfig::default(), dir.path(), true), &server.mcp()).await, Ok(200));
    assert_eq!(call(&connection, &server.mcp()).await, Ok(200));
    assert_eq!(server.to("/authorize").len(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn without_a_token_directory_tokens_are_kept_in_memory() {
    let server = AuthServer::start(Options::default()).await;
    let authorizer: Arc<dyn Authorizer> = Arc::new(FollowRedirects::new().unwrap());
    let credentials = OAuthCredentials::new(&server_config(&server, OAuthConfig::default()), None, Some(authorizer)).unwrap();
    assert_eq!(call(&credentials, &server.mcp()).await, Ok(200));
    assert_eq!(call(&credentials, &server.mcp()).await, Ok(200));
    assert_eq!(server.to("/authorize").len(), 1, "the second call used the token kept in memory");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_transport_constructor_uses_the_given_authorizer_and_the_configured_token_directory() {
    let server = AuthServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let oauth = OAuthConfig { token_dir: Some(dir.path().to_owned()), ..OAuthConfig::default() };
    let authorizer: Arc<dyn Authorizer> = Arc::new(FollowRedirects::new().unwrap());
    let credentials = OAuthCredentials::for_server(&server_config(&server, oauth), Some(authorizer)).unwrap();
    assert_eq!(call(credentials.as_ref(), &server.mcp()).await, Ok(200));
    assert!(dir.path().join("remote.json").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_resource_that_moves_to_another_authorization_server_logs_in_there_with_a_client_of_its_own() {
    // Right after the login (the refusal comes within the renewal grace),
    // and in a process started later (nothing renewed yet).
    for restarted in [false, true] {
        let server = AuthServer::start(Options::default()).await;
        let dir = tempfile::tempdir().unwrap();
        let first = credentials(&server, OAuthConfig::default(), dir.path(), true);
        assert_eq!(call(&first, &server.mcp()).await, Ok(200));
        server.move_authorization_server();
        let connection = if restarted { credentials(&server, OAuthConfig::default(), dir.path(), true) } else { first };
        assert_eq!(call(&connection, &server.mcp()).await, Ok(200), "restarted: {restarted}");

        assert_eq!(server.to("/moved/register").len(), 1, "registered with the new server");
        let authorize = &server.to("/moved/authorize")[0];
        assert_eq!(authorize.query.get("client_id").map(String::as_str), Some("moved-client"));
        let at_new = server.to("/moved/token");
        assert!(
            at_new.iter().all(|r| r.form.get("grant_type").map(String::as_str) == Some("authorization_code")),
            "no refresh token of the old server: {at_new:?}"
        );
        assert!(at_new.iter().all(|r| !r.body.contains("dynamic-client")), "no client of the old server");
        let kept: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(dir.path().join("remote.json")).unwrap()).unwrap();
        assert_eq!(kept["current"], format!("{}/moved", server.base));
        assert!(kept["issuers"][&server.base].is_object(), "each issuer keeps its own entry: {kept}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_workload_presents_its_platform_token_and_a_refusal_is_final() {
    let platform = PlatformKey::new();
    let server = AuthServer::start(Options { assertion_key: Some(platform.public_key()), ..Options::default() }).await;
    let jwt_bearer = |assertion: String| OAuthConfig {
        client_id: Some("workload".into()),
        grant: Grant::JwtBearer,
        assertion: Some(assertion),
        scopes: vec!["jobs".into()],
        ..OAuthConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    let valid = platform.token(&server.issuer(), 300);
    assert_eq!(call(&credentials(&server, jwt_bearer(valid.clone()), dir.path(), false), &server.mcp()).await, Ok(200));
    let grant = &server.grants(JWT_BEARER)[0];
    assert_eq!(grant.form.get("assertion"), Some(&valid));
    assert_eq!(grant.form.get("client_id").map(String::as_str), Some("workload"));
    assert_eq!((grant.form.get("resource"), grant.form.get("scope").map(String::as_str)), (Some(&server.mcp()), Some("jobs")));

    // Expired, or for another audience: refused once, no other grant tried.
    for refused in [platform.token(&server.issuer(), -60), platform.token("https://other.example", 300)] {
        let server = AuthServer::start(Options { assertion_key: Some(platform.public_key()), ..Options::default() }).await;
        let other = tempfile::tempdir().unwrap();
        let error = call(&credentials(&server, jwt_bearer(refused.clone()), other.path(), true), &server.mcp()).await.unwrap_err();
        assert!(error.contains("refused the assertion grant (RFC 7523): invalid_grant"), "{error}");
        assert!(!error.contains(&refused), "{error}");
        assert_eq!(server.to("/token").len(), 1, "no retry, no other grant");
        assert!(server.to("/authorize").is_empty() && server.to("/register").is_empty());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_enterprise_users_id_token_is_exchanged_for_an_id_jag_which_is_presented() {
    let options = Options { id_token: Some("user-id-token"), client_secret: Some(("crm", "crm-secret-value")), ..Options::default() };
    let server = AuthServer::start(options).await;
    let enterprise = |id_token: &str| OAuthConfig {
        client_id: Some("crm".into()),
        client_secret: Some("crm-secret-value".into()),
        grant: Grant::JwtBearer,
        identity_provider: Some(Box::new(IdentityProvider {
            token_endpoint: format!("{}/idp/token", server.base),
            client_id: "mcpvisor".into(),
            id_token: Some(id_token.into()),
            ..IdentityProvider::default()
        })),
        ..OAuthConfig::default()
    };
    let dir = tempfile::tempdir().unwrap();
    assert_eq!(call(&credentials(&server, enterprise("user-id-token"), dir.path(), false), &server.mcp()).await, Ok(200));
    let exchange = &server.to("/idp/token")[0].form;
    assert_eq!(exchange.get("subject_token").map(String::as_str), Some("user-id-token"));
    assert_eq!((exchange.get("audience"), exchange.get("resource")), (Some(&server.issuer()), Some(&server.mcp())));
    assert_eq!(exchange.get("client_id").map(String::as_str), Some("mcpvisor"));
    let grant = &server.grants(JWT_BEARER)[0];
    assert!(grant.form["assertion"].starts_with("id-jag-"), "the ID-JAG is presented: {grant:?}");
    assert!(grant.headers["authorization"].starts_with("Basic "), "the client authenticates at the authorization server");

    let other = tempfile::tempdir().unwrap();
    let error = call(&credentials(&server, enterprise("stale-id-token-value"), other.path(), false), &server.mcp()).await.unwrap_err();
    assert!(error.contains("refused the token exchange for an ID-JAG: invalid_grant"), "{error}");
    assert!(!error.contains("stale-id-token-value"), "the identity provider's echo is masked: {error}");
}

/// A browser that a local process races: on `open`, something connects to
/// the login's loopback listener and sends nothing (kept open), then a
/// browser follows the URL in a task of its own and reports the page it got.
struct StalledThenBrowsed {
    pages: tokio::sync::mpsc::UnboundedSender<String>,
    stallers: std::sync::Mutex<Vec<std::net::TcpStream>>,
}

impl Authorizer for StalledThenBrowsed {
    fn open<'a>(&'a self, url: &'a str) -> futures::future::BoxFuture<'a, Result<(), mcpvisor::oauth::OAuthError>> {
        Box::pin(async move {
            let parsed = url::Url::parse(url).unwrap();
            let redirect = parsed.query_pairs().find(|(key, _)| key == "redirect_uri").unwrap().1.into_owned();
            let port = url::Url::parse(&redirect).unwrap().port().unwrap();
            let staller = std::net::TcpStream::connect(("127.0.0.1", port)).unwrap();
            self.stallers.lock().unwrap().push(staller);
            let (url, pages) = (url.to_owned(), self.pages.clone());
            tokio::spawn(async move {
                let page = match reqwest::Client::new().get(url).send().await {
                    Ok(response) => response.text().await.unwrap_or_default(),
                    Err(error) => format!("no page: {error}"),
                };
                let _ = pages.send(page);
            });
            Ok(())
        })
    }
}

/// Issue 19: a local process that connected to the loopback listener and
/// sent nothing blocked the real redirect; and the page said "Logged in"
/// before `iss` was checked and the code exchanged.
#[tokio::test(flavor = "multi_thread")]
async fn a_stalled_local_connection_does_not_block_the_login_and_the_page_tells_the_outcome() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    for (iss, logs_in) in [(Iss::Correct, true), (Iss::Wrong, false)] {
        let server = AuthServer::start(Options { iss, advertise_iss: true, ..Options::default() }).await;
        let dir = tempfile::tempdir().unwrap();
        let (pages, mut seen) = tokio::sync::mpsc::unbounded_channel();
        let authorizer = Arc::new(StalledThenBrowsed { pages, stallers: Default::default() });
        let credentials =
            OAuthCredentials::new(&server_config(&server, OAuthConfig::default()), Some(TokenStore::new(dir.path())), Some(authorizer))
                .unwrap();
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(30), call(&credentials, &server.mcp()))
            .await
            .expect("the login ends although a local connection stalls");
        assert_eq!(outcome.is_ok(), logs_in, "{iss:?}: {outcome:?}");
        let page = tokio::time::timeout(std::time::Duration::from_secs(10), seen.recv()).await.unwrap().unwrap();
        assert_eq!(page.contains("Logged in"), logs_in, "{iss:?}: {page}");
        assert_eq!(page.contains("The login failed"), !logs_in, "{iss:?}: {page}");
    }
}

/// Issue 19: a `resource_metadata` URL (named by the server's challenge)
/// that answers with an error page had that page printed; the error shows
/// the status and content type only.
#[tokio::test(flavor = "multi_thread")]
async fn a_failing_resource_metadata_url_is_reported_by_status_not_by_its_page() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let bad = format!("http://{}/.well-known/oauth-protected-resource", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let mut head = [0u8; 4096];
            let _ = stream.read(&mut head).await;
            let body = "<html><pre>internal-trace at db.internal:5432 user=admin</pre></html>";
            let answer = format!(
                "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
            let _ = stream.write_all(answer.as_bytes()).await;
        }
    });
    let server = AuthServer::start(Options::default()).await;
    let dir = tempfile::tempdir().unwrap();
    let credentials = credentials(&server, OAuthConfig::default(), dir.path(), true);
    let challenge =
        Challenge { status: 401, www_authenticate: Some(format!("Bearer resource_metadata=\"{bad}\"")), resource: server.mcp() };
    let error = match credentials.refused(challenge).await {
        Err(error) => error.message,
        Ok(_) => panic!("a 502 for the resource metadata is an error"),
    };
    assert!(error.contains("502") && error.contains("text/html"), "{error}");
    assert!(!error.contains("internal-trace") && !error.contains("admin"), "{error}");
}
