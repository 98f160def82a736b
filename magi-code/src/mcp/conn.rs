//! One interface over both transports: the hub starts, calls and tears down a stdio child or
//! an HTTP endpoint alike.

use super::definition::Definition;
use super::http::HttpServer;
use super::protocol::{self, Malformed, RemoteTool};
use super::server::{CallError, Server};
use crate::util::cancel::Cancel;
use serde_json::{json, Value};
use std::path::Path;
use std::time::Instant;

/// A connected server of either transport.
pub trait Connection: Send + Sync {
    /// Sends a request and waits for its answer until `deadline` or `cancel`; on either it
    /// sends `notifications/cancelled` and returns at once.
    ///
    /// # Errors
    /// Why no result came.
    fn request(
        &self,
        method: &str,
        params: Value,
        deadline: Instant,
        cancel: &Cancel,
    ) -> Result<Value, CallError>;

    /// Tears the server down by `deadline`. Idempotent.
    fn shutdown(&self, deadline: Instant);
}

impl Connection for Server {
    fn request(&self, m: &str, p: Value, d: Instant, c: &Cancel) -> Result<Value, CallError> {
        Server::request(self, m, p, d, c)
    }

    fn shutdown(&self, deadline: Instant) {
        Server::shutdown(self, deadline);
    }
}

impl Connection for HttpServer {
    fn request(&self, m: &str, p: Value, d: Instant, c: &Cancel) -> Result<Value, CallError> {
        HttpServer::request(self, m, p, d, c)
    }

    fn shutdown(&self, deadline: Instant) {
        HttpServer::shutdown(self, deadline);
    }
}

/// One server's start: the connection if one was made (so it can be torn down), and its tools
/// if the handshake succeeded.
pub(super) type Started = (
    Option<Box<dyn Connection>>,
    Result<Vec<RemoteTool>, Malformed>,
);

/// Why one server could not be started, for people (`magi-code doctor`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cause {
    /// The command is not on `PATH` (or the path names nothing).
    NotFound,
    /// The command exists but could not be run (permissions, not an executable).
    NotRunnable,
    /// It exited (or closed its output) before it answered.
    Exited,
    /// It gave no answer by the deadline.
    TimedOut,
    /// It broke the protocol (garbage, a line over the bound, no accepted revision).
    Broke,
    /// It answered `initialize` or `tools/list` with an error.
    Refused(String),
    /// HTTP: no token to send (the `bearer_token_env` variable unset, or no saved sign-in).
    NoToken,
    /// HTTP: the server refused the authorization (`401`, and no refresh helped).
    Unauthorized,
    /// HTTP: unreachable, or a status other than 2xx.
    Unreachable,
}

/// What a start of one server gave: the connection (to tear down) and its tools, or why not.
pub(super) type Connected = (Option<Box<dyn Connection>>, Result<Vec<RemoteTool>, Cause>);

/// Connects, handshakes and lists the tools of one server by `deadline`.
pub(super) fn start_one(
    def: &Definition,
    cwd: &Path,
    hide: &[String],
    deadline: Instant,
    cancel: &Cancel,
) -> Started {
    let (conn, listed) = connect_one(def, cwd, hide, deadline, cancel);
    (conn, listed.map_err(|_| Malformed))
}

/// [`start_one`], saying why it failed.
pub(super) fn connect_one(
    def: &Definition,
    cwd: &Path,
    hide: &[String],
    deadline: Instant,
    cancel: &Cancel,
) -> Connected {
    let conn: Box<dyn Connection> = match def {
        Definition::Stdio(d) => {
            let srv = match Server::spawn(d, cwd, hide) {
                Ok(s) => s,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    return (None, Err(Cause::NotFound))
                }
                Err(_) => return (None, Err(Cause::NotRunnable)),
            };
            let init = stdio_handshake(&srv, deadline, cancel);
            let conn = Box::new(srv);
            if let Err(e) = init {
                return (Some(conn), Err(e));
            }
            conn
        }
        Definition::Http(d) => {
            // Only an approved server gets here: its token is read now (decisions.md 41).
            let auth = match super::http_auth::authorizer(d) {
                Ok(a) => a,
                Err(super::auth::AuthError::Refused) => return (None, Err(Cause::Unauthorized)),
                Err(_) => return (None, Err(Cause::NoToken)),
            };
            let Ok(srv) = HttpServer::new(d, auth) else {
                return (None, Err(Cause::Unreachable));
            };
            let init = srv.initialize(deadline, cancel);
            let conn = Box::new(srv);
            if let Err(e) = init {
                return (Some(conn), Err(cause(e)));
            }
            conn
        }
    };
    let mut why = Cause::Broke;
    let listed = collect_pages(|c| {
        conn.request("tools/list", protocol::list_params(c), deadline, cancel)
            .map_err(|e| {
                why = cause(e);
                Malformed
            })
    });
    (Some(conn), listed.map_err(|_| why))
}

/// The cause of a request's failure.
fn cause(e: CallError) -> Cause {
    match e {
        CallError::Rpc(r) => Cause::Refused(crate::util::text::bounded(&r.message, 200)),
        CallError::Timeout | CallError::Cancelled => Cause::TimedOut,
        CallError::Exited => Cause::Exited,
        CallError::Failed | CallError::Busy => Cause::Broke,
        CallError::Auth => Cause::Unauthorized,
        CallError::Unreachable => Cause::Unreachable,
    }
}

/// `initialize` (accepting the stdio revisions), then `notifications/initialized`.
fn stdio_handshake(srv: &Server, deadline: Instant, cancel: &Cancel) -> Result<(), Cause> {
    let init = srv
        .request(
            "initialize",
            protocol::initialize_params(),
            deadline,
            cancel,
        )
        .map_err(cause)?;
    protocol::accepted_version(&init).ok_or(Cause::Broke)?;
    srv.notify("notifications/initialized", json!({}));
    Ok(())
}

/// Follows `tools/list` pages through `fetch(cursor)` up to [`protocol::MAX_PAGES`] pages and
/// [`protocol::MAX_TOOLS`] tools (the rest are dropped).
pub fn collect_pages(
    mut fetch: impl FnMut(Option<&str>) -> Result<Value, Malformed>,
) -> Result<Vec<RemoteTool>, Malformed> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..protocol::MAX_PAGES {
        let page = fetch(cursor.as_deref())?;
        let (more, next) = protocol::parse_tools_page(&page)?;
        tools.extend(more);
        if tools.len() >= protocol::MAX_TOOLS {
            tools.truncate(protocol::MAX_TOOLS);
            return Ok(tools);
        }
        match next {
            Some(n) => cursor = Some(n),
            None => return Ok(tools),
        }
    }
    Ok(tools)
}
