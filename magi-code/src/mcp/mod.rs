//! The user's MCP servers over stdio or Streamable HTTP (`backend.md` "MCP servers" and "MCP
//! servers over HTTP"): started together at initialization, their tools offered as `mcp__<server>__<tool>`, called with a bound, and
//! torn down within the cleanup wait. See `docs/mcp.md`.

pub mod auth;
pub mod conn;
pub mod definition;
pub mod http;
pub mod http_auth;
pub mod http_wire;
pub mod jsonrpc;
pub mod oauth;
pub mod protocol;
pub mod server;
pub mod tokens;

pub use self::conn::collect_pages;
pub use self::conn::Cause;
use self::conn::{connect_one, start_one, Connection, Started};
pub use self::definition::Definition;
use self::protocol::{Malformed, McpResult, RemoteTool};
use self::server::CallError;
use crate::util::cancel::Cancel;
use crate::util::schema::{self, Validator};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Each server's bound for spawn, handshake and the whole `tools/list`.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Bound of one `tools/call`.
pub const CALL_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest offered name (the provider tool-name grammar).
pub const NAME_BYTES: usize = 64;
/// Teardown bound when startup gives up on the servers it started.
const ABORT_TEARDOWN: Duration = Duration::from_millis(1500);

/// The lowercase hex SHA-256 of a canonical definition: what `mcp.approved` lists.
#[must_use]
pub fn digest(canonical: &str) -> String {
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// The name a server's tool is offered under, None when it is longer than [`NAME_BYTES`] or
/// has a character outside `[A-Za-z0-9_-]`.
#[must_use]
pub fn offered_name(server: &str, tool: &str) -> Option<String> {
    let name = format!("mcp__{server}__{tool}");
    let valid = name.len() <= NAME_BYTES
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
    valid.then_some(name)
}

/// Why the servers could not all be started.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartError {
    /// One failed to spawn, failed the handshake or timed out.
    Unavailable,
    /// Startup was cancelled.
    Cancelled,
}

/// One offered MCP tool.
#[derive(Debug, Clone, PartialEq)]
pub struct HubTool {
    /// The offered name, `mcp__<server>__<tool>`.
    pub name: String,
    /// The server's name.
    pub server: String,
    /// The server's name for the tool.
    pub tool: String,
    /// Its description.
    pub description: String,
    /// Its input schema.
    pub input_schema: Value,
    /// That schema, compiled once when the tool was listed: every call is checked against it
    /// before its policy and approval.
    pub validator: Validator,
}

/// Why a call found its server gone.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Lost {
    /// It exited on its own (the caller emits `mcp_server_exited`).
    Exited,
    /// It broke the protocol and was killed (the caller emits `mcp_server_failed`).
    Failed,
    /// HTTP: it refused the authorization mid-session (the caller emits `mcp_auth_required`).
    AuthRequired,
}

/// What one call produced.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CallOutcome {
    /// The result for the model.
    pub result: McpResult,
    /// Whether, and why, the server was gone.
    pub lost: Option<Lost>,
}

/// The connected servers of one child and their offered tools.
pub struct McpHub {
    servers: HashMap<String, Box<dyn Connection>>,
    tools: Vec<HubTool>,
    /// Tools the servers listed that are not offered, as `<server>/<tool>`.
    left_out: Vec<String>,
    /// Whether a run already reported `left_out`.
    reported: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for McpHub {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpHub")
            .field("servers", &self.servers.len())
            .field("tools", &self.tools.len())
            .finish()
    }
}

/// Longest tool name shown in the left-out report; longer ones end in `…`.
const SHOWN_NAME_BYTES: usize = 80;

/// How a left-out tool is shown: `<server>/<tool>`, the tool name cut to [`SHOWN_NAME_BYTES`].
fn shown(server: &str, tool: &str) -> String {
    let cut = crate::util::text::cut(tool, SHOWN_NAME_BYTES);
    let more = if cut.len() < tool.len() { "…" } else { "" };
    format!("{server}/{cut}{more}")
}

