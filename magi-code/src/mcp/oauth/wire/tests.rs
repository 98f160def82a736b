use super::super::login::{parse_redirect, Redirect};
use super::super::url::{canonical, decode, form, query_pairs, Url};
use super::*;
use crate::mcp::tokens::Token;
use crate::util::b64::encode as base64url;

#[test]
fn pkce_s256_matches_rfc_7636_appendix_b() {
    let octets = [
        116, 24, 223, 180, 151, 153, 224, 37, 79, 250, 96, 125, 216, 173, 187, 186, 22, 212, 37,
        77, 105, 214, 191, 240, 91, 88, 5, 88, 83, 132, 141, 121,
    ];
    let verifier = base64url(&octets);
    assert_eq!(verifier, "dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk");
    let p = Pkce::from_verifier(&verifier);
    assert_eq!(p.challenge, "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    let r = Pkce::random().unwrap();
    assert_eq!(r.verifier.len(), 43, "32 bytes, unpadded");
    assert_ne!(r.verifier, Pkce::random().unwrap().verifier);
    assert_eq!(base64url(b"f"), "Zg");
    assert_eq!(base64url(b"fo"), "Zm8");
    assert_eq!(base64url(b"foo"), "Zm9v");
    assert_eq!(base64url(&[0xfb, 0xff]), "-_8");
}

#[test]
fn the_canonical_url_lowercases_and_drops_default_port_fragment_and_lone_slash() {
    for (given, want) in [
        ("HTTPS://MCP.Example.com:443/", "https://mcp.example.com"),
        ("https://mcp.example.com", "https://mcp.example.com"),
        (
            "https://mcp.example.com/MCP/?a=B#frag",
            "https://mcp.example.com/MCP/?a=B",
        ),
        ("http://127.0.0.1:8080/mcp", "http://127.0.0.1:8080/mcp"),
        ("http://localhost:80/mcp", "http://localhost/mcp"),
        ("https://[::1]:8443/x", "https://[::1]:8443/x"),
    ] {
        assert_eq!(canonical(given).as_deref(), Some(want), "{given}");
    }
    for bad in [
        "ftp://a",
        "https://",
        "https://u@a",
        "https://a:99999",
        "https://a b",
        "a",
    ] {
        assert_eq!(canonical(bad), None, "{bad}");
    }
    let allowed = |s: &str| Url::parse(s).unwrap().is_allowed();
    assert!(allowed("https://a.example"));
    assert!(allowed("http://127.3.4.5:1/"));
    assert!(allowed("http://[::1]:1/"));
    assert!(allowed("http://localhost/"));
    assert!(!allowed("http://a.example/"));
    assert!(!allowed("http://128.0.0.1/"));
}

#[test]
fn discovery_addresses_try_the_path_suffixed_form_then_the_root() {
    let u = Url::parse("https://a.example/v1/mcp").unwrap();
    assert_eq!(
        u.well_known("oauth-protected-resource"),
        [
            "https://a.example/.well-known/oauth-protected-resource/v1/mcp",
            "https://a.example/.well-known/oauth-protected-resource"
        ]
    );
    assert_eq!(
        Url::parse("https://a.example/").unwrap().well_known("x"),
        ["https://a.example/.well-known/x"]
    );
    assert_eq!(
        server_metadata_urls("https://auth.example/tenant"),
        [
            "https://auth.example/.well-known/oauth-authorization-server/tenant",
            "https://auth.example/.well-known/oauth-authorization-server",
            "https://auth.example/.well-known/openid-configuration/tenant",
            "https://auth.example/tenant/.well-known/openid-configuration",
            "https://auth.example/.well-known/openid-configuration",
        ]
    );
    assert_eq!(
        server_metadata_urls("https://auth.example"),
        [
            "https://auth.example/.well-known/oauth-authorization-server",
            "https://auth.example/.well-known/openid-configuration",
        ]
    );
}

#[test]
fn metadata_parsing_keeps_allowed_endpoints_and_requires_s256_when_listed() {
    let prm = br#"{"resource":"https://a.example/mcp","authorization_servers":
        ["http://evil.example","https://auth.example"],"scopes_supported":["read"]}"#;
    let m = parse_resource_metadata(prm).unwrap();
    assert_eq!(m.resource.as_deref(), Some("https://a.example/mcp"));
    assert_eq!(m.authorization_servers, ["https://auth.example"]);
    assert_eq!(m.scopes_supported, ["read"]);
    assert!(parse_resource_metadata(br#"{"authorization_servers":[]}"#).is_none());
    assert!(parse_resource_metadata(b"<html>").is_none());
    let asm = br#"{"issuer":"https://auth.example","authorization_endpoint":"https://auth.example/authorize",
        "token_endpoint":"https://auth.example/token","registration_endpoint":"https://auth.example/register",
        "code_challenge_methods_supported":["plain","S256"]}"#;
    let s = parse_server_metadata(asm).unwrap();
    assert_eq!(s.token_endpoint, "https://auth.example/token");
    assert_eq!(
        s.registration_endpoint.as_deref(),
        Some("https://auth.example/register")
    );
    let plain_only = br#"{"authorization_endpoint":"https://a/x","token_endpoint":"https://a/t",
        "code_challenge_methods_supported":["plain"]}"#;
    assert!(parse_server_metadata(plain_only).is_none());
    let http = br#"{"authorization_endpoint":"https://a/x","token_endpoint":"http://a.example/t"}"#;
    assert!(
        parse_server_metadata(http).is_none(),
        "a token endpoint in the clear"
    );
    let unlisted = br#"{"authorization_endpoint":"https://a/x","token_endpoint":"https://a/t"}"#;
    assert_eq!(
        parse_server_metadata(unlisted)
            .unwrap()
            .registration_endpoint,
        None
    );
}

