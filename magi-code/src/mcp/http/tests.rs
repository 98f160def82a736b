use super::*;
use crate::mcp::auth::NoAuth;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

/// A loopback server answering each request (one per connection) with `reply(body)`: the raw
/// response, or None to hold the connection silently until the client leaves.
fn serve(reply: impl Fn(&Value) -> Option<String> + Send + Sync + 'static) -> String {
    serve_headers(move |msg, _| reply(msg))
}

/// [`serve`] whose `reply` also sees the request's `authorization` header.
fn serve_headers(
    reply: impl Fn(&Value, Option<&str>) -> Option<String> + Send + Sync + 'static,
) -> String {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/mcp", l.local_addr().unwrap());
    let reply = Arc::new(reply);
    std::thread::spawn(move || {
        for conn in l.incoming().flatten() {
            let reply = reply.clone();
            std::thread::spawn(move || {
                let mut w = conn.try_clone().unwrap();
                let mut r = BufReader::new(conn);
                let mut len = 0;
                let mut auth = None;
                loop {
                    let mut h = String::new();
                    if r.read_line(&mut h).unwrap_or(0) == 0 {
                        return;
                    }
                    let h = h.trim_end().to_ascii_lowercase();
                    if h.is_empty() {
                        break;
                    }
                    if let Some(v) = h.strip_prefix("authorization:") {
                        auth = Some(v.trim().to_owned());
                    }
                    if let Some(v) = h.strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                }
                let mut body = vec![0; len];
                r.read_exact(&mut body).unwrap();
                let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
                match reply(&msg, auth.as_deref()) {
                    Some(resp) => drop(w.write_all(resp.as_bytes())),
                    None => while r.get_mut().read(&mut [0; 64]).is_ok_and(|n| n > 0) {},
                }
            });
        }
    });
    url
}

fn json_reply(msg: &Value, result: &Value) -> String {
    let body = json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}).to_string();
    format!(
        "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nMcp-Session-Id: abc\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    )
}

/// Answers the handshake; `tools/call` with `call(msg)`.
fn handshake_then(call: impl Fn(&Value) -> Option<String> + Send + Sync + 'static) -> String {
    serve(move |msg| match msg["method"].as_str() {
        Some("initialize") => Some(json_reply(msg, &json!({"protocolVersion": "2025-03-26"}))),
        Some("tools/call") => call(msg),
        _ => Some("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".into()),
    })
}

fn server(url: &str) -> HttpServer {
    let def = HttpDef {
        name: "t".into(),
        url: url.into(),
        headers: Vec::new(),
        env_headers: Vec::new(),
        bearer_token_env: None,
        oauth: false,
        token_home: None,
    };
    HttpServer::new(&def, Box::new(NoAuth)).unwrap()
}

fn far() -> Instant {
    Instant::now() + Duration::from_secs(10)
}

#[test]
fn a_silent_call_times_out_at_its_deadline_and_a_cancelled_one_returns_at_once() {
    let s = server(&handshake_then(|_| None));
    s.initialize(far(), &Cancel::default()).unwrap();
    let t0 = Instant::now();
    let r = s.request(
        "tools/call",
        json!({}),
        t0 + Duration::from_millis(200),
        &Cancel::default(),
    );
    assert_eq!(r, Err(CallError::Timeout));
    let took = t0.elapsed();
    assert!(
        took >= Duration::from_millis(200) && took < Duration::from_millis(700),
        "{took:?}"
    );
    let cancel = Cancel::default();
    cancel.cancel();
    let t0 = Instant::now();
    assert_eq!(
        s.request("tools/call", json!({}), far(), &cancel),
        Err(CallError::Cancelled)
    );
    assert!(
        t0.elapsed() < Duration::from_millis(600),
        "{:?}",
        t0.elapsed()
    );
    // Teardown's DELETE to a silent server ends by its deadline too.
    let t0 = Instant::now();
    s.shutdown(t0 + Duration::from_millis(200));
    assert!(
        t0.elapsed() < Duration::from_millis(700),
        "{:?}",
        t0.elapsed()
    );
    assert_eq!(
        s.request("tools/list", json!({}), far(), &Cancel::default()),
        Err(CallError::Exited)
    );
}

