//! Saved OAuth tokens at the backend's initialization (`backend.md` "MCP servers over HTTP"):
//! a token that expires within 60 s is refreshed first (`grant_type=refresh_token` with the
//! RFC 8707 `resource`), the answer saved before use and sent to the server; a refused
//! refresh makes the server `mcp_unavailable`, never a prompt. No token reaches a frame or
//! stderr.

use crate::common::fake_mcp::{read_request, FakeMcp, Faults};
use crate::common::rotating::{Rotating, Writes};
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

/// The token file of `saved` with `access` and `refresh` expiring in `in_ms`.
fn token_file(mcp_url: &str, token_url: &str, access: &str, refresh: &str, in_ms: u64) -> Value {
    let key: String = Sha256::digest(mcp_url.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    json!({"version": 1, "servers": {"tok": {key: {
        "url": mcp_url, "access_token": access, "refresh_token": refresh,
        "expires_at_ms": now + in_ms, "token_endpoint": token_url,
        "client_id": "client-1", "resource": mcp_url}}}})
}

#[test]
fn a_refresh_killed_before_its_rename_is_recovered_at_the_next_start() {
    // What a kill -9 between the answer's temp file and its rename leaves: the file with the
    // spent refresh token and, beside it, a complete newer one of ours with the answer.
    let mcp = FakeMcp::start(Faults::default());
    let (token_url, forms) = token_endpoint(400, json!({"error": "invalid_grant"}));
    let env = saved(&mcp.url, &token_url);
    let path = env.home().join("mcp-tokens.json");
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(60);
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(old)
        .unwrap();
    let leftover = env
        .home()
        .join(format!(".mcp-tokens.json.magi-{}.tmp", "5".repeat(32)));
    let answer = token_file(&mcp.url, &token_url, NEW, ROTATED, 3_600_000);
    std::fs::write(&leftover, answer.to_string()).unwrap();
    let (f, _) = initialize(&env);
    assert!(f.get("result").is_some(), "{f}");
    assert!(
        forms.lock().unwrap().is_empty(),
        "the spent refresh token is never sent"
    );
    for s in mcp.seen().iter().filter(|s| s.method == "POST") {
        assert_eq!(s.headers["authorization"], format!("Bearer {NEW}"), "{s:?}");
    }
    let file = std::fs::read_to_string(&path).unwrap();
    assert!(file.contains(ROTATED) && !file.contains(REFRESH), "{file}");
    assert!(!leftover.exists());
}

#[test]
fn a_kill_at_any_moment_of_a_rotation_never_loses_the_token() {
    let mcp = FakeMcp::start(Faults::default());
    let endpoint = Rotating::start(REFRESH, |n, refresh| {
        json!({"access_token": format!("at-{n}-Zm4Rv"), "token_type": "Bearer",
            "expires_in": 30, "refresh_token": refresh})
    });
    let env = saved(&mcp.url, &endpoint.url);
    let (mut leftovers, trials) = (0, 24u64);
    for trial in 0..trials {
        let writes = Writes::watch(&env.home());
        let s = env.spawn();
        s.request("init", "initialize", &init_params(&["status"]));
        // The answer's temp file is written: the kill lands from there to past the rename,
        // spread by a few yields, where a crash used to leave the spent token in the file.
        assert!(
            writes.until(".mcp-tokens.json.magi-"),
            "trial {trial}: no refresh written ({} refused)",
            endpoint.refused.lock().unwrap()
        );
        for _ in 0..(trial % 4) * 50 {
            std::thread::yield_now();
        }
        s.crash();
        let left = std::fs::read_dir(env.home()).unwrap().flatten().any(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(".mcp-tokens.json.magi-")
        });
        leftovers += u64::from(left);
        assert_eq!(
            *endpoint.refused.lock().unwrap(),
            0,
            "trial {trial}: a rotation was lost"
        );
    }
    // Every refresh named the token last answered, and the last start still starts (each
    // answer expires within 60 s, so a start refreshes before each request).
    let (f, _) = initialize(&env);
    assert!(f.get("result").is_some(), "{f}");
    assert_eq!(*endpoint.refused.lock().unwrap(), 0);
    assert!(endpoint.issued.lock().unwrap().0 > trials);
    eprintln!("{leftovers} of {trials} kills left the answer in a temp file");
}
