//! `magi-code mcp login` through the binary against a loopback fake authorization server
//! (`backend.md` "MCP servers over HTTP", `decisions.md` 41): protected resource metadata
//! (the root form after the path-suffixed one, or a `401`'s `WWW-Authenticate`), RFC 8414
//! metadata, dynamic registration, the authorize redirect followed by the test to the loopback
//! callback or pasted on stdin, the PKCE-checked token exchange with `resource`, saved 0600.
//! No token on stdout or stderr.

use super::mcp_cli::{mcp_cmd, run};
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex};

const ACCESS: &str = "AT-LOGIN-SECRET-1";
const REFRESH: &str = "RT-LOGIN-SECRET-1";

/// How the fake leads to its metadata.
#[derive(Clone, Copy, PartialEq)]
enum Lead {
    /// Only the root `/.well-known/oauth-protected-resource` answers.
    WellKnownRoot,
    /// No well-known document; a `POST /mcp` answers `401` naming `/meta/prm`.
    Header,
}

#[derive(Default)]
struct Seen {
    /// `METHOD path` of every request, in order.
    requests: Vec<String>,
    /// Query or body of the interesting ones, by path.
    params: HashMap<String, HashMap<String, String>>,
    registration: Option<serde_json::Value>,
}

fn pairs(s: &str) -> HashMap<String, String> {
    s.split('&')
        .filter_map(|p| p.split_once('='))
        .map(|(k, v)| (decode(k), decode(v)))
        .collect()
}

fn decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'+' => out.push(b' '),
            b'%' => {
                out.push(u8::from_str_radix(&s[i + 1..i + 3], 16).unwrap());
                i += 2;
            }
            c => out.push(c),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

fn b64url(d: &[u8]) -> String {
    const ABC: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bits = String::new();
    for byte in d {
        bits.push_str(&format!("{byte:08b}"));
    }
    bits.as_bytes()
        .chunks(6)
        .map(|c| {
            let s = std::str::from_utf8(c).unwrap();
            let v = u8::from_str_radix(&format!("{s:0<6}"), 2).unwrap();
            char::from(ABC[usize::from(v)])
        })
        .collect()
}

struct Fake {
    base: String,
    seen: Arc<Mutex<Seen>>,
}

fn start(lead: Lead) -> Fake {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (b, s) = (base.clone(), Arc::clone(&seen));
    std::thread::spawn(move || {
        for conn in listener.incoming() {
            let Ok(conn) = conn else { continue };
            let (b, s) = (b.clone(), Arc::clone(&s));
            std::thread::spawn(move || serve(conn, &b, &s, lead));
        }
    });
    Fake { base, seen }
}

fn serve(mut conn: TcpStream, base: &str, seen: &Mutex<Seen>, lead: Lead) {
    let mut r = BufReader::new(conn.try_clone().unwrap());
    let mut line = String::new();
    r.read_line(&mut line).unwrap();
    let mut len = 0;
    loop {
        let mut h = String::new();
        r.read_line(&mut h).unwrap();
        if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
            len = v.trim().parse().unwrap();
        }
        if h == "\r\n" || h.is_empty() {
            break;
        }
    }
    let mut body = vec![0; len];
    r.read_exact(&mut body).unwrap();
    let body = String::from_utf8(body).unwrap();
    let mut parts = line.split(' ');
    let (method, target) = (parts.next().unwrap(), parts.next().unwrap());
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    let mut s = seen.lock().unwrap();
    s.requests.push(format!("{method} {path}"));
    let json = |v: serde_json::Value| (200, vec![], v.to_string());
    let prm = serde_json::json!({"resource": format!("{base}/mcp"),
        "authorization_servers": [base], "scopes_supported": ["mcp:read"]});
    let (status, headers, text): (u16, Vec<String>, String) = match (method, path) {
        ("GET", "/.well-known/oauth-protected-resource") if lead == Lead::WellKnownRoot => {
            json(prm)
        }
        ("GET", "/meta/prm") if lead == Lead::Header => json(prm),
        ("POST", "/mcp") => (
            401,
            vec![format!(
                "WWW-Authenticate: Bearer resource_metadata=\"{base}/meta/prm\""
            )],
            String::new(),
        ),
        ("GET", "/.well-known/oauth-authorization-server") => json(serde_json::json!({
            "issuer": base, "authorization_endpoint": format!("{base}/authorize"),
            "token_endpoint": format!("{base}/token"), "registration_endpoint": format!("{base}/register"),
            "code_challenge_methods_supported": ["S256"]})),
        ("POST", "/register") => {
            s.registration = serde_json::from_str(&body).ok();
            (201, vec![], r#"{"client_id":"dyn-client"}"#.into())
        }
        ("GET", "/authorize") => {
            let q = pairs(query);
            let to = format!("{}?code=CODE-1&state={}", q["redirect_uri"], q["state"]);
            s.params.insert("/authorize".into(), q);
            (302, vec![format!("Location: {to}")], String::new())
        }
        ("POST", "/token") => token(&mut s, &body),
        _ => (404, vec![], String::new()),
    };
    drop(s);
    let mut head = format!(
        "HTTP/1.1 {status} X\r\nContent-Length: {}\r\nConnection: close\r\n",
        text.len()
    );
    for h in headers {
        head.push_str(&h);
        head.push_str("\r\n");
    }
    let _ = write!(conn, "{head}Content-Type: application/json\r\n\r\n{text}");
}

