//! `magi-code acp`: an Agent Client Protocol (v1) agent on stdin/stdout, built as a client of
//! this very backend: each ACP session is one `magi-code serve --stdio` child in that
//! session's cwd, driven through [`crate::client`], so every promise of the protocol holds
//! behind it (durable sessions, approvals with expiry, MCP, Code Mode, subagents).
//!
//! The loop here reads newline-delimited JSON-RPC ([`rpc`], sans IO), answers `initialize`
//! itself, and routes the rest: `session/new` and `session/load` start a session thread
//! ([`session`]), prompts, cancels and the editor's permission answers go to theirs. One
//! writer thread owns stdout, so every line goes out whole and in order. EOF ends every
//! session (each child gets `shutdown`) and the adapter exits 0; a child never outlives it.

pub mod config;
pub mod map;
pub mod rpc;
pub mod session;

use rpc::{code, Incoming, Lines, Piece};
use serde_json::{json, Value};
use session::{Cmd, Ctx, Start};
use std::collections::HashMap;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::sync::mpsc::{self, Sender, SyncSender};
use std::thread::JoinHandle;

/// Most sessions one adapter runs at once (each is a backend child).
pub const MAX_SESSIONS: usize = 16;
/// Lines waiting for stdout before a session waits for room.
const OUT_QUEUE: usize = 256;

/// A running session: its command channel and its thread.
struct Handle {
    cmds: Sender<Cmd>,
    gate: session::Gate,
    thread: JoinHandle<()>,
}

/// The adapter's state between lines.
struct Adapter {
    out: SyncSender<String>,
    exe: PathBuf,
    initialized: bool,
    sessions: HashMap<String, Handle>,
}

/// Runs the adapter on the process's stdin and stdout; the exit code.
#[must_use]
pub fn acp() -> i32 {
    let Ok(exe) = std::env::current_exe() else {
        return 1;
    };
    let (out, lines) = mpsc::sync_channel::<String>(OUT_QUEUE);
    let writer = std::thread::Builder::new()
        .name("acp-stdout".to_owned())
        .spawn(move || {
            let mut stdout = std::io::stdout().lock();
            for line in lines {
                let ok = stdout
                    .write_all(line.as_bytes())
                    .and_then(|()| stdout.write_all(b"\n"))
                    .and_then(|()| stdout.flush());
                if ok.is_err() {
                    break;
                }
            }
        });
    let Ok(writer) = writer else { return 1 };
    let mut a = Adapter {
        out,
        exe,
        initialized: false,
        sessions: HashMap::new(),
    };
    a.read(std::io::stdin().lock());
    // Every session at once: each ends its turn and shuts its child down; then the joins.
    let ending: Vec<JoinHandle<()>> = a
        .sessions
        .drain()
        .map(|(_, h)| {
            session::deliver(&h.gate, &h.cmds, Cmd::Close);
            // Dropped so a session that took `Close` mid-turn sees the end of its channel.
            drop(h.cmds);
            h.thread
        })
        .collect();
    for thread in ending {
        let _ = thread.join();
    }
    drop(a.out);
    let _ = writer.join();
    0
}

