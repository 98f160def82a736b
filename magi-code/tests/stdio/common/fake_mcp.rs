//! A fake MCP server over Streamable HTTP on 127.0.0.1 (one request per connection): it
//! answers `initialize` with a session id (`s1`, `s2`, … per handshake), `tools/list` with
//! one `echo` tool, `tools/call` with `echo: <text>`, notifications with `202`, `DELETE` with
//! `200`; as JSON or as an SSE stream (a priming empty event, a comment, a notification and a
//! ping before the response). [`Faults`] make it misbehave. Every request is recorded.

use serde_json::{json, Value};
use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// How the fake misbehaves.
#[derive(Debug, Clone, Default)]
pub struct Faults {
    /// Answer requests as SSE streams, not JSON bodies.
    pub sse: bool,
    /// `401` to every request.
    pub always_401: bool,
    /// `401` to every `tools/call` (after a good handshake).
    pub calls_401: bool,
    /// Forget the session at the first `tools/call` (a `404` to it and to every later
    /// request carrying that session id).
    pub lose_session_once: bool,
    /// Forget every session at each `tools/call` (it never succeeds).
    pub lose_session_always: bool,
    /// Cut the first `tools/call` answer's stream mid-event.
    pub break_first_call: bool,
    /// Never answer `initialize` (hold the connection until the client leaves).
    pub silent_initialize: bool,
    /// Open a `tools/call` answer's stream and send nothing more until the client leaves.
    pub stall_calls: bool,
}

/// One request the fake saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// `POST` or `DELETE`.
    pub method: String,
    /// Headers, names lowercased.
    pub headers: HashMap<String, String>,
    /// The JSON-RPC message (Null for a `DELETE`).
    pub body: Value,
    /// The status answered.
    pub status: u16,
}

impl Seen {
    /// The JSON-RPC method, or the HTTP one for a `DELETE`.
    #[must_use]
    pub fn rpc(&self) -> &str {
        match self.body["method"].as_str() {
            Some(m) => m,
            None if self.method == "DELETE" => "DELETE",
            None => "response",
        }
    }
}

#[derive(Default)]
struct State {
    seen: Vec<Seen>,
    sessions: u32,
    /// The live session id.
    live: Option<String>,
    calls: u32,
    /// Stalled streams the client closed.
    dropped: u32,
}

/// A running fake; it stops with the test process.
pub struct FakeMcp {
    /// Its `http://127.0.0.1:PORT/mcp`.
    pub url: String,
    state: Arc<Mutex<State>>,
}

impl FakeMcp {
    /// Starts a fake with `faults`.
    #[must_use]
    pub fn start(faults: Faults) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}/mcp", l.local_addr().unwrap().port());
        let state = Arc::new(Mutex::new(State::default()));
        let st = state.clone();
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                let (st, f) = (st.clone(), faults.clone());
                std::thread::spawn(move || serve(conn, &st, &f));
            }
        });
        Self { url, state }
    }

    /// Every request so far.
    #[must_use]
    pub fn seen(&self) -> Vec<Seen> {
        self.state.lock().unwrap().seen.clone()
    }

    /// How many stalled streams the client closed.
    #[must_use]
    pub fn dropped(&self) -> u32 {
        self.state.lock().unwrap().dropped
    }

    /// The JSON-RPC methods (and `DELETE`s) so far, with their statuses.
    #[must_use]
    pub fn methods(&self) -> Vec<(String, u16)> {
        self.seen()
            .iter()
            // The answers to the fake's pings come on their own time.
            .filter(|s| s.rpc() != "response")
            .map(|s| (s.rpc().to_owned(), s.status))
            .collect()
    }
}

/// Reads one request: method, lowercased headers, body (the token endpoint fake uses it too).
pub fn read_request(
    r: &mut BufReader<TcpStream>,
) -> Option<(String, HashMap<String, String>, Vec<u8>)> {
    let mut line = String::new();
    r.read_line(&mut line).ok()?;
    let method = line.split(' ').next()?.to_owned();
    let mut headers = HashMap::new();
    loop {
        let mut h = String::new();
        r.read_line(&mut h).ok()?;
        let h = h.trim_end();
        if h.is_empty() {
            break;
        }
        let (k, v) = h.split_once(':')?;
        headers.insert(k.trim().to_ascii_lowercase(), v.trim().to_owned());
    }
    let len: usize = headers
        .get("content-length")
        .and_then(|l| l.parse().ok())
        .unwrap_or(0);
    let mut body = vec![0; len];
    r.read_exact(&mut body).ok()?;
    Some((method, headers, body))
}

