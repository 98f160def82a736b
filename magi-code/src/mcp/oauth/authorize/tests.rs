use super::*;
use crate::mcp::tokens::Tokens;
use crate::util::clock::FakeClock;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::sync::Mutex;

const URL: &str = "https://mcp.example/mcp";

/// `MC_HOME` with a token for server `docs` expiring at `expires_at_ms`.
fn home_with(expires_at_ms: u64, refresh: Option<&str>, endpoint: &str) -> tempfile::TempDir {
    let home = tempfile::tempdir().unwrap();
    let mut s = Tokens::lock(home.path()).unwrap();
    s.put(
        "docs",
        Token {
            url: URL.into(),
            access_token: "at-0".into(),
            refresh_token: refresh.map(str::to_owned),
            expires_at_ms: Some(expires_at_ms),
            token_endpoint: endpoint.into(),
            client_id: "cid".into(),
            client_secret: None,
            resource: URL.into(),
            scopes: Vec::new(),
        },
    )
    .unwrap();
    home
}

fn saved(home: &tempfile::TempDir) -> Token {
    Tokens::lock(home.path())
        .unwrap()
        .get("docs", URL)
        .cloned()
        .unwrap()
}

/// A token endpoint that answers `answers` in turn and counts the requests.
fn fake_send(answers: Vec<(u16, &'static str)>) -> (SendToken, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = Arc::clone(&seen);
    let mut answers = answers.into_iter();
    let send: SendToken = Box::new(move |p: &Post| {
        log.lock().unwrap().push(p.body.clone());
        let (s, b) = answers.next().ok_or(())?;
        Ok((s, b.as_bytes().to_vec()))
    });
    (send, seen)
}

#[test]
fn a_token_is_refreshed_only_within_sixty_seconds_of_expiry_on_a_virtual_clock() {
    // Now is 1,000,000 ms; the token expires 120 s later.
    let home = home_with(1_120_000, Some("rt-0"), "https://auth.example/token");
    let clock = Arc::new(FakeClock::default());
    let (send, seen) = fake_send(vec![(
        200,
        r#"{"access_token":"at-1","token_type":"Bearer","expires_in":3600,"refresh_token":"rt-1"}"#,
    )]);
    let mut a =
        OAuthAuthorize::new(home.path(), "docs", URL, clock.clone(), 1_000_000, send).unwrap();
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer at-0"));
    clock.advance(59_999); // 60,001 ms left
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer at-0"));
    assert!(seen.lock().unwrap().is_empty());
    clock.advance(1); // 60,000 ms left: within the bound
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer at-1"));
    assert_eq!(seen.lock().unwrap().len(), 1);
    let t = saved(&home);
    assert_eq!(t.access_token, "at-1", "saved before use");
    assert_eq!(t.refresh_token.as_deref(), Some("rt-1"), "the rotated one");
    assert_eq!(t.expires_at_ms, Some(1_060_000 + 3_600_000));
    assert_eq!(
        a.header().unwrap().as_deref(),
        Some("Bearer at-1"),
        "no second refresh"
    );
    assert_eq!(seen.lock().unwrap().len(), 1);
}

#[test]
fn without_a_refresh_token_an_expiring_token_is_sent_as_it_is_and_a_401_is_final() {
    let home = home_with(1_000_000, None, "https://auth.example/token");
    let clock = Arc::new(FakeClock::default());
    let (send, seen) = fake_send(vec![]);
    let mut a = OAuthAuthorize::new(home.path(), "docs", URL, clock, 2_000_000, send).unwrap();
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer at-0"));
    assert_eq!(a.refresh_after_401(), Ok(false));
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn a_401_refreshes_once_and_a_refused_refresh_changes_nothing() {
    let home = home_with(9_000_000, Some("rt-0"), "https://auth.example/token");
    let clock = Arc::new(FakeClock::default());
    let (send, seen) = fake_send(vec![
        (200, r#"{"access_token":"at-1","token_type":"bearer"}"#),
        (400, r#"{"error":"invalid_grant"}"#),
        (503, ""),
    ]);
    let mut a = OAuthAuthorize::new(home.path(), "docs", URL, clock, 1_000_000, send).unwrap();
    assert_eq!(a.refresh_after_401(), Ok(true));
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer at-1"));
    let t = saved(&home);
    assert_eq!(
        t.refresh_token.as_deref(),
        Some("rt-0"),
        "absent keeps the old one"
    );
    assert_eq!(t.expires_at_ms, None);
    assert_eq!(a.refresh_after_401(), Err(AuthError::Refused));
    assert_eq!(a.refresh_after_401(), Err(AuthError::RefreshFailed));
    assert_eq!(
        saved(&home).access_token,
        "at-1",
        "a failed refresh saves nothing"
    );
    let bodies = seen.lock().unwrap();
    assert!(bodies[0].contains("grant_type=refresh_token&refresh_token=rt-0&client_id=cid"));
    assert!(bodies[0].contains("&resource=https%3A%2F%2Fmcp.example%2Fmcp"));
}

#[test]
fn a_token_another_process_refreshed_is_taken_without_a_request() {
    let home = home_with(9_000_000, Some("rt-0"), "https://auth.example/token");
    let (send, seen) = fake_send(vec![]);
    let clock = Arc::new(FakeClock::default());
    let mut a = OAuthAuthorize::new(home.path(), "docs", URL, clock, 1_000_000, send).unwrap();
    let mut t = saved(&home);
    t.access_token = "at-other".into();
    Tokens::lock(home.path()).unwrap().put("docs", t).unwrap();
    assert_eq!(a.refresh_after_401(), Ok(true));
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer at-other"));
    assert!(seen.lock().unwrap().is_empty());
}

#[test]
fn no_saved_token_or_another_url_is_missing_and_a_corrupt_file_is_store() {
    let home = home_with(9_000_000, Some("rt-0"), "https://auth.example/token");
    for (name, url) in [
        ("other", URL),
        ("docs", "https://mcp.example/other"),
        ("docs", "nope"),
    ] {
        assert_eq!(
            oauth_authorize(home.path(), name, url).err(),
            Some(AuthError::Missing)
        );
    }
    assert!(oauth_authorize(home.path(), "docs", "HTTPS://MCP.example:443/mcp").is_ok());
    std::fs::write(home.path().join("mcp-tokens.json"), "{").unwrap();
    assert_eq!(
        oauth_authorize(home.path(), "docs", URL).err(),
        Some(AuthError::Store)
    );
}

/// A loopback token endpoint answering `answers` in turn; the request bodies come out of the
/// receiver.
fn token_endpoint(answers: Vec<(u16, &'static str)>) -> (String, mpsc::Receiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/token", listener.local_addr().unwrap());
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for (status, body) in answers {
            let (mut conn, _) = listener.accept().unwrap();
            let mut r = BufReader::new(conn.try_clone().unwrap());
            let mut len = 0;
            loop {
                let mut line = String::new();
                r.read_line(&mut line).unwrap();
                if let Some(v) = line.to_ascii_lowercase().strip_prefix("content-length:") {
                    len = v.trim().parse().unwrap();
                }
                if line == "\r\n" {
                    break;
                }
            }
            let mut req = vec![0; len];
            r.read_exact(&mut req).unwrap();
            tx.send(String::from_utf8(req).unwrap()).unwrap();
            write!(
                conn,
                "HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            )
            .unwrap();
        }
    });
    (url, rx)
}

#[test]
fn over_the_network_a_rotating_endpoint_is_saved_and_a_refusing_one_is_refused() {
    let (url, bodies) = token_endpoint(vec![
        (
            200,
            r#"{"access_token":"net-1","token_type":"Bearer","expires_in":60,"refresh_token":"net-rt-1"}"#,
        ),
        (
            200,
            r#"{"access_token":"net-2","token_type":"Bearer","expires_in":3600}"#,
        ),
        (400, r#"{"error":"invalid_grant"}"#),
    ]);
    // Already expired: the first header refreshes.
    let home = home_with(1, Some("rt-0"), &url);
    let mut a = oauth_authorize(home.path(), "docs", URL).unwrap();
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer net-1"));
    assert!(bodies.recv().unwrap().contains("refresh_token=rt-0"));
    assert_eq!(saved(&home).refresh_token.as_deref(), Some("net-rt-1"));
    // It expires in 60 s, but this process just got it: it is used as it is.
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer net-1"));
    // A 401 refreshes, with the rotated refresh token.
    assert_eq!(a.refresh_after_401(), Ok(true));
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer net-2"));
    let body = bodies.recv().unwrap();
    assert!(body.contains("refresh_token=net-rt-1"), "{body}");
    assert!(
        body.contains("resource=https%3A%2F%2Fmcp.example%2Fmcp"),
        "{body}"
    );
    assert_eq!(
        saved(&home).refresh_token.as_deref(),
        Some("net-rt-1"),
        "kept"
    );
    assert_eq!(a.refresh_after_401(), Err(AuthError::Refused));
    assert_eq!(saved(&home).access_token, "net-2");
}

#[test]
fn loaded_and_refreshed_tokens_are_registered_with_redaction() {
    let home = home_with(1, Some("rt-0"), "https://auth.example/token");
    let (send, _) = fake_send(vec![(
        200,
        r#"{"access_token":"fresh-opaque-value-9317","refresh_token":"rotated-opaque-value-5521"}"#,
    )]);
    let clock = Arc::new(FakeClock::default());
    let mut a = OAuthAuthorize::new(home.path(), "docs", URL, clock, 1_000_000, send).unwrap();
    a.header().unwrap();
    let shown = crate::util::redact::sanitize_text(
        "got fresh-opaque-value-9317 and rotated-opaque-value-5521",
    );
    assert_eq!(shown, "got [redacted] and [redacted]");
}

#[test]
fn a_short_lived_token_this_process_got_is_used_until_it_expires_not_refreshed_per_request() {
    // The saved token expires within 60 s: the first request refreshes. The answer lives only
    // 30 s: it is used for every request until it has expired, then refreshed once more.
    let home = home_with(1_030_000, Some("rt-0"), "https://auth.example/token");
    let clock = Arc::new(FakeClock::default());
    let (send, seen) = fake_send(vec![
        (
            200,
            r#"{"access_token":"at-1","token_type":"Bearer","expires_in":30,"refresh_token":"rt-1"}"#,
        ),
        (
            200,
            r#"{"access_token":"at-2","token_type":"Bearer","expires_in":30,"refresh_token":"rt-2"}"#,
        ),
    ]);
    let mut a =
        OAuthAuthorize::new(home.path(), "docs", URL, clock.clone(), 1_000_000, send).unwrap();
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer at-1"));
    for _ in 0..5 {
        clock.advance(5_000);
        assert_eq!(a.header().unwrap().as_deref(), Some("Bearer at-1"));
    }
    assert_eq!(
        seen.lock().unwrap().len(),
        1,
        "one rotation for six requests"
    );
    clock.advance(4_999); // 1 ms left
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer at-1"));
    clock.advance(1); // expired
    assert_eq!(a.header().unwrap().as_deref(), Some("Bearer at-2"));
    assert_eq!(seen.lock().unwrap().len(), 2);
    assert_eq!(saved(&home).refresh_token.as_deref(), Some("rt-2"));
}