/// Offered tools of every server, and the tools left out (as `<server>/<tool>`, in listing
/// order): names longer than the bound or with a character outside the grammar, and tools
/// whose input schema does not compile (`util::schema`), first; then colliding ones
/// (decisions.md 37).
fn offer(listed: Vec<(String, Vec<RemoteTool>)>) -> (Vec<HubTool>, Vec<String>) {
    let mut left_out = Vec::new();
    let mut all = Vec::new();
    for (server, tools) in listed {
        for t in tools {
            // A schema that does not compile (or is over its bound) could not check a call.
            let (Some(name), Ok(validator)) = (
                offered_name(&server, &t.name),
                schema::compile(&t.input_schema),
            ) else {
                left_out.push(shown(&server, &t.name));
                continue;
            };
            all.push(HubTool {
                name,
                server: server.clone(),
                tool: t.name,
                description: t.description,
                input_schema: t.input_schema,
                validator,
            });
        }
    }
    let mut count: HashMap<String, usize> = HashMap::new();
    for t in &all {
        *count.entry(t.name.clone()).or_default() += 1;
    }
    let (kept, colliding): (Vec<HubTool>, Vec<HubTool>) =
        all.into_iter().partition(|t| count[&t.name] == 1);
    left_out.extend(colliding.iter().map(|t| shown(&t.server, &t.tool)));
    (kept, left_out)
}

impl McpHub {
    /// Starts every server of `defs` at once, each within [`START_TIMEOUT`]; on any failure
    /// or cancellation every started one is torn down.
    pub fn start_all(
        defs: &[Definition],
        cwd: &Path,
        hide: &[String],
        cancel: &Cancel,
    ) -> Result<Self, StartError> {
        Self::start_by(defs, cwd, hide, Instant::now() + START_TIMEOUT, cancel)
    }

