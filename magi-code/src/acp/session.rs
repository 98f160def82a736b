//! One ACP session: a thread owning one `magi-code serve --stdio` child (in the session's
//! cwd, driven through the typed client) that creates or opens the backend session, replays
//! a loaded one, and runs each prompt as a turn, turning its events into `session/update`s
//! and its approvals into `session/request_permission` requests.

use super::config;
use super::map;
use super::rpc::{self, code};
use crate::client::{Client, ClientError, Turn, Update};
use crate::wire::events::ApprovalRequestedData;
use crate::wire::requests::{
    ApprovalAnswerParams, EmptyParams, HistoryPageParams, SessionOpenParams, TurnCancelParams,
};
use crate::wire::results::{HistoryPageResult, SessionResult};
use crate::wire::{Call, Event};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender, SyncSender};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

/// The backend capabilities the adapter uses.
const CAPS: [&str; 12] = [
    "session.create",
    "model.catalog",
    "selection.set",
    "session.open",
    "history.page",
    "turn.start",
    "turn.cancel",
    "approval.answer",
    "shutdown",
    "status",
    "tool.cards",
    "tool.details",
];
/// How long one wait for a backend event lasts while a turn runs (commands are read between).
const TICK: Duration = Duration::from_millis(10);
/// How long the child gets to answer `shutdown` and exit before it is killed.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);
/// Most `history.page` pages read to replay a session (more than a snapshot can hold).
const HISTORY_PAGES: usize = 2_048;

/// What the adapter's loop asks of a session.
#[derive(Debug)]
pub enum Cmd {
    /// `session/prompt` request `id` with the prompt's blocks.
    Prompt {
        /// The request's ID.
        id: Value,
        /// `params.prompt`.
        prompt: Value,
    },
    /// `session/cancel`.
    Cancel,
    /// `session/set_config_option` request `id`.
    SetConfig {
        /// The request's ID.
        id: Value,
        /// `params.configId`.
        config: String,
        /// `params.value`.
        value: String,
    },
    /// The editor's answer to permission request `id`.
    Permission {
        /// The adapter's request ID.
        id: String,
        /// `Ok(result)` or `Err(error)`.
        outcome: Result<Value, Value>,
    },
    /// The adapter is ending: shut the child down.
    Close,
}

/// How a session starts.
pub enum Start {
    /// `session/new`: a new backend session.
    New,
    /// `session/load` of this backend session ID.
    Load(String),
}

/// Where the session's lines go and who it is.
pub struct Ctx {
    /// The writer's channel.
    pub out: SyncSender<String>,
    /// The binary to run as `serve --stdio`.
    pub exe: PathBuf,
    /// The session's workspace.
    pub cwd: PathBuf,
}

impl Ctx {
    fn send(&self, line: String) {
        // The writer is gone only when the adapter is ending.
        let _ = self.out.send(line);
    }

    fn update(&self, sid: &str, update: Value) {
        self.send(rpc::notification(
            "session/update",
            json!({"sessionId": sid, "update": update}),
        ));
    }
}

/// Whether a session still takes commands: the adapter sends only while it holds the lock and
/// the gate is open, and the session closes it (answering what was queued) before it ends, so
/// no request is ever dropped unanswered.
pub type Gate = Arc<Mutex<bool>>;

/// Sends `cmd` through `gate`; false when the session no longer takes commands.
pub fn deliver(gate: &Gate, cmds: &Sender<Cmd>, cmd: Cmd) -> bool {
    let open = gate.lock().unwrap_or_else(PoisonError::into_inner);
    *open && cmds.send(cmd).is_ok()
}

/// Closes `gate` and answers every request still queued: the session is ending.
fn close(gate: &Gate, cmds: &Receiver<Cmd>, ctx: &Ctx) {
    let mut open = gate.lock().unwrap_or_else(PoisonError::into_inner);
    *open = false;
    while let Ok(cmd) = cmds.try_recv() {
        if let Cmd::Prompt { id, .. } | Cmd::SetConfig { id, .. } = cmd {
            let msg = "the session's backend ended; load the session again";
            ctx.send(rpc::error(&id, code::INTERNAL, msg));
        }
    }
}