#[test]
fn a_body_over_the_bound_fails_the_server_and_a_foreign_revision_fails_the_handshake() {
    let s = server(&handshake_then(|msg| {
        Some(json_reply(
            msg,
            &json!({"pad": "x".repeat(crate::mcp::jsonrpc::LINE_BYTES)}),
        ))
    }));
    s.initialize(far(), &Cancel::default()).unwrap();
    assert_eq!(
        s.request("tools/call", json!({}), far(), &Cancel::default()),
        Err(CallError::Failed)
    );
    assert_eq!(
        s.request("tools/list", json!({}), far(), &Cancel::default()),
        Err(CallError::Failed)
    );
    let old = serve(|msg| Some(json_reply(msg, &json!({"protocolVersion": "2024-11-05"}))));
    assert_eq!(
        server(&old).initialize(far(), &Cancel::default()),
        Err(CallError::Unreachable)
    );
    // Nothing listens: the handshake fails, it does not hang.
    let gone = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let r = server(&format!("http://{gone}/mcp")).initialize(far(), &Cancel::default());
    assert_eq!(r, Err(CallError::Unreachable));
}

#[test]
fn a_json_rpc_error_is_the_call_s_error() {
    let s = server(&handshake_then(|msg| {
        let body =
            json!({"jsonrpc": "2.0", "id": msg["id"], "error": {"code": -32602, "message": "bad"}})
                .to_string();
        Some(format!(
            "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
            body.len()
        ))
    }));
    s.initialize(far(), &Cancel::default()).unwrap();
    let r = s.request("tools/call", json!({}), far(), &Cancel::default());
    assert_eq!(
        r,
        Err(CallError::Rpc(RpcError {
            code: -32602,
            message: "bad".into()
        }))
    );
}

/// A token that a refresh replaces; counts its refreshes.
struct Rotating {
    token: &'static str,
    refreshes: Arc<std::sync::atomic::AtomicU32>,
    refresh_ok: bool,
}

impl Authorize for Rotating {
    fn header(&mut self) -> Result<Option<String>, crate::mcp::auth::AuthError> {
        Ok(Some(format!("Bearer {}", self.token)))
    }

    fn refresh_after_401(&mut self) -> Result<bool, crate::mcp::auth::AuthError> {
        self.refreshes
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        self.token = "new";
        Ok(self.refresh_ok)
    }
}

#[test]
fn a_401_is_answered_by_one_refresh_and_one_retry() {
    // Only the refreshed token is accepted.
    let url = serve_headers(|msg, auth| {
        if auth != Some("bearer new") {
            return Some("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".into());
        }
        match msg["method"].as_str() {
            Some("initialize") => Some(json_reply(msg, &json!({"protocolVersion": "2025-11-25"}))),
            _ => Some("HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n".into()),
        }
    });
    let def = |url: &str| HttpDef {
        name: "t".into(),
        url: url.into(),
        headers: Vec::new(),
        env_headers: Vec::new(),
        bearer_token_env: None,
        oauth: true,
        token_home: None,
    };
    for (refresh_ok, outcome, refreshes) in [(true, Ok(()), 1), (false, Err(CallError::Auth), 1)] {
        let n = Arc::new(std::sync::atomic::AtomicU32::new(0));
        let auth = Rotating {
            token: "old",
            refreshes: n.clone(),
            refresh_ok,
        };
        let s = HttpServer::new(&def(&url), Box::new(auth)).unwrap();
        assert_eq!(s.initialize(far(), &Cancel::default()), outcome);
        assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), refreshes);
    }
    // A refreshed token refused again: one refresh only, then the authorization is refused.
    let refusing =
        serve_headers(|_, _| Some("HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n".into()));
    let n = Arc::new(std::sync::atomic::AtomicU32::new(0));
    let auth = Rotating {
        token: "old",
        refreshes: n.clone(),
        refresh_ok: true,
    };
    let s = HttpServer::new(&def(&refusing), Box::new(auth)).unwrap();
    assert_eq!(
        s.initialize(far(), &Cancel::default()),
        Err(CallError::Auth)
    );
    assert_eq!(n.load(std::sync::atomic::Ordering::SeqCst), 1);
}
