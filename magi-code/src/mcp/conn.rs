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

/// Connects, handshakes and lists the tools of one server by `deadline`.
pub(super) fn start_one(
    def: &Definition,
    cwd: &Path,
    hide: &[String],
    deadline: Instant,
    cancel: &Cancel,
) -> Started {
    let conn: Box<dyn Connection> = match def {
        Definition::Stdio(d) => {
            let Ok(srv) = Server::spawn(d, cwd, hide) else {
                return (None, Err(Malformed));
            };
            let init = stdio_handshake(&srv, deadline, cancel);
            let conn = Box::new(srv);
            if init.is_err() {
                return (Some(conn), Err(Malformed));
            }
            conn
        }
        Definition::Http(d) => {
            // Only an approved server gets here: its token is read now (decisions.md 41).
            let Ok(auth) = super::http_auth::authorizer(d) else {
                return (None, Err(Malformed));
            };
            let Ok(srv) = HttpServer::new(d, auth) else {
                return (None, Err(Malformed));
            };
            let init = srv.initialize(deadline, cancel);
            let conn = Box::new(srv);
            if init.is_err() {
                return (Some(conn), Err(Malformed));
            }
            conn
        }
    };
    let listed = collect_pages(|c| {
        conn.request("tools/list", protocol::list_params(c), deadline, cancel)
            .map_err(|_| Malformed)
    });
    (Some(conn), listed)
}

/// `initialize` (accepting the stdio revisions), then `notifications/initialized`.
fn stdio_handshake(srv: &Server, deadline: Instant, cancel: &Cancel) -> Result<(), Malformed> {
    let init = srv
        .request(
            "initialize",
            protocol::initialize_params(),
            deadline,
            cancel,
        )
        .map_err(|_| Malformed)?;
    protocol::accepted_version(&init).ok_or(Malformed)?;
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