/// Runs one session until `Close` or the adapter's end: answers request `id` (the
/// `session/new` or `session/load`) once the backend session exists, reporting the session
/// ID through `ready` (`None` when it failed); `gate` closes before it ends.
pub fn run(
    ctx: Ctx,
    start: Start,
    id: Value,
    cmds: Receiver<Cmd>,
    ready: Sender<Option<String>>,
    gate: Gate,
) {
    let Some((mut client, sid)) = open(&ctx, &start, &id) else {
        let _ = ready.send(None);
        return;
    };
    let _ = ready.send(Some(sid.clone()));
    let mut s = Session {
        ctx,
        client,
        sid,
        next: 0,
    };
    while let Ok(cmd) = cmds.recv() {
        match cmd {
            Cmd::Prompt { id, prompt } => {
                // A panic is a bug: the request still gets an answer, and the session ends.
                let gone = catch_unwind(AssertUnwindSafe(|| s.prompt(&id, &prompt, &cmds)))
                    .unwrap_or_else(|_| s.failed(&id));
                if gone {
                    // The backend is gone: the session ends, and may be loaded again.
                    break;
                }
            }
            Cmd::SetConfig { id, config, value } => {
                let set = catch_unwind(AssertUnwindSafe(|| s.set_config(&id, &config, &value)));
                if set.is_err() && s.failed(&id) {
                    break;
                }
            }
            Cmd::Close => break,
            // Nothing runs: a cancel or a late answer has nothing to act on.
            Cmd::Cancel | Cmd::Permission { .. } => {}
        }
    }
    close(&gate, &cmds, &s.ctx);
    client = s.client;
    client.shutdown(SHUTDOWN_WAIT);
}

/// Starts the child and creates or opens the backend session, answering request `id`; the
/// client and session ID, or `None` after an error answer.
fn open(ctx: &Ctx, start: &Start, id: &Value) -> Option<(Client, String)> {
    let fail = |code: i64, message: &str| {
        ctx.send(rpc::error(id, code, message));
        None
    };
    if !ctx.cwd.is_absolute() || !ctx.cwd.is_dir() {
        return fail(
            code::INVALID_PARAMS,
            "cwd must be an absolute path to a folder",
        );
    }
    let mut cmd = Client::command(&ctx.exe);
    cmd.current_dir(&ctx.cwd)
        .stderr(std::process::Stdio::null());
    crate::util::proc::die_with_parent(&mut cmd);
    let Ok(mut client) = Client::spawn(cmd) else {
        return fail(code::INTERNAL, "the backend could not be started");
    };
    if let Err(e) = client.initialize(&CAPS) {
        client.shutdown(SHUTDOWN_WAIT);
        let why = format!(
            "the backend did not start: {} (run `magi-code doctor`)",
            refusal(&e)
        );
        return fail(code::INTERNAL, &why);
    }
    let call = match start {
        Start::New => Call::SessionCreate(EmptyParams {}),
        Start::Load(sid) => Call::SessionOpen(SessionOpenParams {
            session_id: sid.clone(),
        }),
    };
    let r: SessionResult = match client.call(call) {
        Ok(r) => r,
        Err(e) => {
            client.shutdown(SHUTDOWN_WAIT);
            let code = match e.code() {
                Some("session_missing") => code::RESOURCE_NOT_FOUND,
                _ => code::INTERNAL,
            };
            return fail(code, &refusal(&e));
        }
    };
    let options = config::read(&mut client).map_or(Value::Null, |o| o.describe());
    match start {
        Start::New => {
            let result = json!({"sessionId": r.session_id, "configOptions": options});
            ctx.send(rpc::response_line(id, result));
        }
        Start::Load(_) => {
            replay(ctx, &mut client, &r);
            ctx.send(rpc::response_line(id, json!({"configOptions": options})));
        }
    }
    Some((client, r.session_id))
}

