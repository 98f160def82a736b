//! A sans-IO JSON-RPC 2.0 client session over newline-delimited JSON (the MCP stdio framing):
//! it queues outgoing lines, matches incoming responses to the integer ids it issued, answers
//! the server's own requests and keeps deadlines as data. No clock and no I/O inside.

use serde_json::{json, Value};
use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

/// Longest incoming line accepted (without its newline); a longer one fails the server.
pub const LINE_BYTES: usize = 1024 * 1024;
/// Most requests awaiting an answer at once.
pub const MAX_OUTSTANDING: usize = 64;
/// Unparseable or malformed lines tolerated before the server is failed: servers that print a
/// banner on stdout by mistake keep working, a server that speaks something else does not.
pub const GARBAGE_LINES: u32 = 16;

/// A JSON-RPC error object from the server (its message is the server's text: never shown raw).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RpcError {
    /// The error code.
    pub code: i64,
    /// The server's message.
    pub message: String,
}

/// Why the session refused or gave up.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SessionError {
    /// [`MAX_OUTSTANDING`] requests already wait.
    TooManyOutstanding,
    /// An incoming line exceeded [`LINE_BYTES`].
    LineTooLong,
    /// More than [`GARBAGE_LINES`] lines were not JSON-RPC.
    TooMuchGarbage,
    /// The session failed earlier; nothing more is accepted.
    Failed,
}

/// What one incoming line meant.
#[derive(Debug, Clone, PartialEq)]
pub enum Incoming {
    /// The answer to request `id`.
    Response {
        /// The request's id.
        id: u64,
        /// Its result or error.
        result: Result<Value, RpcError>,
    },
    /// A notification (progress, list changes, logging, or one not known).
    Notification {
        /// Its method.
        method: String,
    },
    /// A server request, answered already (the answer is queued for writing).
    Answered,
    /// A line that meant nothing to act on: blank, a late answer to a forgotten request, or
    /// counted garbage.
    Ignored,
}

/// One client session: ids, outstanding requests with their deadlines, queued output lines.
#[derive(Debug, Default)]
pub struct Session {
    next_id: u64,
    outstanding: BTreeMap<u64, Option<Instant>>,
    out: VecDeque<Vec<u8>>,
    garbage: u32,
    failed: bool,
}

impl Session {
    /// A fresh session; the first id is 1.
    #[must_use]
    pub fn new() -> Self {
        Self {
            next_id: 1,
            ..Self::default()
        }
    }

