//! Saved OAuth tokens at the backend's initialization (`backend.md` "MCP servers over HTTP"):
//! a token that expires within 60 s is refreshed first (`grant_type=refresh_token` with the
//! RFC 8707 `resource`), the answer saved before use and sent to the server; a refused
//! refresh makes the server `mcp_unavailable`, never a prompt. No token reaches a frame or
//! stderr.

use crate::common::fake_mcp::{read_request, FakeMcp, Faults};
use crate::common::{init_params, Env};
use crate::mcp::mcp_settings;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

const OLD: &str = "old-access-Vq3Lm8Tz";
const NEW: &str = "new-access-Hp5Kw2Rx";
const REFRESH: &str = "refresh-one-Bn7Cd4Fs";
const ROTATED: &str = "refresh-two-Jt9Gy6Wq";

/// A token endpoint answering `status` with `body`; the form bodies it got.
fn token_endpoint(status: u16, body: Value) -> (String, Arc<Mutex<Vec<String>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://127.0.0.1:{}/token", l.local_addr().unwrap().port());
    let got = Arc::new(Mutex::new(Vec::new()));
    let g = got.clone();
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let mut w = conn.try_clone().unwrap();
            let Some((_, _, form)) = read_request(&mut BufReader::new(conn)) else {
                continue;
            };
            g.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&form).into_owned());
            let text = body.to_string();
            let head = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                text.len()
            );
            drop(
                w.write_all(head.as_bytes())
                    .and_then(|()| w.write_all(text.as_bytes())),
            );
        }
    });
    (url, got)
}

/// An env whose approved `oauth` server `tok` at `mcp_url` has a saved token expiring in 30 s.
fn saved(mcp_url: &str, token_url: &str) -> Env {
    let env = Env::new();
    let def = json!({"url": mcp_url, "oauth": {}});
    env.write_global_settings(&json!({"mcp": mcp_settings(&[("tok", &def)], true)}));
    let key: String = Sha256::digest(mcp_url.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let file = json!({"version": 1, "servers": {"tok": {key: {
        "url": mcp_url, "access_token": OLD, "refresh_token": REFRESH,
        "expires_at_ms": now + 30_000, "token_endpoint": token_url,
        "client_id": "client-1", "resource": mcp_url}}}});
    let path = env.home().join("mcp-tokens.json");
    std::fs::write(&path, file.to_string()).unwrap();
    std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o600)).unwrap();
    env
}

/// Initializes a child: the answer and its stderr.
fn initialize(env: &Env) -> (Value, String) {
    let mut s = env.spawn();
    let f = s.call("init", "initialize", &init_params(&["status"]));
    s.shutdown_ok("bye");
    (f, String::from_utf8_lossy(&s.stderr()).into_owned())
}

#[test]
fn a_token_expiring_within_60_s_is_refreshed_saved_and_then_sent() {
    let mcp = FakeMcp::start(Faults::default());
    let (token_url, forms) = token_endpoint(
        200,
        json!({"access_token": NEW, "token_type": "Bearer", "expires_in": 3600, "refresh_token": ROTATED}),
    );
    let env = saved(&mcp.url, &token_url);
    let (f, stderr) = initialize(&env);
    assert!(f.get("result").is_some(), "{f}");
    let forms = forms.lock().unwrap().clone();
    assert_eq!(forms.len(), 1, "one refresh: {forms:?}");
    let form = &forms[0];
    assert!(form.contains("grant_type=refresh_token"), "{form}");
    assert!(form.contains(&format!("refresh_token={REFRESH}")), "{form}");
    assert!(form.contains("resource=http%3A%2F%2F127.0.0.1"), "{form}");
    let seen = mcp.seen();
    assert!(!seen.is_empty());
    for s in &seen {
        if s.method == "POST" {
            assert_eq!(s.headers["authorization"], format!("Bearer {NEW}"), "{s:?}");
        }
    }
    let file = std::fs::read_to_string(env.home().join("mcp-tokens.json")).unwrap();
    assert!(
        file.contains(NEW) && file.contains(ROTATED) && !file.contains(OLD),
        "{file}"
    );
    for t in [OLD, NEW, REFRESH, ROTATED] {
        assert!(
            !f.to_string().contains(t) && !stderr.contains(t),
            "{t} leaked"
        );
    }
}

#[test]
fn a_refused_refresh_is_mcp_unavailable_and_leaves_the_file() {
    let mcp = FakeMcp::start(Faults::default());
    let (token_url, forms) = token_endpoint(400, json!({"error": "invalid_grant"}));
    let env = saved(&mcp.url, &token_url);
    let before = std::fs::read_to_string(env.home().join("mcp-tokens.json")).unwrap();
    let (f, stderr) = initialize(&env);
    assert_eq!(f["error"], json!({"code": "mcp_unavailable"}), "{f}");
    assert_eq!(forms.lock().unwrap().len(), 1);
    let after = std::fs::read_to_string(env.home().join("mcp-tokens.json")).unwrap();
    assert_eq!(before, after);
    assert!(!stderr.contains(OLD) && !stderr.contains(REFRESH));
}
