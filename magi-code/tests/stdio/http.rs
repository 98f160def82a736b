//! HTTP providers over real pipes against local SSE servers on 127.0.0.1: an OpenAI-compatible
//! configured provider and the Anthropic Messages API (base URL overridden), plus a failing
//! server.

use crate::common::fake_llm::{FakeLlm, Reply};
use crate::common::{diagnostic_codes, reconciled, run_turn, start_session, Env};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::mpsc;
use std::thread;

/// What the fake server saw.
struct Seen {
    path: String,
    headers: Vec<(String, String)>,
    body: Value,
}

/// Serves one request: records it, answers `status` with `events` as SSE, chunked, each event
/// split in two chunks (the first split inside a UTF-8 sequence when possible).
fn serve_once(status: u16, events: Vec<String>) -> (String, mpsc::Receiver<Seen>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::channel();
    thread::spawn(move || {
        let (stream, _) = listener.accept().unwrap();
        let mut r = BufReader::new(stream.try_clone().unwrap());
        let mut request_line = String::new();
        r.read_line(&mut request_line).unwrap();
        let path = request_line
            .split_whitespace()
            .nth(1)
            .unwrap_or_default()
            .to_owned();
        let mut headers = Vec::new();
        let mut len = 0usize;
        loop {
            let mut h = String::new();
            r.read_line(&mut h).unwrap();
            let h = h.trim_end().to_owned();
            if h.is_empty() {
                break;
            }
            let (k, v) = h.split_once(':').unwrap();
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_owned());
            if k == "content-length" {
                len = v.parse().unwrap();
            }
            headers.push((k, v));
        }
        let mut body = vec![0u8; len];
        r.read_exact(&mut body).unwrap();
        tx.send(Seen {
            path,
            headers,
            body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        })
        .unwrap();
        let mut w = stream;
        let reason = if status == 200 { "OK" } else { "Error" };
        write!(w, "HTTP/1.1 {status} {reason}\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\nconnection: close\r\n\r\n").unwrap();
        for e in events {
            let b = e.as_bytes();
            let mut cut = b.len() / 2;
            while cut > 0 && (b[cut] & 0xC0) != 0x80 && b.len() > 4 {
                // Prefer a cut inside a multi-byte character when there is one.
                if b[..cut].iter().any(|x| *x >= 0x80) {
                    cut -= 1;
                } else {
                    break;
                }
            }
            for part in [&b[..cut], &b[cut..]] {
                if !part.is_empty() {
                    write!(w, "{:x}\r\n", part.len()).unwrap();
                    w.write_all(part).unwrap();
                    w.write_all(b"\r\n").unwrap();
                    w.flush().unwrap();
                }
            }
        }
        w.write_all(b"0\r\n\r\n").unwrap();
        w.flush().unwrap();
    });
    (format!("http://{addr}"), rx)
}

/// Starts a child in `env` with a new session and runs one turn; its frames.
fn turn_in(env: &Env, prompt: &str) -> Vec<Value> {
    let (mut s, sid) = start_session(env, &[]);
    run_turn(&mut s, &sid, prompt)
}

fn finished(frames: &[Value]) -> &Value {
    &frames.last().unwrap()["data"]
}