#[test]
fn www_authenticate_names_the_resource_metadata() {
    let h = r#"Bearer error="invalid_token", resource_metadata="https://a.example/.well-known/oauth-protected-resource""#;
    assert_eq!(
        resource_metadata_param(h).as_deref(),
        Some("https://a.example/.well-known/oauth-protected-resource")
    );
    assert_eq!(
        resource_metadata_param("Bearer resource_metadata=https://a.example/m, scope=x").as_deref(),
        Some("https://a.example/m")
    );
    assert_eq!(resource_metadata_param("Bearer realm=\"x\""), None);
    assert_eq!(
        resource_metadata_param("Bearer resource_metadata=\"http://a.example/m\""),
        None
    );
}

fn saved() -> Token {
    Token {
        url: "https://a.example/mcp".into(),
        access_token: "old-access".into(),
        refresh_token: Some("old-refresh".into()),
        expires_at_ms: Some(5_000),
        token_endpoint: "https://auth.example/token".into(),
        client_id: "cid".into(),
        client_secret: None,
        resource: "https://a.example/mcp".into(),
        scopes: vec!["read".into()],
    }
}

#[test]
fn the_refresh_request_names_the_resource_and_the_client() {
    let p = refresh_request(&saved()).unwrap();
    assert_eq!(p.url, "https://auth.example/token");
    assert_eq!(p.content_type, "application/x-www-form-urlencoded");
    let pairs = query_pairs(&p.body);
    let want = [
        ("grant_type", "refresh_token"),
        ("refresh_token", "old-refresh"),
        ("client_id", "cid"),
        ("resource", "https://a.example/mcp"),
    ];
    let want: Vec<(String, String)> = want
        .iter()
        .map(|(a, b)| ((*a).into(), (*b).into()))
        .collect();
    assert_eq!(pairs, want);
    let mut t = saved();
    t.client_secret = Some("s&=".into());
    assert!(refresh_request(&t)
        .unwrap()
        .body
        .ends_with("&client_secret=s%26%3D"));
    t.refresh_token = None;
    assert!(refresh_request(&t).is_none());
}