impl Adapter {
    /// Reads lines until EOF (or a read error), handling each.
    fn read(&mut self, mut input: impl Read) {
        let mut lines = Lines::default();
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match input.read(&mut buf) {
                Ok(0) | Err(_) => return,
                Ok(n) => n,
            };
            for piece in lines.push(&buf[..n]) {
                match piece {
                    Piece::Line(l) if l.iter().all(u8::is_ascii_whitespace) => {}
                    Piece::Line(l) => self.message(rpc::parse(&l)),
                    Piece::TooLong => {
                        let msg = "a message is at most 4 MiB";
                        self.send(rpc::error(&Value::Null, code::INVALID_REQUEST, msg));
                    }
                }
            }
        }
    }

    fn send(&self, line: String) {
        let _ = self.out.send(line);
    }

    fn message(&mut self, m: Incoming) {
        match m {
            Incoming::Invalid { id, code } => {
                let msg = if code == code::PARSE {
                    "not JSON"
                } else {
                    "not a JSON-RPC 2.0 request"
                };
                self.send(rpc::error(&id, code, msg));
            }
            Incoming::Request { id, method, params } => self.request(&id, &method, params),
            Incoming::Notification { method, params } => {
                if method == "session/cancel" {
                    if let Some(h) = params["sessionId"]
                        .as_str()
                        .and_then(|s| self.sessions.get(s))
                    {
                        session::deliver(&h.gate, &h.cmds, Cmd::Cancel);
                    }
                }
            }
            Incoming::Response { id, outcome } => {
                let Some(id) = id.as_str() else { return };
                let sid = session::session_of_request(id);
                if let Some(h) = sid.and_then(|s| self.sessions.get(s)) {
                    let cmd = Cmd::Permission {
                        id: id.to_owned(),
                        outcome,
                    };
                    session::deliver(&h.gate, &h.cmds, cmd);
                }
            }
        }
    }

    fn request(&mut self, id: &Value, method: &str, params: Value) {
        // A session whose thread ended (its backend stopped) is gone: a prompt to it finds no
        // session, and it can be loaded again.
        self.sessions.retain(|_, h| !h.thread.is_finished());
        if method == "initialize" {
            return self.initialize(id, &params);
        }
        if !self.initialized {
            let msg = "initialize first";
            return self.send(rpc::error(id, code::INVALID_REQUEST, msg));
        }
        match method {
            "session/new" => self.start(id, &params, false),
            "session/load" => self.start(id, &params, true),
            "session/prompt" => {
                let Some(h) = self.session(id, &params) else {
                    return;
                };
                let cmd = Cmd::Prompt {
                    id: id.clone(),
                    prompt: params["prompt"].clone(),
                };
                if !session::deliver(&h.gate, &h.cmds, cmd) {
                    self.ended(id, &params);
                }
            }
            "session/set_config_option" => {
                let Some(h) = self.session(id, &params) else {
                    return;
                };
                let (Some(config), Some(value)) =
                    (params["configId"].as_str(), params["value"].as_str())
                else {
                    let msg = "configId and a string value are required";
                    return self.send(rpc::error(id, code::INVALID_PARAMS, msg));
                };
                let cmd = Cmd::SetConfig {
                    id: id.clone(),
                    config: config.to_owned(),
                    value: value.to_owned(),
                };
                if !session::deliver(&h.gate, &h.cmds, cmd) {
                    self.ended(id, &params);
                }
            }
            _ => self.send(rpc::error(id, code::METHOD_NOT_FOUND, "no such method")),
        }
    }

    /// A session whose thread is gone (its child stopped, or it failed): the request gets an
    /// error and the session is dropped, so the editor can load it again.
    fn ended(&mut self, id: &Value, params: &Value) {
        let msg = "the session's backend ended; load the session again";
        self.send(rpc::error(id, code::INTERNAL, msg));
        if let Some(h) = params["sessionId"]
            .as_str()
            .and_then(|s| self.sessions.remove(s))
        {
            let _ = h.thread.join();
        }
    }

    /// The session `params.sessionId` names, or `None` after answering that there is none.
    fn session(&self, id: &Value, params: &Value) -> Option<&Handle> {
        let found = params["sessionId"]
            .as_str()
            .and_then(|s| self.sessions.get(s));
        if found.is_none() {
            let msg = "no such session in this agent (load it first)";
            self.send(rpc::error(id, code::RESOURCE_NOT_FOUND, msg));
        }
        found
    }

    fn initialize(&mut self, id: &Value, params: &Value) {
        if self.initialized {
            let msg = "initialize was already called";
            return self.send(rpc::error(id, code::INVALID_REQUEST, msg));
        }
        if !params["protocolVersion"].is_u64() {
            let msg = "protocolVersion must be an integer";
            return self.send(rpc::error(id, code::INVALID_PARAMS, msg));
        }
        self.initialized = true;
        let result = json!({
            "protocolVersion": 1,
            "agentCapabilities": {
                "loadSession": true,
                "promptCapabilities": {"image": false, "audio": false, "embeddedContext": true},
                "mcpCapabilities": {"http": false, "sse": false}
            },
            "authMethods": [],
            "agentInfo": {"name": "magi-code", "version": env!("CARGO_PKG_VERSION")}
        });
        self.send(rpc::response_line(id, result));
    }

    /// `session/new` or (`load`) `session/load`: a session thread whose child answers.
    fn start(&mut self, id: &Value, params: &Value, load: bool) {
        let cwd = params["cwd"].as_str();
        let servers = params["mcpServers"].is_array();
        let sid = params["sessionId"].as_str();
        let (Some(cwd), true) = (cwd, servers) else {
            let msg = "cwd (an absolute path) and mcpServers (an array) are required";
            return self.send(rpc::error(id, code::INVALID_PARAMS, msg));
        };
        // A session that is ending (its gate closed) is waited for, so it can be loaded again.
        let ending = sid.and_then(|s| self.sessions.get(s)).is_some_and(|h| {
            !*h.gate
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        });
        if let (true, Some(h)) = (ending, sid.and_then(|s| self.sessions.remove(s))) {
            let _ = h.thread.join();
        }
        let start = match (load, sid) {
            (false, _) => Start::New,
            (true, Some(s)) if !self.sessions.contains_key(s) => Start::Load(s.to_owned()),
            (true, Some(_)) => {
                let msg = "that session is already loaded in this agent";
                return self.send(rpc::error(id, code::INVALID_REQUEST, msg));
            }
            (true, None) => {
                let msg = "sessionId is required";
                return self.send(rpc::error(id, code::INVALID_PARAMS, msg));
            }
        };
        if self.sessions.len() >= MAX_SESSIONS {
            let msg = "this agent runs at most 16 sessions";
            return self.send(rpc::error(id, code::INTERNAL, msg));
        }
        let ctx = Ctx {
            out: self.out.clone(),
            exe: self.exe.clone(),
            cwd: PathBuf::from(cwd),
        };
        let (cmds, rx) = mpsc::channel();
        let (ready_tx, ready) = mpsc::channel();
        let gate: session::Gate = std::sync::Arc::new(std::sync::Mutex::new(true));
        let (id2, gate2) = (id.clone(), gate.clone());
        let thread = std::thread::Builder::new()
            .name("acp-session".to_owned())
            .spawn(move || session::run(ctx, start, id2, rx, ready_tx, gate2));
        let Ok(thread) = thread else {
            return self.send(rpc::error(id, code::INTERNAL, "no thread for the session"));
        };
        // The session answered its request (after the replay, for a load) before this.
        match ready.recv() {
            Ok(Some(sid)) => {
                self.sessions.insert(sid, Handle { cmds, gate, thread });
            }
            _ => {
                let _ = thread.join();
            }
        }
    }
}
