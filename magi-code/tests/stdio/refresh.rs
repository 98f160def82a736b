//! `model.refresh` over real pipes against a local HTTP server on 127.0.0.1.

use crate::common::{result, start, Client, Env, STEP};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

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

/// A server whose first `hangs` connections read the request head, report it, and never
/// answer (each reports again when the client closes it); later ones answer `body`.
fn hang_then_answer(hangs: usize, body: String) -> (String, Receiver<()>, Receiver<()>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (accepted_tx, accepted) = mpsc::channel();
    let (closed_tx, closed) = mpsc::channel();
    std::thread::spawn(move || {
        for (n, stream) in listener.incoming().enumerate() {
            let Ok(stream) = stream else { return };
            let mut r = BufReader::new(stream.try_clone().unwrap());
            loop {
                let mut h = String::new();
                if r.read_line(&mut h).unwrap_or(0) == 0 || h.trim().is_empty() {
                    break;
                }
            }
            if n < hangs {
                let (a, c) = (accepted_tx.clone(), closed_tx.clone());
                std::thread::spawn(move || {
                    let _ = a.send(());
                    let mut buf = [0u8; 64];
                    while matches!(r.read(&mut buf), Ok(n) if n > 0) {}
                    let _ = c.send(());
                });
                continue;
            }
            let mut w = stream;
            let _ = write!(w, "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}", body.len());
            let _ = w.flush();
        }
    });
    (format!("http://{addr}/v1"), accepted, closed)
}

#[test]
fn a_cancelled_refresh_closes_its_connection_and_frees_the_slot() {
    let models = json!({"object": "list", "data": [{"id": "m1"}, {"id": "m2"}]}).to_string();
    let (base, accepted, closed) = hang_then_answer(1, models);
    let env = env_with(&base);
    let mut c = Client::start(&env, &["model.refresh", "operation.cancel"]);
    let r1 = c.send("model.refresh", &json!({"provider": "local"}));
    accepted
        .recv_timeout(STEP)
        .expect("the refresh reached the server");
    let x = c.send("operation.cancel", &json!({"request_id": r1}));
    let got = c.s.responses(&[&r1, &x]);
    assert_eq!(result(&got[&x]), &json!({"cancellation_requested": true}));
    assert_eq!(got[&r1]["error"], json!({"code": "operation_cancelled"}));
    // The connection closes at once, not when the refresh's 30 s bound expires.
    closed
        .recv_timeout(STEP)
        .expect("cancel closed the refresh's connection");
    let r2 = c.call_when_free("model.refresh", &json!({"provider": "local"}));
    assert_eq!(result(&r2)["models"], 2, "{r2}");
    c.s.shutdown_ok("bye");
}

#[test]
fn shutdown_during_a_hung_refresh_ends_within_the_cleanup_wait() {
    let (base, accepted, closed) = hang_then_answer(usize::MAX, String::new());
    let env = env_with(&base);
    let mut s = start(&env, &["model.refresh"]);
    s.request("r", "model.refresh", &json!({"provider": "local"}));
    accepted
        .recv_timeout(STEP)
        .expect("the refresh reached the server");
    let t0 = Instant::now();
    let frames = {
        s.request("bye", "shutdown", &json!({}));
        s.frames_until_eof()
    };
    let took = t0.elapsed();
    // The in-flight refresh is cancelled by cleanup: its connection closes and its worker
    // stops, so the child exits as soon as cleanup is done, before the cleanup wait expires.
    assert!(
        took < Duration::from_millis(protocol_core::limits::CLEANUP_WAIT_MS),
        "{took:?}"
    );
    closed
        .recv_timeout(STEP)
        .expect("the connection was closed");
    let bye = frames
        .iter()
        .find(|f| f["id"] == "bye")
        .expect("shutdown answered");
    assert_eq!(result(bye), &json!({"state": "stopping"}));
    assert_eq!(s.exit_code(), 0);
}