#[test]
fn openai_compatible_provider_streams_a_reply() {
    let chunk = |t: &str| {
        format!(
            "data: {}\n\n",
            json!({"choices": [{"delta": {"content": t}}]})
        )
    };
    let (base, seen) = serve_once(
        200,
        vec![
            chunk("Grüße "),
            chunk("aus "),
            ": keep-alive\n\n".into(),
            chunk("SSE."),
            // Every real stream ends its choice; one without a `finish_reason` was cut
            // short (`runner.md` 1).
            format!(
                "data: {}\n\n",
                json!({"choices": [{"delta": {}, "finish_reason": "stop"}]})
            ),
            "data: [DONE]\n\n".into(),
        ],
    );
    let mut env = Env::new();
    env.set_var("LOCAL_KEY", "local-secret-key");
    env.write_global_settings(&json!({
        "provider": "local", "model": "tiny",
        "providers": {"local": {"kind": "openai-compatible", "base_url": format!("{base}/v1"), "api_key_env": "LOCAL_KEY"}},
    }));
    let frames = turn_in(&env, "Say hello");
    let req = seen.recv().unwrap();
    assert_eq!(req.path, "/v1/chat/completions");
    assert_eq!(req.body["model"], "tiny");
    assert_eq!(req.body["stream"], true);
    assert_eq!(
        req.body["messages"].as_array().unwrap().last().unwrap(),
        &json!({"role": "user", "content": "Say hello"})
    );
    assert!(req
        .headers
        .iter()
        .any(|(k, v)| k == "authorization" && v == "Bearer local-secret-key"));
    assert_eq!(reconciled(&frames), "Grüße aus SSE.");
    let deltas: String = frames
        .iter()
        .filter(|f| f["event"] == "message.delta")
        .map(|f| f["data"]["text"].as_str().unwrap())
        .collect();
    assert_eq!(deltas, "Grüße aus SSE.");
    assert_eq!(finished(&frames)["outcome"], "completed");
    assert!(
        !frames
            .iter()
            .any(|f| f.to_string().contains("local-secret-key")),
        "the key never reaches the client"
    );
}

#[test]
fn anthropic_messages_api_streams_a_reply() {
    let ev = |name: &str, data: Value| format!("event: {name}\ndata: {data}\n\n");
    let (base, seen) = serve_once(
        200,
        vec![
            ev(
                "message_start",
                json!({"type": "message_start", "message": {"id": "m", "content": []}}),
            ),
            ev(
                "content_block_start",
                json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
            ),
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hello "}}),
            ),
            ev("ping", json!({"type": "ping"})),
            ev(
                "content_block_delta",
                json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "from Claude."}}),
            ),
            ev(
                "content_block_stop",
                json!({"type": "content_block_stop", "index": 0}),
            ),
            ev(
                "message_delta",
                json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}),
            ),
            ev("message_stop", json!({"type": "message_stop"})),
        ],
    );
    let mut env = Env::new();
    env.set_var("ANTHROPIC_API_KEY", "sk-ant-test-key-123");
    env.write_global_settings(&json!({
        "provider": "anthropic", "model": "claude-sonnet-4-5",
        "providers": {"anthropic": {"base_url": base}},
    }));
    let frames = turn_in(&env, "Hi");
    let req = seen.recv().unwrap();
    assert_eq!(req.path, "/v1/messages");
    assert_eq!(req.body["model"], "claude-sonnet-4-5");
    assert!(req
        .headers
        .iter()
        .any(|(k, v)| k == "x-api-key" && v == "sk-ant-test-key-123"));
    assert!(req.headers.iter().any(|(k, _)| k == "anthropic-version"));
    assert_eq!(reconciled(&frames), "Hello from Claude.");
    assert_eq!(finished(&frames)["outcome"], "completed");
    assert!(!frames
        .iter()
        .any(|f| f.to_string().contains("sk-ant-test-key-123")));
}

#[test]
fn a_failing_server_fails_the_run_after_the_input_is_durable() {
    // Every attempt a 500 that asks for no wait (`retry-after: 0`): the five attempts take
    // no backoff, which `providers::http::tests` drives on a virtual clock.
    let fail = Reply::status(500, &json!({"error": {"message": "secret internals"}}))
        .header("retry-after", "0");
    let llm = FakeLlm::start(vec![fail; 5]);
    let base = llm.base.clone();
    let env = Env::new();
    env.write_global_settings(&json!({
        "provider": "local", "model": "tiny",
        "providers": {"local": {"kind": "openai-compatible", "base_url": format!("{base}/v1")}},
    }));
    let frames = turn_in(&env, "Hello?");
    assert!(frames.iter().any(|f| f["event"] == "input.persisted"));
    let fin = finished(&frames);
    assert_eq!(fin["outcome"], "failed");
    assert_eq!(fin["error_code"], "execution_failed");
    assert_eq!(fin["persistence"], "durable");
    let mut codes = vec!["provider_retry"; 4];
    codes.push("provider_status");
    assert_eq!(diagnostic_codes(&frames), codes);
    assert!(
        !frames
            .iter()
            .any(|f| f.to_string().contains("secret internals")),
        "never raw provider responses"
    );
    assert_eq!(llm.drain().len(), 5, "retried four times");
}