    /// Queues a request; its answer must come by `deadline` (if any). Returns its id.
    pub fn send_request(
        &mut self,
        method: &str,
        params: Value,
        deadline: Option<Instant>,
    ) -> Result<u64, SessionError> {
        if self.failed {
            return Err(SessionError::Failed);
        }
        if self.outstanding.len() >= MAX_OUTSTANDING {
            return Err(SessionError::TooManyOutstanding);
        }
        let id = self.next_id;
        self.next_id += 1;
        self.outstanding.insert(id, deadline);
        self.push(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        Ok(id)
    }

    /// Queues a notification.
    pub fn send_notification(&mut self, method: &str, params: Value) {
        if !self.failed {
            self.push(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
        }
    }

    /// Stops waiting for `id` (cancelled or timed out); a late answer is then ignored.
    pub fn forget(&mut self, id: u64) {
        self.outstanding.remove(&id);
    }

    /// How many requests wait for an answer.
    #[must_use]
    pub fn outstanding(&self) -> usize {
        self.outstanding.len()
    }

    /// The next queued output line (newline included).
    pub fn poll_write(&mut self) -> Option<Vec<u8>> {
        self.out.pop_front()
    }

    /// The earliest deadline among outstanding requests.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.outstanding.values().flatten().min().copied()
    }

    /// Removes and returns the requests whose deadline is at or before `now`.
    pub fn handle_timeout(&mut self, now: Instant) -> Vec<u64> {
        let late: Vec<u64> = self
            .outstanding
            .iter()
            .filter(|(_, d)| d.is_some_and(|d| d <= now))
            .map(|(id, _)| *id)
            .collect();
        for id in &late {
            self.outstanding.remove(id);
        }
        late
    }

    /// Interprets one incoming line (without or with its trailing newline).
    pub fn handle_line(&mut self, line: &[u8]) -> Result<Incoming, SessionError> {
        if self.failed {
            return Err(SessionError::Failed);
        }
        let line = line.strip_suffix(b"\n").unwrap_or(line);
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.len() > LINE_BYTES {
            self.failed = true;
            return Err(SessionError::LineTooLong);
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            return Ok(Incoming::Ignored);
        }
        match serde_json::from_slice::<Value>(line) {
            Ok(Value::Object(m)) if m.get("jsonrpc").and_then(Value::as_str) == Some("2.0") => {
                self.message(&m)
            }
            _ => self.garbage(),
        }
    }

    fn message(&mut self, m: &serde_json::Map<String, Value>) -> Result<Incoming, SessionError> {
        let id = m.get("id");
        match (m.get("method").and_then(Value::as_str), id) {
            (Some(method), None) => Ok(Incoming::Notification {
                method: method.to_owned(),
            }),
            (Some(method), Some(id)) => {
                // The client declares no capabilities, so only `ping` has an answer; every other
                // request is "method not found", as the MCP spec allows.
                let reply = if method == "ping" {
                    json!({"jsonrpc": "2.0", "id": id, "result": {}})
                } else {
                    json!({"jsonrpc": "2.0", "id": id, "error": {"code": -32601, "message": "method not found"}})
                };
                self.push(&reply);
                Ok(Incoming::Answered)
            }
            (None, Some(id)) => {
                let Some(id) = id.as_u64() else {
                    return self.garbage();
                };
                let result = match (m.get("result"), m.get("error")) {
                    (Some(r), None) => Ok(r.clone()),
                    (None, Some(e)) => Err(RpcError {
                        code: e.get("code").and_then(Value::as_i64).unwrap_or(0),
                        message: e
                            .get("message")
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_owned(),
                    }),
                    _ => return self.garbage(),
                };
                if self.outstanding.remove(&id).is_some() {
                    Ok(Incoming::Response { id, result })
                } else if id > 0 && id < self.next_id {
                    // A late answer to a request given up on (cancelled or timed out).
                    Ok(Incoming::Ignored)
                } else {
                    self.garbage()
                }
            }
            (None, None) => self.garbage(),
        }
    }

    fn garbage(&mut self) -> Result<Incoming, SessionError> {
        self.garbage += 1;
        if self.garbage > GARBAGE_LINES {
            self.failed = true;
            return Err(SessionError::TooMuchGarbage);
        }
        Ok(Incoming::Ignored)
    }

    fn push(&mut self, v: &Value) {
        let mut line = v.to_string().into_bytes();
        line.push(b'\n');
        self.out.push_back(line);
    }
}

/// Fuzz entry point (behind the `testing` feature): feeds `data`'s lines to a session with a
/// few requests outstanding; it must never panic and never hold more than its bounds.
#[cfg(feature = "testing")]
pub fn fuzz(data: &[u8]) {
    let mut s = Session::new();
    let now = Instant::now();
    for _ in 0..3 {
        let _ = s.send_request("tools/list", json!({}), Some(now));
    }
    for line in data.split(|b| *b == b'\n') {
        if let Ok(Incoming::Response { id, .. }) = s.handle_line(line) {
            assert!((1..=3).contains(&id));
        }
        assert!(s.outstanding() <= MAX_OUTSTANDING);
    }
    while s.poll_write().is_some() {}
    let _ = s.handle_timeout(now);
    assert_eq!(s.outstanding(), 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn line(s: &mut Session) -> Value {
        serde_json::from_slice(&s.poll_write().unwrap()).unwrap()
    }

    #[test]
    fn requests_get_increasing_ids_and_answers_match_them() {
        let mut s = Session::new();
        let a = s.send_request("initialize", json!({"x": 1}), None).unwrap();
        let b = s.send_request("tools/list", json!({}), None).unwrap();
        assert_eq!((a, b), (1, 2));
        let first = line(&mut s);
        assert_eq!(
            first,
            json!({"jsonrpc":"2.0","id":1,"method":"initialize","params":{"x":1}})
        );
        let got = s
            .handle_line(br#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#)
            .unwrap();
        assert_eq!(
            got,
            Incoming::Response {
                id: 2,
                result: Ok(json!({"tools": []}))
            }
        );
        let err = s
            .handle_line(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"error\":{\"code\":-32602,\"message\":\"bad\"}}\r\n")
            .unwrap();
        assert_eq!(
            err,
            Incoming::Response {
                id: 1,
                result: Err(RpcError {
                    code: -32602,
                    message: "bad".into()
                })
            }
        );
        // A second answer to the same id is a late one: ignored, not garbage.
        assert_eq!(
            s.handle_line(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#)
                .unwrap(),
            Incoming::Ignored
        );
        assert_eq!(s.garbage, 0);
    }

    #[test]
    fn notifications_are_reported_and_server_requests_answered() {
        let mut s = Session::new();
        let n = s.handle_line(br#"{"jsonrpc":"2.0","method":"notifications/tools/list_changed"}"#);
        assert_eq!(
            n.unwrap(),
            Incoming::Notification {
                method: "notifications/tools/list_changed".into()
            }
        );
        assert_eq!(
            s.handle_line(br#"{"jsonrpc":"2.0","id":"p","method":"ping"}"#)
                .unwrap(),
            Incoming::Answered
        );
        assert_eq!(line(&mut s), json!({"jsonrpc":"2.0","id":"p","result":{}}));
        assert_eq!(
            s.handle_line(br#"{"jsonrpc":"2.0","id":7,"method":"roots/list"}"#)
                .unwrap(),
            Incoming::Answered
        );
        assert_eq!(line(&mut s)["error"]["code"], -32601);
        assert!(s.poll_write().is_none());
    }

    #[test]
    fn garbage_is_tolerated_up_to_the_bound_then_fails_the_session() {
        let mut s = Session::new();
        for i in 0..GARBAGE_LINES {
            let bad: &[u8] = match i % 4 {
                0 => b"server starting...",
                1 => br#"{"id":1,"result":{}}"#,
                2 => br#"{"jsonrpc":"2.0","id":99,"result":{}}"#,
                _ => b"[1,2]",
            };
            assert_eq!(s.handle_line(bad).unwrap(), Incoming::Ignored);
        }
        assert_eq!(
            s.handle_line(b"   ").unwrap(),
            Incoming::Ignored,
            "blank lines are free"
        );
        assert_eq!(s.handle_line(b"nope"), Err(SessionError::TooMuchGarbage));
        assert_eq!(s.handle_line(b"{}"), Err(SessionError::Failed));
        assert_eq!(
            s.send_request("x", json!({}), None),
            Err(SessionError::Failed)
        );
    }

    #[test]
    fn a_line_at_the_bound_is_read_and_one_byte_more_fails() {
        let mut s = Session::new();
        s.send_request("tools/list", json!({}), None).unwrap();
        let head = br#"{"jsonrpc":"2.0","id":1,"result":{"pad":""#;
        let tail = br#""}}"#;
        let mut ok = head.to_vec();
        ok.resize(LINE_BYTES - tail.len(), b'a');
        ok.extend_from_slice(tail);
        assert_eq!(ok.len(), LINE_BYTES);
        ok.push(b'\n');
        assert!(matches!(
            s.handle_line(&ok).unwrap(),
            Incoming::Response { id: 1, .. }
        ));
        let mut over = vec![b' '; LINE_BYTES + 1];
        over.push(b'\n');
        assert_eq!(s.handle_line(&over), Err(SessionError::LineTooLong));
    }

    #[test]
    fn outstanding_requests_are_bounded() {
        let mut s = Session::new();
        for _ in 0..MAX_OUTSTANDING {
            s.send_request("x", json!({}), None).unwrap();
        }
        assert_eq!(
            s.send_request("x", json!({}), None),
            Err(SessionError::TooManyOutstanding)
        );
        s.forget(1);
        assert!(s.send_request("x", json!({}), None).is_ok());
    }

    #[test]
    fn deadlines_are_data_and_expire_at_their_instant() {
        let mut s = Session::new();
        let t0 = Instant::now();
        let a = s
            .send_request("a", json!({}), Some(t0 + Duration::from_secs(2)))
            .unwrap();
        let b = s
            .send_request("b", json!({}), Some(t0 + Duration::from_secs(1)))
            .unwrap();
        s.send_request("c", json!({}), None).unwrap();
        assert_eq!(s.poll_timeout(), Some(t0 + Duration::from_secs(1)));
        assert!(s.handle_timeout(t0).is_empty());
        assert_eq!(s.handle_timeout(t0 + Duration::from_secs(1)), vec![b]);
        assert_eq!(s.handle_timeout(t0 + Duration::from_secs(5)), vec![a]);
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.outstanding(), 1);
        // The late answer of a timed-out request is ignored.
        let late = format!(r#"{{"jsonrpc":"2.0","id":{a},"result":{{}}}}"#);
        assert_eq!(s.handle_line(late.as_bytes()).unwrap(), Incoming::Ignored);
    }

    #[test]
    fn fuzz_survives_odd_input() {
        fuzz(b"");
        fuzz(b"\n\n{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":null}\n{\"jsonrpc\":\"2.0\",\"id\":-1,\"error\":5}\n\xff\xfe");
        fuzz(br#"{"jsonrpc":"2.0","id":1.5,"result":{}}"#);
    }
}
