//! One MCP server over Streamable HTTP (`backend.md` "MCP servers over HTTP"): every
//! JSON-RPC message a POST made with ureq on a worker thread, its answer (JSON or SSE) read
//! through [`Answer`] into the shared JSON-RPC [`Session`]; the session id and revision on
//! every later request, one re-initialization after a `404`, one refresh after a `401`, and a
//! `DELETE` at teardown. The caller waits with its deadline and cancellation; giving up closes
//! the worker's connection.

use super::auth::Authorize;
use super::definition::HttpDef;
use super::http_wire::{self, Answer, Broken, Fed, Status};
use super::jsonrpc::{RpcError, Session};
use super::protocol::{self, cancelled_params};
use super::server::CallError;
use crate::util::cancel::Cancel;
use serde_json::{json, Value};
use std::io::Read;
use std::sync::mpsc;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// Longest a waiting caller sleeps between checks of cancellation and its deadline.
const POLL: Duration = Duration::from_millis(20);
/// Bound of a message sent without waiting for it (`notifications/cancelled`, a ping's answer).
const DETACHED: Duration = Duration::from_secs(5);
/// Longest connect.
const CONNECT: Duration = Duration::from_secs(10);

fn lock<T: ?Sized>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

#[derive(Default)]
struct State {
    session: Session,
    /// The `Mcp-Session-Id` of the current MCP session, if the server gave one.
    session_id: Option<String>,
    /// The negotiated revision, once initialized.
    version: Option<&'static str>,
    /// Given up on for a protocol breach.
    failed: bool,
    /// Torn down.
    closed: bool,
}

struct Shared {
    url: String,
    /// The definition's static headers and those read from `env_headers`; never written out.
    headers: Vec<(String, String)>,
    auth: Mutex<Box<dyn Authorize>>,
    state: Mutex<State>,
    /// Held while re-initializing, so that concurrent `404`s start one new session.
    reinit: Mutex<()>,
}

/// What one POST came to.
enum Posted {
    /// The response to the request (and the `Mcp-Session-Id` the answer carried).
    Answer(Result<Value, RpcError>, Option<String>),
    /// A 2xx to a notification.
    Accepted,
    /// A status that is not 2xx.
    Status(Status),
    /// No answer could be read.
    Broken(Broken),
    /// The caller's cancellation.
    Cancelled,
    /// The caller's deadline.
    Timeout,
}

/// One connected HTTP server.
pub struct HttpServer {
    sh: Arc<Shared>,
}

impl std::fmt::Debug for HttpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpServer").finish_non_exhaustive()
    }
}

/// The values of `def`'s headers, `env_headers` read from the environment now; None when a
/// variable is unset (`decisions.md` 42).
fn resolve_headers(def: &HttpDef) -> Option<Vec<(String, String)>> {
    let mut out = def.headers.clone();
    for (name, var) in &def.env_headers {
        let value = std::env::var(var).ok()?;
        if value.chars().any(char::is_control) {
            return None;
        }
        crate::util::redact::register_secret(&value);
        out.push((name.clone(), value));
    }
    Some(out)
}

/// An agent bounded by `deadline` as a whole, following no redirect.
fn agent(deadline: Instant) -> ureq::Agent {
    let left = deadline.saturating_duration_since(Instant::now());
    ureq::Agent::config_builder()
        .timeout_global(Some(left.max(Duration::from_millis(1))))
        .timeout_connect(Some(left.min(CONNECT).max(Duration::from_millis(1))))
        .max_redirects(0)
        .http_status_as_error(false)
        .build()
        .into()
}