/// A client error in words with its code.
fn refusal(e: &ClientError) -> String {
    match e.code() {
        Some(code) => crate::client::words::said(code),
        None => "the backend stopped answering".to_owned(),
    }
}

/// Sends the saved conversation of `r` as `session/update`s, every page.
fn replay(ctx: &Ctx, client: &mut Client, r: &SessionResult) {
    let mut cursor = None;
    let mut entries = Vec::new();
    for _ in 0..HISTORY_PAGES {
        let params = HistoryPageParams {
            session_id: r.session_id.clone(),
            revision: r.revision.clone(),
            cursor,
        };
        let Ok(page) = client.call::<HistoryPageResult>(Call::HistoryPage(params)) else {
            break;
        };
        entries.extend(page.entries);
        match page.next_cursor {
            Some(c) if !page.complete => cursor = Some(c),
            _ => break,
        }
    }
    for u in map::replay(&entries, &ctx.cwd) {
        ctx.update(&r.session_id, u);
    }
}

/// An attached session between prompts.
struct Session {
    ctx: Ctx,
    client: Client,
    sid: String,
    /// The next permission request's number.
    next: u64,
}

/// What one running turn keeps.
#[derive(Default)]
struct Live {
    /// Running tool calls, in start order (a permission is the last one's).
    running: Vec<String>,
    /// Tools whose location was sent.
    located: Vec<String>,
    /// The last proposed diff, by activity.
    diff: Option<(String, String)>,
    /// Permission requests out, by ID: the approval each answers.
    asked: HashMap<String, (ApprovalRequestedData, String)>,
    /// `session/cancel` came.
    cancelled: bool,
    /// The run's `step_limit` diagnostic came.
    step_limit: bool,
}

impl Session {
    /// Answers request `id` after a panic while serving it; true (the session must end).
    fn failed(&self, id: &Value) -> bool {
        let msg = "the agent failed while serving this request; load the session again";
        self.ctx.send(rpc::error(id, code::INTERNAL, msg));
        true
    }

    /// `session/set_config_option`: the model or the effort through `selection.set`, then
    /// every option as it now stands.
    fn set_config(&mut self, id: &Value, config: &str, value: &str) {
        let Some(now) = config::read(&mut self.client) else {
            let msg = "the backend did not say its selection";
            return self.ctx.send(rpc::error(id, code::INTERNAL, msg));
        };
        if let Err((code, why)) = now.set(&mut self.client, &self.sid, config, value) {
            return self.ctx.send(rpc::error(id, code, &why));
        }
        let options = config::read(&mut self.client).map_or(Value::Null, |o| o.describe());
        self.ctx
            .send(rpc::response_line(id, json!({"configOptions": options})));
    }

