//! `model.refresh` over real pipes against a local HTTP server on 127.0.0.1.

use crate::common::{result, start, Env};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

/// Answers one request with `status` and `body`; returns the base URL.
fn serve_once(status: u16, body: String) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut r = BufReader::new(stream.try_clone().unwrap());
        loop {
            let mut h = String::new();
            if r.read_line(&mut h).unwrap() == 0 || h.trim().is_empty() {
                break;
            }
        }
        let mut w = stream;
        write!(w, "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len()).unwrap();
        w.flush().unwrap();
    });
    format!("http://{addr}/v1")
}

fn env_with(base: &str) -> Env {
    let env = Env::new();
    env.write_global_settings(&json!({"providers": {
        "catalog": {"enabled": ["local/m1"]},
        "local": {"kind": "openai-compatible", "base_url": base},
    }}));
    env
}

#[test]
fn a_refresh_writes_the_cache_and_stales_the_snapshot() {
    let base = serve_once(
        200,
        json!({"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]}).to_string(),
    );
    let env = env_with(&base);
    let mut s = start(&env, &["model.refresh"]);
    let before = s.call("c1", "model.catalog", &json!({"limit": 1}));
    assert_eq!(
        result(&before)["notices"],
        json!(["provider_catalog_unavailable"])
    );
    let rev = result(&before)["revision"].as_str().unwrap().to_owned();
    let r = s.call("r", "model.refresh", &json!({"provider": "local"}));
    let res = result(&r);
    assert_eq!(
        (res["provider"].as_str(), res["models"].as_u64()),
        (Some("local"), Some(2))
    );
    assert!(res["fetched_at"].as_str().unwrap().ends_with('Z'));
    let mut keys: Vec<&str> = res
        .as_object()
        .unwrap()
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["fetched_at", "models", "provider"]);
    let cache: Value =
        serde_json::from_slice(&std::fs::read(env.home().join("cache/models/local.json")).unwrap())
            .unwrap();
    assert_eq!(cache["models"].as_array().unwrap().len(), 2);
    let stale = s.call(
        "c2",
        "model.catalog",
        &json!({"revision": rev, "cursor": format!("1.{rev}")}),
    );
    assert_eq!(stale["error"]["code"], "stale_catalog");
    let after = s.call("c3", "model.catalog", &json!({}));
    let choices = result(&after)["choices"].as_array().unwrap();
    assert_eq!(choices.len(), 1);
    assert_eq!(choices[0]["model"], "m1");
    assert_eq!(result(&after)["notices"], json!([]));
}

#[test]
fn a_failed_refresh_leaves_the_old_cache_intact() {
    let base = serve_once(500, "{\"error\":\"internal secret\"}".into());
    let env = env_with(&base);
    let dir = env.home().join("cache").join("models");
    std::fs::create_dir_all(&dir).unwrap();
    let old = br#"{"provider":"local","fetched_at":"2026-11-30T12:00:00Z","models":[{"id":"m1"}]}"#;
    std::fs::write(dir.join("local.json"), old).unwrap();
    let mut s = start(&env, &["model.refresh"]);
    let r = s.call("r", "model.refresh", &json!({"provider": "local"}));
    assert_eq!(r["error"], json!({"code": "refresh_failed"}));
    assert_eq!(std::fs::read(dir.join("local.json")).unwrap(), old);
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "no temp file left"
    );
    let scripted = s.call("r2", "model.refresh", &json!({"provider": "scripted"}));
    assert_eq!(scripted["error"]["code"], "provider_unavailable");
}

#[test]
fn refresh_needs_negotiation() {
    let env = env_with("http://127.0.0.1:9/v1");
    let mut s = start(&env, &[]);
    let r = s.call("r", "model.refresh", &json!({"provider": "local"}));
    assert_eq!(r["error"]["code"], "unsupported_capability");
}