impl Shared {
    /// The headers of the next request: the transport's, the definition's, the authorization.
    fn request_headers(&self) -> Result<Vec<(String, String)>, CallError> {
        let (sid, version) = {
            let st = lock(&self.state);
            (st.session_id.clone(), st.version)
        };
        let mut h: Vec<(String, String)> = http_wire::post_headers(sid.as_deref(), version)
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v))
            .collect();
        h.extend(self.headers.iter().cloned());
        match lock(&self.auth).header() {
            Ok(Some(a)) => h.push(("authorization".into(), a)),
            Ok(None) => {}
            Err(_) => return Err(CallError::Auth),
        }
        Ok(h)
    }

    /// One POST of `body`, answered on this worker thread; `id` is the request's (None for a
    /// notification).
    fn exchange(
        &self,
        agent: &ureq::Agent,
        headers: &[(String, String)],
        body: &[u8],
        id: Option<u64>,
    ) -> Posted {
        let had_session = headers.iter().any(|(k, _)| k == "mcp-session-id");
        let mut req = agent.post(&self.url);
        for (k, v) in headers {
            req = req.header(k.as_str(), v.as_str());
        }
        let Ok(resp) = req.send(body) else {
            return Posted::Broken(Broken::Cut);
        };
        match http_wire::classify(resp.status().as_u16(), had_session) {
            Status::Ok => {}
            other => return Posted::Status(other),
        }
        let Some(id) = id else {
            return Posted::Accepted;
        };
        let header = |name: &str| {
            resp.headers()
                .get(name)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned)
        };
        let sid = header("mcp-session-id");
        let kind = header("content-type").unwrap_or_default();
        let mut answer = match Answer::new(id, &kind) {
            Ok(a) => a,
            Err(b) => return Posted::Broken(b),
        };
        let mut reader = resp.into_body().into_reader();
        let mut buf = vec![0u8; 16 << 10];
        loop {
            let fed = match reader.read(&mut buf) {
                Ok(0) => answer.finish(&mut lock(&self.state).session),
                Ok(n) => answer.feed(&buf[..n], &mut lock(&self.state).session),
                Err(_) => Err(Broken::Cut),
            };
            self.answer_server_requests();
            match fed {
                Ok(Fed::More) => {}
                // The rest of a stream is dropped with the reader.
                Ok(Fed::Done(r)) => return Posted::Answer(r, sid),
                Err(b) => return Posted::Broken(b),
            }
        }
    }

    /// Sends the answers the session queued for the server's own requests (a `ping`).
    fn answer_server_requests(&self) {
        let lines: Vec<Vec<u8>> = {
            let mut st = lock(&self.state);
            std::iter::from_fn(|| st.session.poll_write()).collect()
        };
        for line in lines {
            self.detached(line);
        }
    }

    /// POSTs `body` without waiting for its answer, within [`DETACHED`].
    fn detached(&self, body: Vec<u8>) {
        let Ok(headers) = self.request_headers() else {
            return;
        };
        let url = self.url.clone();
        let spawned = std::thread::Builder::new()
            .name("mc-mcp-http-send".into())
            .spawn(move || {
                let mut req = agent(Instant::now() + DETACHED).post(&url);
                for (k, v) in &headers {
                    req = req.header(k.as_str(), v.as_str());
                }
                // Nothing waits for this answer: it is read and dropped.
                if let Ok(r) = req.send(&body[..]) {
                    let mut sink = Vec::new();
                    let mut body = r.into_body().into_reader().take(64 << 10);
                    let _ = body.read_to_end(&mut sink);
                }
            });
        // Without a thread the message is not sent: the server only misses a courtesy.
        drop(spawned);
    }
}

impl HttpServer {
    /// A server for `def` authorized by `auth`, not yet contacted. Err when a variable
    /// `env_headers` names is unset.
    pub fn new(def: &HttpDef, auth: Box<dyn Authorize>) -> Result<Self, CallError> {
        let headers = resolve_headers(def).ok_or(CallError::Auth)?;
        Ok(Self {
            sh: Arc::new(Shared {
                url: def.url.clone(),
                headers,
                auth: Mutex::new(auth),
                state: Mutex::new(State {
                    session: Session::new(),
                    ..State::default()
                }),
                reinit: Mutex::new(()),
            }),
        })
    }