    /// Runs prompt request `id` as a turn to its end, reading commands between events; true
    /// when the backend is gone (it stopped answering or broke its protocol), which ends the
    /// session.
    fn prompt(&mut self, id: &Value, prompt: &Value, cmds: &Receiver<Cmd>) -> bool {
        let fail = |s: &Self, code: i64, msg: &str| s.ctx.send(rpc::error(id, code, msg));
        let text = match map::prompt_text(prompt) {
            Ok(t) => t,
            Err(e) => {
                fail(self, code::INVALID_PARAMS, e.message());
                return false;
            }
        };
        let mut turn = match self.client.start_turn(&self.sid, &text) {
            Ok(t) => t,
            Err(e) => {
                fail(self, code::INTERNAL, &refusal(&e));
                return e.code().is_none();
            }
        };
        let mut live = Live::default();
        loop {
            if let Some(end) = self.commands(cmds, &turn, &mut live) {
                fail(self, code::INTERNAL, end);
                return false;
            }
            let e = match self.client.next_event(TICK) {
                Ok(Some(e)) => e,
                Ok(None) => continue,
                Err(_) => {
                    fail(self, code::INTERNAL, "the backend stopped during the turn");
                    return true;
                }
            };
            let Ok(update) = turn.apply(&e) else {
                let msg = "the backend broke its protocol during the turn";
                fail(self, code::INTERNAL, msg);
                return true;
            };
            if self.event(&e, update, &mut live) {
                break;
            }
        }
        self.withdraw(&mut live, None);
        let Some(end) = turn.finished() else {
            return false;
        };
        let outcome = map::word(&end.outcome);
        let answer = if live.cancelled && outcome != "completed" {
            Ok("cancelled")
        } else {
            map::stop_reason(&outcome, end.error_code.as_deref(), live.step_limit)
        };
        match answer {
            Ok(reason) => self
                .ctx
                .send(rpc::response_line(id, json!({"stopReason": reason}))),
            Err(why) => fail(self, code::INTERNAL, &why),
        }
        false
    }