/// What the fake answers: status, session id header, JSON-RPC result (None: no body).
fn decide(
    st: &mut State,
    f: &Faults,
    method: &str,
    h: &HashMap<String, String>,
    msg: &Value,
) -> (u16, Option<String>, Option<Value>) {
    let rpc = msg["method"].as_str().unwrap_or("");
    let sid = h.get("mcp-session-id");
    if f.always_401 || (f.calls_401 && rpc == "tools/call") {
        return (401, None, None);
    }
    if method == "DELETE" {
        st.live = None;
        return (200, None, None);
    }
    if msg.get("method").is_none() {
        // The client's answer to the fake's ping.
        return (202, None, None);
    }
    if rpc == "initialize" {
        st.sessions += 1;
        let id = format!("s{}", st.sessions);
        st.live = Some(id.clone());
        let version = msg["params"]["protocolVersion"].clone();
        let result = json!({"protocolVersion": version, "capabilities": {"tools": {}},
                            "serverInfo": {"name": "fake-http", "version": "1"}});
        return (200, Some(id), Some(result));
    }
    if sid.is_none() || sid != st.live.as_ref() {
        return (404, None, None);
    }
    if rpc == "tools/call" {
        st.calls += 1;
        if f.lose_session_always || (f.lose_session_once && st.calls == 1) {
            st.live = None;
            return (404, None, None);
        }
    }
    let result = match rpc {
        "tools/list" => json!({"tools": [{"name": "echo", "description": "Echoes its text.",
            "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}}}]}),
        "tools/call" => {
            let text = msg["params"]["arguments"]["text"].as_str().unwrap_or("");
            json!({"content": [{"type": "text", "text": format!("echo: {text}")}]})
        }
        _ if msg.get("id").is_none() => return (202, None, None),
        _ => json!({}),
    };
    (200, None, Some(result))
}

fn serve(conn: TcpStream, st: &Mutex<State>, f: &Faults) {
    let mut w = conn.try_clone().unwrap();
    let mut r = BufReader::new(conn);
    let Some((method, headers, body)) = read_request(&mut r) else {
        return;
    };
    let msg: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    if f.silent_initialize && msg["method"] == "initialize" {
        // Recorded (status 0: never answered), then held until the client closes its side.
        st.lock().unwrap().seen.push(Seen {
            method,
            headers,
            body: msg,
            status: 0,
        });
        let mut sink = [0u8; 64];
        while r.get_mut().read(&mut sink).is_ok_and(|n| n > 0) {}
        return;
    }
    let (status, sid, result) = {
        let mut st = st.lock().unwrap();
        let d = decide(&mut st, f, &method, &headers, &msg);
        st.seen.push(Seen {
            method: method.clone(),
            headers,
            body: msg.clone(),
            status: d.0,
        });
        let first_call = msg["method"] == "tools/call" && st.calls == 1;
        (
            d.0,
            d.1.map(|s| (s, first_call)),
            d.2.map(|r| (r, first_call)),
        )
    };
    let session = sid
        .as_ref()
        .map(|(s, _)| format!("Mcp-Session-Id: {s}\r\n"))
        .unwrap_or_default();
    let Some((result, first_call)) = result else {
        let _ = write!(
            w,
            "HTTP/1.1 {status} X\r\n{session}Content-Length: 0\r\nConnection: close\r\n\r\n"
        );
        return;
    };
    if f.stall_calls && msg["method"] == "tools/call" {
        let _ = write!(w, "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n7\r\ndata:\n\n\r\n");
        let mut sink = [0u8; 64];
        while r.get_mut().read(&mut sink).is_ok_and(|n| n > 0) {}
        st.lock().unwrap().dropped += 1;
        return;
    }
    let answer = json!({"jsonrpc": "2.0", "id": msg["id"], "result": result}).to_string();
    if !f.sse {
        let _ = write!(w, "HTTP/1.1 200 OK\r\n{session}Content-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{answer}", answer.len());
        return;
    }
    let _ = write!(w, "HTTP/1.1 200 OK\r\n{session}Content-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n");
    let chunk = |w: &mut TcpStream, s: &str| {
        let _ = write!(w, "{:x}\r\n{s}\r\n", s.len());
        let _ = w.flush();
    };
    chunk(&mut w, "id: 0\ndata:\n\n: keep-alive\n\n");
    chunk(&mut w, "data: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/message\",\"params\":{\"level\":\"info\",\"data\":\"x\"}}\n\n");
    chunk(
        &mut w,
        "data: {\"jsonrpc\":\"2.0\",\"id\":\"srv-1\",\"method\":\"ping\"}\n\n",
    );
    if f.break_first_call && first_call {
        chunk(&mut w, &format!("data: {}", &answer[..answer.len() / 2]));
        // Closed without the rest of the event or the chunked terminator (the half written
        // before goes out ahead of the close: TCP keeps the order).
        return;
    }
    let (a, b) = answer.split_at(answer.len() / 2);
    chunk(&mut w, &format!("event: message\ndata: {a}"));
    chunk(&mut w, &format!("{b}\n\n"));
    let _ = write!(w, "0\r\n\r\n");
}