    /// [`Self::start_all`] with the handshake's deadline as data, so that its bound is tested
    /// without waiting for it.
    pub fn start_by(
        defs: &[Definition],
        cwd: &Path,
        hide: &[String],
        deadline: Instant,
        cancel: &Cancel,
    ) -> Result<Self, StartError> {
        let abort = Arc::new(Cancel::default());
        let a = abort.clone();
        let _hook = cancel.on_cancel(move || a.cancel());
        let results: Vec<Started> = std::thread::scope(|scope| {
            let handles: Vec<_> = defs
                .iter()
                .map(|d| {
                    let abort = &abort;
                    scope.spawn(move || {
                        let r = start_one(d, cwd, hide, deadline, abort);
                        if r.1.is_err() {
                            // One failure fails startup: stop waiting on the others.
                            abort.cancel();
                        }
                        r
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or((None, Err(Malformed))))
                .collect()
        });
        let failed = cancel.is_cancelled() || results.iter().any(|r| r.1.is_err());
        let mut servers = HashMap::new();
        let mut listed = Vec::new();
        for (def, (srv, tools)) in defs.iter().zip(results) {
            if let Some(s) = srv {
                servers.insert(def.name().to_owned(), s);
            }
            listed.push((def.name().to_owned(), tools.unwrap_or_default()));
        }
        let (tools, left_out) = offer(listed);
        let hub = Self {
            servers,
            tools,
            left_out,
            reported: std::sync::atomic::AtomicBool::new(false),
        };
        if failed {
            hub.shutdown(Instant::now() + ABORT_TEARDOWN);
            return Err(if cancel.is_cancelled() {
                StartError::Cancelled
            } else {
                StartError::Unavailable
            });
        }
        Ok(hub)
    }

    /// The offered tools, in server-name then listing order.
    #[must_use]
    pub fn tools(&self) -> &[HubTool] {
        &self.tools
    }

    /// The tools listed but not offered, as `<server>/<tool>`.
    #[must_use]
    pub fn left_out(&self) -> &[String] {
        &self.left_out
    }

    /// The summary of the `mcp_tools_left_out` diagnostic, the first time it is asked for
    /// and only when some tool was left out: there is no `magi-code mcp list` yet, so the
    /// child's first run is where the user learns of them.
    #[must_use]
    pub fn left_out_report(&self) -> Option<String> {
        if self.left_out.is_empty()
            || self
                .reported
                .swap(true, std::sync::atomic::Ordering::SeqCst)
        {
            return None;
        }
        Some(format!(
            "{} MCP tool{} not offered (a name outside [A-Za-z0-9_-] or over 64 bytes as \
             mcp__<server>__<tool>, an input schema that does not compile, or colliding): {}",
            self.left_out.len(),
            if self.left_out.len() == 1 {
                " is"
            } else {
                "s are"
            },
            self.left_out.join(", ")
        ))
    }

    /// The offered tool called `name`.
    #[must_use]
    pub fn find(&self, name: &str) -> Option<&HubTool> {
        self.tools.iter().find(|t| t.name == name)
    }

    /// Calls the offered tool `name` with `arguments`, within [`CALL_TIMEOUT`], returning at
    /// once on `cancel`.
    pub fn call(&self, name: &str, arguments: &Value, cancel: &Cancel) -> CallOutcome {
        let fail = |text: &str, lost| CallOutcome {
            result: McpResult {
                ok: false,
                text: text.to_owned(),
            },
            lost,
        };
        let Some((t, srv)) = self
            .find(name)
            .and_then(|t| Some((t, self.servers.get(&t.server)?)))
        else {
            return fail("unknown tool", None);
        };
        let params = protocol::call_params(&t.tool, arguments);
        match srv.request("tools/call", params, Instant::now() + CALL_TIMEOUT, cancel) {
            Ok(v) => CallOutcome {
                result: protocol::call_result(&v),
                lost: None,
            },
            Err(CallError::Exited) => fail("the MCP server has exited", Some(Lost::Exited)),
            Err(CallError::Failed) => fail(
                "the MCP server broke the protocol and was stopped",
                Some(Lost::Failed),
            ),
            Err(CallError::Timeout) => fail("the MCP server did not answer within 120 s", None),
            Err(CallError::Cancelled) => fail("cancelled", None),
            Err(CallError::Busy) => fail("too many MCP calls in flight", None),
            Err(CallError::Auth) => fail(
                "the MCP server refused the authorization (see `magi-code mcp login`)",
                Some(Lost::AuthRequired),
            ),
            Err(CallError::Unreachable) => fail(
                "the MCP server could not be reached or its answer broke off",
                None,
            ),
            Err(CallError::Rpc(e)) => fail(
                &format!(
                    "MCP error {}: {}",
                    e.code,
                    crate::util::text::bounded(&e.message, 1024)
                ),
                None,
            ),
        }
    }

    /// Starts each server of `defs` as [`Self::start_all`] would, all at once and each by
    /// `deadline`, then tears it down: how many tools each listed, or why it could not start
    /// (`magi-code doctor`).
    #[must_use]
    pub fn probe(
        defs: &[Definition],
        cwd: &Path,
        hide: &[String],
        deadline: Instant,
    ) -> Vec<Result<usize, Cause>> {
        let cancel = Cancel::default();
        std::thread::scope(|scope| {
            let handles: Vec<_> = defs
                .iter()
                .map(|d| {
                    let cancel = &cancel;
                    scope.spawn(move || {
                        let (conn, listed) = connect_one(d, cwd, hide, deadline, cancel);
                        if let Some(c) = conn {
                            c.shutdown(Instant::now() + ABORT_TEARDOWN);
                        }
                        listed.map(|t| t.len())
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().unwrap_or(Err(Cause::Broke)))
                .collect()
        })
    }

    /// Tears every server down at once, all by `deadline`.
    pub fn shutdown(&self, deadline: Instant) {
        std::thread::scope(|scope| {
            for s in self.servers.values() {
                scope.spawn(move || s.shutdown(deadline));
            }
        });
    }
}

#[cfg(test)]
mod tests;