    /// Reads the commands that came while a turn runs; `Some(message)` when the adapter is
    /// closing and the prompt must end.
    fn commands(
        &mut self,
        cmds: &Receiver<Cmd>,
        turn: &Turn,
        live: &mut Live,
    ) -> Option<&'static str> {
        loop {
            let cmd = match cmds.recv_timeout(Duration::ZERO) {
                Ok(c) => c,
                Err(RecvTimeoutError::Timeout) => return None,
                Err(RecvTimeoutError::Disconnected) => return Some("the adapter is closing"),
            };
            let run_id = turn.run_id().to_owned();
            match cmd {
                Cmd::Cancel => {
                    live.cancelled = true;
                    let params = TurnCancelParams {
                        session_id: self.sid.clone(),
                        run_id,
                    };
                    let _ = self.client.send_detached(Call::TurnCancel(params));
                }
                Cmd::Permission { id, outcome } => {
                    let Some((a, _)) = live.asked.remove(&id) else {
                        continue;
                    };
                    let allow = outcome.is_ok_and(|r| {
                        r["outcome"]["outcome"] == "selected"
                            && r["outcome"]["optionId"] == "allow-once"
                    });
                    let params = ApprovalAnswerParams {
                        session_id: self.sid.clone(),
                        run_id: a.run_id,
                        approval_id: a.approval_id,
                        allow,
                    };
                    // A late answer (the request expired or the turn ended) is stale: no harm.
                    let _ = self.client.send_detached(Call::ApprovalAnswer(params));
                }
                Cmd::Prompt { id, .. } | Cmd::SetConfig { id, .. } => {
                    let msg = "a prompt is running in this session";
                    self.ctx.send(rpc::error(&id, code::INVALID_REQUEST, msg));
                }
                Cmd::Close => {
                    let params = TurnCancelParams {
                        session_id: self.sid.clone(),
                        run_id,
                    };
                    let _ = self.client.send_detached(Call::TurnCancel(params));
                    return Some("the adapter is closing");
                }
            }
        }
    }

    /// Shows one event of the turn; true at `run.finished`.
    fn event(&mut self, e: &Event, update: Update, live: &mut Live) -> bool {
        let sid = self.sid.clone();
        match update {
            Update::Delta { text, .. } => self
                .ctx
                .update(&sid, map::chunk("agent_message_chunk", &text)),
            Update::Reconciled { text, shown, .. } => match text.strip_prefix(shown.as_str()) {
                Some("") => {}
                Some(rest) => self
                    .ctx
                    .update(&sid, map::chunk("agent_message_chunk", rest)),
                // Deltas were dropped or differ: the recorded reply follows, whole and marked.
                None => {
                    let whole = format!("\n\n(the reply, as recorded:)\n\n{text}");
                    self.ctx
                        .update(&sid, map::chunk("agent_message_chunk", &whole));
                }
            },
            Update::Finished => return true,
            Update::Other => self.other(e, live),
        }
        false
    }

    fn other(&mut self, e: &Event, live: &mut Live) {
        let sid = self.sid.clone();
        match e {
            Event::Activity(a) => {
                let id = &a.activity_id;
                match map::word(&a.state).as_str() {
                    "started" => {
                        live.running.push(id.clone());
                        let kind = match map::word(&a.kind).as_str() {
                            "tool" => map::tool_kind(&a.name),
                            _ => "think",
                        };
                        self.ctx
                            .update(&sid, map::tool_call(id, &a.summary, kind, "in_progress"));
                    }
                    state => {
                        live.running.retain(|r| r != id);
                        self.withdraw(live, Some(id));
                        let fields = json!({"status": state, "title": a.summary});
                        self.ctx.update(&sid, map::tool_update(id, fields));
                    }
                }
            }
            Event::ToolCard(c) if !live.located.contains(&c.activity_id) => {
                let card = serde_json::to_value(&c.card).unwrap_or_default();
                if let Some(l) = map::locations(&card, &self.ctx.cwd) {
                    live.located.push(c.activity_id.clone());
                    let fields = json!({"locations": l});
                    self.ctx
                        .update(&sid, map::tool_update(&c.activity_id, fields));
                }
            }
            Event::ToolOutput(o) => {
                let fields = json!({"content": map::text_content(&o.tail)});
                self.ctx
                    .update(&sid, map::tool_update(&o.activity_id, fields));
            }
            Event::ToolDiff(d) => live.diff = Some((d.activity_id.clone(), d.diff.clone())),
            Event::Diagnostic(d) if d.code == "step_limit" => live.step_limit = true,
            Event::ApprovalRequested(a) => self.ask(a, live),
            _ => {}
        }
    }

    /// Withdraws the permission requests still open for tool call `call` (all, for `None`):
    /// the call ended without an answer (the approval expired, or the turn was cancelled or
    /// ended), so the editor may close its prompt (`$/cancel_request`).
    fn withdraw(&mut self, live: &mut Live, call: Option<&str>) {
        let open: Vec<String> = live
            .asked
            .iter()
            .filter(|(_, (_, c))| call.is_none_or(|id| c == id))
            .map(|(req, _)| req.clone())
            .collect();
        for req in open {
            live.asked.remove(&req);
            let params = json!({"requestId": req});
            self.ctx.send(rpc::notification("$/cancel_request", params));
        }
    }

    /// Sends `session/request_permission` for approval `a`: the running tool it is about
    /// (with the proposed diff, when one came), allow once or reject once.
    fn ask(&mut self, a: &ApprovalRequestedData, live: &mut Live) {
        let call_id = live
            .running
            .last()
            .map_or_else(|| a.approval_id.clone(), Clone::clone);
        let mut tool = json!({"toolCallId": call_id, "title": a.summary, "status": "pending"});
        if let Some((activity, diff)) = &live.diff {
            if *activity == call_id {
                tool["content"] = map::text_content(&format!("```diff\n{diff}```"));
            }
        }
        self.next += 1;
        let id = format!("perm:{}:{}", self.sid, self.next);
        live.asked.insert(id.clone(), (a.clone(), call_id.clone()));
        let options = json!([
            {"optionId": "allow-once", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject-once", "name": "Reject", "kind": "reject_once"}
        ]);
        let params = json!({"sessionId": self.sid, "toolCall": tool, "options": options});
        self.ctx
            .send(rpc::request(&id, "session/request_permission", params));
    }
}

/// The session a permission request ID names (`perm:<session>:<n>`).
#[must_use]
pub fn session_of_request(id: &str) -> Option<&str> {
    let rest = id.strip_prefix("perm:")?;
    rest.rsplit_once(':').map(|(sid, _)| sid)
}