    /// One POST on a worker thread, waited for until `deadline` or `cancel` (either closes
    /// the worker's connection).
    fn post(
        &self,
        body: &[u8],
        id: Option<u64>,
        deadline: Instant,
        cancel: &Cancel,
    ) -> Result<Posted, CallError> {
        let headers = self.sh.request_headers()?;
        let agent = agent(deadline);
        let (tx, rx) = mpsc::sync_channel(1);
        let (sh, a, body) = (self.sh.clone(), agent.clone(), body.to_vec());
        std::thread::Builder::new()
            .name("mc-mcp-http".into())
            .spawn(move || {
                // The caller may have given up: a closed channel is fine.
                let _ = tx.send(sh.exchange(&a, &headers, &body, id));
            })
            .map_err(|_| CallError::Unreachable)?;
        loop {
            if cancel.is_cancelled() {
                agent.shutdown();
                return Ok(Posted::Cancelled);
            }
            let now = Instant::now();
            if now >= deadline {
                agent.shutdown();
                return Ok(Posted::Timeout);
            }
            match rx.recv_timeout((deadline - now).min(POLL)) {
                Ok(p) => return Ok(p),
                Err(mpsc::RecvTimeoutError::Timeout) => {}
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    return Ok(Posted::Broken(Broken::Cut))
                }
            }
        }
    }

    /// [`Self::post`] with one refresh and retry after a `401` and, when `reinit`, one new
    /// session and retry after a `404`.
    fn send(
        &self,
        body: &[u8],
        id: Option<u64>,
        deadline: Instant,
        cancel: &Cancel,
        reinit: bool,
    ) -> Result<Posted, CallError> {
        let (mut refreshed, mut renewed) = (false, !reinit);
        loop {
            let sent_sid = lock(&self.sh.state).session_id.clone();
            match self.post(body, id, deadline, cancel)? {
                Posted::Status(Status::Unauthorized) if !refreshed => {
                    refreshed = true;
                    if lock(&self.sh.auth).refresh_after_401() != Ok(true) {
                        return Err(CallError::Auth);
                    }
                }
                Posted::Status(Status::Unauthorized) => return Err(CallError::Auth),
                Posted::Status(Status::SessionGone) if !renewed => {
                    renewed = true;
                    self.renew(sent_sid.as_deref(), deadline, cancel)?;
                }
                other => return Ok(other),
            }
        }
    }

    /// A new MCP session after the server dropped `gone` (unless another call renewed it
    /// already).
    fn renew(
        &self,
        gone: Option<&str>,
        deadline: Instant,
        cancel: &Cancel,
    ) -> Result<(), CallError> {
        let _one = lock(&self.sh.reinit);
        if lock(&self.sh.state).session_id.as_deref() != gone {
            return Ok(());
        }
        self.initialize(deadline, cancel)
    }

    /// The handshake: `initialize` (keeping the answer's session id and revision), then
    /// `notifications/initialized`.
    pub fn initialize(&self, deadline: Instant, cancel: &Cancel) -> Result<(), CallError> {
        {
            let mut st = lock(&self.sh.state);
            st.session_id = None;
            st.version = None;
        }
        let init = self.call_once(
            "initialize",
            protocol::initialize_params(),
            deadline,
            cancel,
            false,
        )?;
        let (result, sid) = init;
        let version = http_wire::accepted_version(&result).ok_or(CallError::Unreachable)?;
        if sid
            .as_deref()
            .is_some_and(|s| !http_wire::valid_session_id(s))
        {
            return Err(CallError::Unreachable);
        }
        {
            let mut st = lock(&self.sh.state);
            st.session_id = sid;
            st.version = Some(version);
        }
        let note = notification("notifications/initialized", json!({}));
        match self.send(&note, None, deadline, cancel, false)? {
            Posted::Accepted => Ok(()),
            Posted::Cancelled => Err(CallError::Cancelled),
            Posted::Timeout => Err(CallError::Timeout),
            _ => Err(CallError::Unreachable),
        }
    }

    /// Sends a request and waits for its answer until `deadline` or `cancel`; on either it
    /// sends `notifications/cancelled` and returns at once.
    pub fn request(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
        cancel: &Cancel,
    ) -> Result<Value, CallError> {
        self.call_once(method, params, deadline, cancel, true)
            .map(|(v, _)| v)
    }

    fn call_once(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
        cancel: &Cancel,
        reinit: bool,
    ) -> Result<(Value, Option<String>), CallError> {
        let (id, body) = {
            let mut st = lock(&self.sh.state);
            if st.failed {
                return Err(CallError::Failed);
            }
            if st.closed {
                return Err(CallError::Exited);
            }
            let id = st
                .session
                .send_request(method, params, Some(deadline))
                .map_err(|_| CallError::Busy)?;
            (id, st.session.poll_write().unwrap_or_default())
        };
        let posted = self.send(&body, Some(id), deadline, cancel, reinit);
        lock(&self.sh.state).session.forget(id);
        match posted? {
            Posted::Answer(r, sid) => r.map(|v| (v, sid)).map_err(CallError::Rpc),
            Posted::Cancelled => Err(self.give_up(id, CallError::Cancelled)),
            Posted::Timeout => Err(self.give_up(id, CallError::Timeout)),
            Posted::Broken(Broken::Breach) => {
                lock(&self.sh.state).failed = true;
                Err(CallError::Failed)
            }
            Posted::Broken(Broken::Cut) | Posted::Status(_) | Posted::Accepted => {
                Err(CallError::Unreachable)
            }
        }
    }

    /// Tells the server a request was given up on, without waiting.
    fn give_up(&self, id: u64, why: CallError) -> CallError {
        let reason = if why == CallError::Timeout {
            "timeout"
        } else {
            "cancelled"
        };
        self.sh.detached(notification(
            "notifications/cancelled",
            cancelled_params(id, reason),
        ));
        why
    }

    /// Ends the MCP session by `deadline`: a `DELETE` with its session id (any answer, `405`
    /// included, is fine). Idempotent.
    pub fn shutdown(&self, deadline: Instant) {
        let sid = {
            let mut st = lock(&self.sh.state);
            st.closed = true;
            st.session_id.take()
        };
        let Some(sid) = sid else {
            return;
        };
        let Ok(headers) = self.sh.request_headers() else {
            return;
        };
        let mut req = agent(deadline).delete(&self.sh.url);
        for (k, v) in headers
            .iter()
            .filter(|(k, _)| k != "content-type" && k != "accept")
        {
            req = req.header(k.as_str(), v.as_str());
        }
        let req = req.header("mcp-session-id", sid.as_str());
        // Whatever the answer, the session is over for this side.
        let _ = req.call();
    }
}

/// A notification's bytes.
fn notification(method: &str, params: Value) -> Vec<u8> {
    json!({"jsonrpc": "2.0", "method": method, "params": params})
        .to_string()
        .into_bytes()
}

#[cfg(test)]
mod tests;