#[test]
fn token_answers_are_parsed_and_a_rotated_refresh_token_is_kept() {
    let a = parse_token_response(
        200,
        br#"{"access_token":"new","token_type":"Bearer","expires_in":3600,"refresh_token":"rot","scope":"read write"}"#,
    )
    .unwrap();
    let t = refreshed(&saved(), a, 10_000);
    assert_eq!(t.access_token, "new");
    assert_eq!(t.refresh_token.as_deref(), Some("rot"));
    assert_eq!(t.expires_at_ms, Some(3_610_000));
    assert_eq!(t.scopes, ["read", "write"]);
    let a = parse_token_response(200, br#"{"access_token":"n2","token_type":"bearer"}"#).unwrap();
    let t = refreshed(&saved(), a, 10_000);
    assert_eq!(
        t.refresh_token.as_deref(),
        Some("old-refresh"),
        "absent keeps the old"
    );
    assert_eq!(t.expires_at_ms, None);
    assert_eq!(t.scopes, ["read"]);
    let err = |s, b: &[u8]| parse_token_response(s, b).err();
    assert_eq!(
        err(400, br#"{"error":"invalid_grant"}"#),
        Some(AuthError::Refused)
    );
    assert_eq!(err(401, b""), Some(AuthError::Refused));
    assert_eq!(err(500, b""), Some(AuthError::RefreshFailed));
    assert_eq!(err(200, b"not json"), Some(AuthError::RefreshFailed));
    assert_eq!(
        err(200, br#"{"token_type":"bearer"}"#),
        Some(AuthError::RefreshFailed)
    );
    assert_eq!(
        err(200, br#"{"access_token":"x","token_type":"mac"}"#),
        Some(AuthError::RefreshFailed)
    );
    assert_eq!(
        err(200, br#"{"access_token":"x","expires_in":"soon"}"#),
        Some(AuthError::RefreshFailed)
    );
}

#[test]
fn expiry_is_soon_within_sixty_seconds() {
    let mut t = saved();
    t.expires_at_ms = Some(100_000);
    assert!(!expires_soon(&t, 100_000 - EARLY_REFRESH_MS - 1));
    assert!(expires_soon(&t, 100_000 - EARLY_REFRESH_MS));
    let mut unknown = saved();
    unknown.expires_at_ms = None;
    assert!(!expires_soon(&unknown, u64::MAX));
}

#[test]
fn the_authorization_url_carries_pkce_state_and_resource() {
    let p = Pkce::from_verifier("v");
    let u = authorization_url(
        "https://auth.example/authorize?tenant=1",
        "cid",
        "http://127.0.0.1:5/callback",
        &p,
        "st",
        "https://a.example/mcp",
        &["read".into(), "write".into()],
    );
    let (base, q) = u.split_once('?').unwrap();
    assert_eq!(base, "https://auth.example/authorize");
    let pairs = query_pairs(q);
    let get = |k: &str| pairs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("tenant").as_deref(), Some("1"));
    assert_eq!(get("code_challenge"), Some(p.challenge));
    assert_eq!(get("code_challenge_method").as_deref(), Some("S256"));
    assert_eq!(
        get("redirect_uri").as_deref(),
        Some("http://127.0.0.1:5/callback")
    );
    assert_eq!(get("resource").as_deref(), Some("https://a.example/mcp"));
    assert_eq!(get("scope").as_deref(), Some("read write"));
    assert_eq!(get("state").as_deref(), Some("st"));
    assert_eq!(decode("a+b%20c").as_deref(), Some("a b c"));
    assert_eq!(decode("%zz"), None);
    assert_eq!(form(&[("a b", "é")]), "a%20b=%C3%A9");
}

#[test]
fn a_redirect_counts_only_with_our_state() {
    let r = |s| parse_redirect(s, "st-1");
    assert_eq!(
        r("http://127.0.0.1:9/callback?code=abc&state=st-1"),
        Redirect::Code("abc".into())
    );
    assert_eq!(
        r("  /callback?state=st-1&code=a%2Fb#x \n"),
        Redirect::Code("a/b".into())
    );
    assert_eq!(r("/callback?code=abc&state=other"), Redirect::WrongState);
    assert_eq!(r("/callback?code=abc"), Redirect::WrongState);
    assert_eq!(
        r("/callback?error=access_denied&state=st-1"),
        Redirect::Error
    );
    assert_eq!(r("/favicon.ico"), Redirect::NotRedirect);
    assert_eq!(r("hello"), Redirect::NotRedirect);
}

#[test]
fn registration_asks_for_a_public_client_with_the_loopback_redirect() {
    let p = registration_request(
        "https://auth.example/register",
        "http://127.0.0.1:5/callback",
        &[],
    );
    let v: Value = serde_json::from_str(&p.body).unwrap();
    assert_eq!(v["redirect_uris"], json!(["http://127.0.0.1:5/callback"]));
    assert_eq!(v["token_endpoint_auth_method"], "none");
    assert_eq!(
        v["grant_types"],
        json!(["authorization_code", "refresh_token"])
    );
    assert_eq!(
        parse_registration(201, br#"{"client_id":"c","client_secret":"s"}"#),
        Some(("c".into(), Some("s".into())))
    );
    assert_eq!(
        parse_registration(201, br#"{"client_id":"c"}"#),
        Some(("c".into(), None))
    );
    assert_eq!(parse_registration(400, br#"{"client_id":"c"}"#), None);
    assert_eq!(parse_registration(201, br#"{"client_id":""}"#), None);
}
