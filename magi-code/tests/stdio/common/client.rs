//! Starting a child and talking to it: [`start`] and [`start_session`] for tests that choose
//! their own request IDs, and [`Client`], which numbers them itself.

use super::asserts::{assert_error, assert_ready_status};
use super::frames::{error_code, init_params, result};
use super::server::{Env, Server, STEP};
use serde_json::{json, Value};

/// Spawns `serve --stdio` in `env` and sends `initialize` (request ID `init`) requiring
/// `caps`; asserts it succeeded and returns the child and the `initialize` result.
#[track_caller]
pub fn start_with_result(env: &Env, caps: &[&str]) -> (Server, Value) {
    let mut s = env.spawn();
    let f = s.call("init", "initialize", &init_params(caps));
    let r = result(&f).clone();
    (s, r)
}

/// [`start_with_result`] without the result.
#[track_caller]
pub fn start(env: &Env, caps: &[&str]) -> Server {
    start_with_result(env, caps).0
}

/// [`start`], then `session.create` (request ID `c`); returns the child and the new session ID.
#[track_caller]
pub fn start_session(env: &Env, caps: &[&str]) -> (Server, String) {
    let mut s = start(env, caps);
    let sid = result(&s.call("c", "session.create", &json!({})))["session_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (s, sid)
}

/// A ready child plus a request-ID counter (IDs are never reused within a child).
pub struct Client {
    /// The child, for requests with IDs of the test's choosing.
    pub s: Server,
    n: u64,
}

impl Client {
    /// Spawns a child in `env` and initializes it requiring `caps`; asserts readiness.
    #[track_caller]
    pub fn start(env: &Env, caps: &[&str]) -> Self {
        Self::start_with_result(env, caps).0
    }

    /// The `initialize` result of a fresh child requiring `caps`.
    #[track_caller]
    pub fn start_with_result(env: &Env, caps: &[&str]) -> (Self, Value) {
        let (s, r) = start_with_result(env, caps);
        assert_ready_status(&r["status"], "scripted", "echo");
        (Self { s, n: 0 }, r)
    }

    /// A fresh request ID.
    pub fn next_id(&mut self) -> String {
        self.n += 1;
        format!("q{}", self.n)
    }

    /// Sends a request without waiting; returns its ID.
    pub fn send(&mut self, method: &str, params: &Value) -> String {
        let id = self.next_id();
        self.s.request(&id, method, params);
        id
    }

    /// Sends one request and returns its response frame (which must be the next frame).
    #[track_caller]
    pub fn call(&mut self, method: &str, params: &Value) -> Value {
        let id = self.next_id();
        self.s.call(&id, method, params)
    }

    /// A successful result.
    #[track_caller]
    pub fn ok(&mut self, method: &str, params: &Value) -> Value {
        let f = self.call(method, params);
        result(&f).clone()
    }

    /// Asserts the request fails with `code`.
    #[track_caller]
    pub fn fails(&mut self, method: &str, params: &Value, code: &str) {
        let id = self.next_id();
        let f = self.s.call(&id, method, params);
        assert_error(&f, Some(&id), code);
    }

    /// The current `status` result.
    #[track_caller]
    pub fn status(&mut self) -> Value {
        self.ok("status", &json!({}))
    }

    /// `status.session_id`.
    #[track_caller]
    pub fn attached(&mut self) -> Value {
        self.status()["session_id"].clone()
    }

    /// Retries `method` while it answers `busy` (the worker slot stays busy until a
    /// cancelled worker actually stops), for at most [`STEP`].
    #[track_caller]
    pub fn call_when_free(&mut self, method: &str, params: &Value) -> Value {
        let mut last = Value::Null;
        let free = super::poll::within(STEP, || {
            last = self.call(method, params);
            (last.get("error").is_none() || error_code(&last) != "busy").then(|| last.clone())
        });
        // Still busy at the limit: the last answer, for the caller's assertion.
        free.unwrap_or(last)
    }
}