/// The code exchange: the verifier must match the challenge the browser carried.
fn token(s: &mut Seen, body: &str) -> (u16, Vec<String>, String) {
    let p = pairs(body);
    let challenge = s
        .params
        .get("/authorize")
        .map(|q| q["code_challenge"].clone());
    let ok = p.get("code").map(String::as_str) == Some("CODE-1")
        && challenge
            == p.get("code_verifier")
                .map(|v| b64url(&Sha256::digest(v.as_bytes())));
    s.params.insert("/token".into(), p);
    if !ok {
        return (400, vec![], r#"{"error":"invalid_grant"}"#.into());
    }
    let answer = serde_json::json!({"access_token": ACCESS, "token_type": "Bearer",
        "expires_in": 3600, "refresh_token": REFRESH, "scope": "mcp:read"});
    (200, vec![], answer.to_string())
}

fn settings(home: &Path, url: &str) {
    let s = serde_json::json!({"mcp": {"servers": {
        "web": {"url": url, "oauth": {}, "enabled": true}}}});
    std::fs::write(home.join("settings.json"), s.to_string()).unwrap();
}

pub(super) fn agent() -> ureq::Agent {
    ureq::Agent::config_builder()
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .into()
}

/// Spawns the login and reads the authorization URL from its first stdout line.
pub(super) fn begin(home: &Path, cwd: &Path, name: &str) -> (Login, String) {
    let mut child = mcp_cmd(home, cwd, &["login", name])
        .stdin(Stdio::piped())
        .spawn()
        .unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut url = String::new();
    out.read_line(&mut url).unwrap();
    // Keep the rest of stdout for the end.
    let rest = std::thread::spawn(move || {
        let mut s = String::new();
        out.read_to_string(&mut s).unwrap();
        s
    });
    (Login { child, rest }, url.trim_end().to_owned())
}

/// A running login and the reader of the rest of its stdout.
pub(super) struct Login {
    child: Child,
    rest: std::thread::JoinHandle<String>,
}

/// What the browser does: opens the URL and reads where the redirect goes.
pub(super) fn authorize(url: &str) -> String {
    let resp = agent().get(url).call().unwrap();
    assert_eq!(resp.status(), 302);
    resp.headers()["location"].to_str().unwrap().to_owned()
}

/// Its exit code, the rest of its stdout and its stderr.
pub(super) fn finish(mut l: Login) -> (i32, String, String) {
    let mut err = String::new();
    l.child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    let code = l.child.wait().unwrap().code().unwrap_or(-1);
    (code, l.rest.join().unwrap(), err)
}

fn check_saved(home: &Path, fake: &Fake, url: &str) {
    let path = home.join("mcp-tokens.json");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let key: String = Sha256::digest(url.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let t = &v["servers"]["web"][&key];
    assert_eq!(t["access_token"], ACCESS, "{v}");
    assert_eq!(t["refresh_token"], REFRESH);
    assert_eq!(t["token_endpoint"], format!("{}/token", fake.base));
    assert_eq!(t["client_id"], "dyn-client");
    assert_eq!(t["resource"], url);
    let s = fake.seen.lock().unwrap();
    let tok = &s.params["/token"];
    assert_eq!(tok["grant_type"], "authorization_code");
    assert_eq!(tok["resource"], url, "RFC 8707");
    assert_eq!(tok["client_id"], "dyn-client");
    let auth = &s.params["/authorize"];
    assert_eq!(auth["code_challenge_method"], "S256");
    assert_eq!(auth["resource"], url);
    assert_eq!(auth["scope"], "mcp:read");
    assert_eq!(tok["redirect_uri"], auth["redirect_uri"]);
    let reg = s.registration.as_ref().unwrap();
    assert_eq!(
        reg["redirect_uris"],
        serde_json::json!([auth["redirect_uri"]])
    );
    assert!(auth["redirect_uri"].starts_with("http://127.0.0.1:"));
}

pub(super) fn no_secret(text: &str) {
    assert!(!text.contains(ACCESS) && !text.contains(REFRESH), "{text}");
    assert!(!text.contains("CODE-1"), "{text}");
}

#[test]
fn login_follows_the_loopback_redirect_and_saves_the_token() {
    let fake = start(Lead::WellKnownRoot);
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = format!("{}/mcp", fake.base);
    settings(home.path(), &url);
    let (child, open) = begin(home.path(), cwd.path(), "web");
    assert!(
        open.starts_with(&format!("{}/authorize?", fake.base)),
        "{open}"
    );
    let callback = authorize(&open);
    let page = agent().get(&callback).call().unwrap();
    assert_eq!(page.status(), 200);
    let (code, out, err) = finish(child);
    assert_eq!(code, 0, "{out}{err}");
    no_secret(&format!("{open}{out}{err}"));
    check_saved(home.path(), &fake, &url);
    let requests = fake.seen.lock().unwrap().requests.clone();
    assert_eq!(
        requests[..2],
        [
            "GET /.well-known/oauth-protected-resource/mcp",
            "GET /.well-known/oauth-protected-resource"
        ],
        "the path-suffixed form first"
    );
    let (code, listed, err) = run(home.path(), cwd.path(), &["list"]);
    assert_eq!(code, 0, "{err}");
    assert!(
        listed.contains("http   saved, expires in 59 min")
            || listed.contains("http   saved, expires in 60 min"),
        "{listed}"
    );
    no_secret(&format!("{listed}{err}"));
}

#[test]
fn login_takes_a_pasted_redirect_when_the_loopback_is_out_of_reach() {
    let fake = start(Lead::Header);
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let url = format!("{}/mcp", fake.base);
    settings(home.path(), &url);
    let (mut child, open) = begin(home.path(), cwd.path(), "web");
    let callback = authorize(&open);
    let mut stdin = child.child.stdin.take().unwrap();
    // A redirect of another login is ignored; the right one, pasted, completes this one.
    let stale = callback.replace("state=", "state=stale");
    writeln!(stdin, "{stale}\n{callback}").unwrap();
    drop(stdin);
    let (code, out, err) = finish(child);
    assert_eq!(code, 0, "{out}{err}");
    assert!(err.contains("not the redirect of this login"), "{err}");
    no_secret(&format!("{out}{err}"));
    check_saved(home.path(), &fake, &url);
    let requests = fake.seen.lock().unwrap().requests.clone();
    assert!(
        requests.contains(&"GET /meta/prm".to_owned()),
        "{requests:?}"
    );
    let (code, out, _) = run(home.path(), cwd.path(), &["logout", "web"]);
    assert_eq!(code, 0);
    no_secret(&out);
    let (_, listed, _) = run(home.path(), cwd.path(), &["list"]);
    assert!(listed.contains("http   none"), "{listed}");
}

#[test]
fn login_needs_an_oauth_url_server_and_a_refused_exchange_saves_nothing() {
    let fake = start(Lead::WellKnownRoot);
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = serde_json::json!({"mcp": {"servers": {
        "local": {"command": "true"},
        "plain": {"url": format!("{}/mcp", fake.base)}}}});
    std::fs::write(home.path().join("settings.json"), s.to_string()).unwrap();
    for (name, want) in [
        ("local", "mcp_not_http"),
        ("plain", "mcp_oauth_not_configured"),
        ("x", "mcp_server_unknown"),
    ] {
        let (code, _, err) = run(home.path(), cwd.path(), &["login", name]);
        assert_eq!(code, 1);
        assert!(err.contains(want), "{name}: {err}");
    }
    settings(home.path(), &format!("{}/mcp", fake.base));
    let (mut child, open) = begin(home.path(), cwd.path(), "web");
    let callback = authorize(&open).replace("code=CODE-1", "code=WRONG");
    writeln!(child.child.stdin.take().unwrap(), "{callback}").unwrap();
    let (code, _, err) = finish(child);
    assert_eq!(code, 1);
    assert!(err.contains("oauth_exchange_failed"), "{err}");
    assert!(!home.path().join("mcp-tokens.json").exists());
}
