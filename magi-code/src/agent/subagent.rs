//! The `task` tool (`runner.md` 7): a subagent runs the same turn loop as a turn, with its own
//! history in `sessions/subagents/<session_id>-<n>.jsonl`, its own instructions and tools
//! (never `task`), and the parent's cancellation, policies and approvals. The client sees none
//! of its events but its approval requests; its final text is the call's result.

use super::client;
use super::context;
use super::drive;
use super::emit::RunOutput;
use crate::config::Profile;
use crate::history::compact::Snapshot;
use crate::history::{Body, Record, ToolSpec};
use crate::mcp::McpHub;
use crate::run::RunOutcome;
use crate::runtime::Runtime;
use crate::session::{self, Selection};
use crate::store::{sync_dir, Appender, SessionId, Sessions};
use crate::tools::outcome::{bound_output, one_line};
use crate::tools::{AddError, ToolDetails, ToolKind, ToolOutcome, ToolRegistry};
use crate::util::redact::safe_name;
use crate::util::schema::{self, SchemaError, Validator};
use protocol_core::ErrorCode;
use serde::Deserialize;
use serde_json::{json, Value};
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

/// The tool's name as offered to the model.
pub const TOOL: &str = "task";

/// What the model reads about `task`, before the list of agents.
const DESCRIPTION: &str = "Run a subagent: a separate agent with its own conversation that works \
     on one self-contained task with the tools it is allowed (it cannot start subagents) and \
     ends with a final reply, which is this tool's result. It sees nothing of this \
     conversation, so the prompt must say everything it needs. Without `agent` a general \
     subagent with every tool runs.";

/// Said to every subagent after the base prompt.
const SUBAGENT_NOTE: &str = "You are a subagent: another agent delegated one task to you. \
     Work on it alone with your tools; your final reply is all that agent sees of your work, \
     so make it complete and self-contained.";

/// The profiles `task` accepts: every admitted one not in `agents.disabled`.
pub fn accepted(rt: &Runtime) -> impl Iterator<Item = &Profile> {
    rt.profiles
        .iter()
        .filter(|p| !rt.settings.agents_disabled.contains(&p.name))
}

/// The `task` tool's definition: its description names every accepted profile with its
/// description.
#[must_use]
pub fn spec(rt: &Runtime) -> ToolSpec {
    let mut description = DESCRIPTION.to_owned();
    let mut names = Vec::new();
    for p in accepted(rt) {
        if names.is_empty() {
            description.push_str("\n\nAgents (`agent`):");
        }
        description.push_str(&format!("\n- {}: {}", p.name, one_line(&p.description)));
        names.push(p.name.clone());
    }
    let mut agent = json!({"type": "string", "description": "The agent to run; omit it for a general subagent."});
    if !names.is_empty() {
        agent["enum"] = json!(names);
    }
    ToolSpec {
        name: TOOL.to_owned(),
        description,
        input_schema: input_schema(agent),
    }
}

/// `task`'s input schema with this `agent` property.
fn input_schema(agent: Value) -> Value {
    json!({
        "type": "object",
        "properties": {
            "description": {"type": "string", "description": "A few words saying what the task is."},
            "prompt": {"type": "string", "description": "The whole task: everything the subagent needs to know."},
            "agent": agent,
        },
        "required": ["description", "prompt"],
        "additionalProperties": false,
    })
}

/// The input of a call, exactly (decision 17's strictness).
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TaskIn {
    // Required, but never shown: activities name the profile, not the model's words.
    #[allow(dead_code)]
    description: String,
    prompt: String,
    #[serde(default)]
    agent: Option<String>,
}

/// The name a call shows in its activity and approval: its profile's, else `general`.
#[must_use]
pub fn describe(input: &Value) -> String {
    match input.get("agent") {
        None | Some(Value::Null) => "general".to_owned(),
        Some(Value::String(a)) => safe_name(&one_line(a)).unwrap_or_else(|| "agent".into()),
        Some(_) => "agent".to_owned(),
    }
}

/// The `started` activity's summary of a call described as `described`.
#[must_use]
pub fn started(described: &str) -> String {
    format!("{described}: running")
}

/// A subagent's voice: where its records go and the text it ended with.
pub struct Quiet {
    id: String,
    file: Mutex<QuietFile>,
}

struct QuietFile {
    appender: Appender,
    /// The text of the last assistant segment not followed by a tool call.
    last_text: String,
}

impl Quiet {
    /// The subagent's own ID (`<session_id>-<n>`), which its records carry.
    #[must_use]
    pub fn id(&self) -> &str {
        &self.id
    }

    /// Appends records to the subagent's history and fsyncs (the primary history's appender).
    pub fn append(&self, records: &[Record]) -> Result<(), ErrorCode> {
        let mut f = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        f.appender
            .append(records)
            .map_err(|_| ErrorCode::PersistenceFailed)?;
        for r in records {
            match &r.body {
                Body::AssistantMessage {
                    text: Some(t),
                    partial: false,
                    ..
                } => t.clone_into(&mut f.last_text),
                Body::ToolCall { .. } => f.last_text.clear(),
                _ => {}
            }
        }
        Ok(())
    }

    fn final_text(&self) -> String {
        let f = self.file.lock().unwrap_or_else(PoisonError::into_inner);
        f.last_text.clone()
    }
}

/// The ID of the `n`-th subagent of session `parent`, if it is inside the session ID grammar
/// (at most 64 bytes).
#[must_use]
pub fn subagent_id(parent: &str, n: u64) -> Option<SessionId> {
    SessionId::new(&format!("{parent}-{n}"))
}

/// Why a subagent's history could not be created.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HistoryError {
    /// The next `<session_id>-<n>` would break the 64-byte ID grammar.
    IdTooLong,
    /// The folder or file could not be made.
    Store,
}

/// Creates the first free `sessions/subagents/<parent>-<n>.jsonl` (`n` from 1, create-new)
/// with its `session_meta` record carrying `cwd`, durable before the subagent's first step.
pub fn create_history(
    root: &std::path::Path,
    cwd: &str,
    parent: &str,
) -> Result<(SessionId, Appender), HistoryError> {
    let sessions = Sessions::new(root);
    if !sessions.is_safe() {
        return Err(HistoryError::Store);
    }
    let dir = sessions.subagents_dir();
    match fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => sync_dir(sessions.dir()).map_err(|_| HistoryError::Store)?,
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
        Err(_) => return Err(HistoryError::Store),
    }
    // Never through a symlink: histories live only in real folders.
    if !fs::symlink_metadata(&dir).is_ok_and(|m| m.file_type().is_dir()) {
        return Err(HistoryError::Store);
    }
    let mut n = 1u64;
    loop {
        let id = subagent_id(parent, n).ok_or(HistoryError::IdTooLong)?;
        let mut meta = Record::now(id.as_str(), Body::SessionMeta {});
        meta.cwd = Some(cwd.to_owned());
        match Appender::create(&sessions.subagent_path(&id), std::slice::from_ref(&meta)) {
            Ok(appender) => return Ok((id, appender)),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => n += 1,
            Err(_) => return Err(HistoryError::Store),
        }
    }
}

/// The subagent's system prompt: the base prompt naming its `tools`, a note that it is a
/// subagent, its profile's body, then the instruction files (`runner.md` 3) — the primary
/// profile's body is not part of it.
#[must_use]
pub fn instructions(rt: &Runtime, profile: Option<&Profile>, tools: &[ToolSpec]) -> String {
    let mut base = rt.clone();
    base.instructions.clear();
    base.settings.agent = None;
    let mut parts = vec![
        context::instructions(&base, tools),
        SUBAGENT_NOTE.to_owned(),
    ];
    if let Some(body) = profile.map(|p| p.body.trim()).filter(|b| !b.is_empty()) {
        parts.push(body.to_owned());
    }
    if !rt.instructions.is_empty() {
        parts.push(rt.instructions.clone());
    }
    parts.join("\n\n")
}

/// The subagent's tool table: every built-in but `task` and every MCP tool, limited to its
/// profile's `tools` when given. Client tools (`client.tools`) are the primary agent's only.
#[must_use]
pub fn table(mcp: Option<&McpHub>, profile: Option<&Profile>) -> ToolRegistry {
    let mut t = ToolRegistry::builtin();
    for tool in mcp.into_iter().flat_map(McpHub::tools) {
        // The hub offers only valid, unique `mcp__` names.
        let _ = t.add_mcp(tool);
    }
    match profile.and_then(|p| p.tools.as_ref()) {
        Some(allowed) => t.only(|s| allowed.contains(&s.name)),
        None => t,
    }
}

/// Offers `task` in `table`. Its input is checked against its fixed shape (`description` and
/// `prompt` strings, `agent` an optional string, nothing else), not the offered `enum` of
/// agents: a name outside it keeps its own refusal (`unknown agent`, `refused: that agent is
/// disabled`), as `runner.md` 7 says.
pub fn add_task(table: &mut ToolRegistry, rt: &Runtime) -> Result<(), AddError> {
    static SHAPE: OnceLock<Result<Validator, SchemaError>> = OnceLock::new();
    let shape = SHAPE.get_or_init(|| schema::compile(&input_schema(json!({"type": "string"}))));
    table.add(spec(rt), ToolKind::Task, shape.clone(), |_, input| {
        describe(input)
    })
}

/// Which profile a call asks for: `Ok(None)` for a general subagent.
fn profile<'r>(rt: &'r Runtime, agent: Option<&str>) -> Result<Option<&'r Profile>, &'static str> {
    let Some(name) = agent else {
        return Ok(None);
    };
    if rt.settings.agents_disabled.iter().any(|d| d == name) {
        return Err("refused: that agent is disabled");
    }
    rt.profiles
        .iter()
        .find(|p| p.name == name)
        .map(Some)
        .ok_or("unknown agent")
}

/// The selection the subagent runs on: its profile's `model` when it is an admitted catalog
/// choice now (else an error), otherwise the parent run's.
fn selection(out: &RunOutput<'_>, profile: Option<&Profile>) -> Result<Selection, &'static str> {
    let rt = &out.ctx.rt;
    let parent = out
        .selection
        .clone()
        .unwrap_or_else(|| Selection::startup(rt));
    let Some(choice) = profile.and_then(|p| p.model.as_deref()) else {
        return Ok(parent);
    };
    let (provider, model) = choice
        .split_once('/')
        .ok_or("the agent's model is not available")?;
    match session::admitted(
        rt,
        provider,
        model,
        &parent.requested_effort,
        out.ctx.cancel,
    ) {
        Ok(s) => Ok(s),
        Err(ErrorCode::OperationCancelled) => Err("cancelled"),
        Err(_) => Err("the agent's model is not available"),
    }
}

fn refused(summary: &str, output: &str) -> ToolOutcome {
    ToolOutcome {
        ok: false,
        summary: summary.to_owned(),
        output: bound_output(output.to_owned(), false),
        details: ToolDetails::None,
    }
}

fn refusal(why: &str) -> ToolOutcome {
    refused(why, why)
}

/// Runs one `task` call to its result: the subagent's final text, or an error result when the
/// input, the agent or its model is refused, or the subagent fails or is cancelled.
pub fn run(out: &mut RunOutput<'_>, input: &Value) -> ToolOutcome {
    let task: TaskIn = match serde_json::from_value(input.clone()) {
        Ok(t) => t,
        Err(_) => {
            return refusal("invalid input: expected {description, prompt, agent?} strings");
        }
    };
    if task.prompt.trim().is_empty() {
        return refusal("invalid input: the prompt is empty");
    }
    let ctx = out.ctx;
    let rt = &ctx.rt;
    let profile = match profile(rt, task.agent.as_deref()) {
        Ok(p) => p,
        Err(why) => return refusal(why),
    };
    let sel = match selection(out, profile) {
        Ok(s) => s,
        Err(why) => return refusal(why),
    };
    let Ok(mut model) = client::client(rt, &sel.provider, &sel.model, &task.prompt, None) else {
        return refusal("the agent's model is not available");
    };
    let cwd = rt.cwd.to_string_lossy().into_owned();
    let (id, appender) = match create_history(&rt.root, &cwd, &out.session_id) {
        Ok(h) => h,
        Err(HistoryError::IdTooLong) => {
            return refusal("refused: the session ID is too long for a subagent history");
        }
        Err(HistoryError::Store) => return refusal("the subagent's history could not be stored"),
    };
    let table = Arc::new(table(ctx.mcp.as_deref(), profile));
    let specs = table.specs();
    let instructions = instructions(rt, profile, specs);
    let effort = sel.effective_effort();
    let params = client::loop_params(rt, &sel, effort.as_deref(), &instructions, specs);
    // The same loop as a turn, under the parent run's IDs (so its approvals are the parent
    // run's), its records under its own ID in its own file, over its own tool table.
    let mut sub = RunOutput::new(ctx, out.session_id.clone(), out.run_id.clone());
    sub.tools = table.clone();
    sub.subagent = Some(Quiet {
        id: id.as_str().to_owned(),
        file: Mutex::new(QuietFile {
            appender,
            last_text: String::new(),
        }),
    });
    // A new history: its `session_meta` is the one record before the subagent's input.
    let fresh = Snapshot {
        records: 1,
        ..Snapshot::default()
    };
    let finished = drive::execute(&mut sub, model.as_mut(), &task.prompt, fresh, &params);
    if sub.output_lost {
        out.output_lost = true;
    }
    let text = sub
        .subagent
        .as_ref()
        .map(Quiet::final_text)
        .unwrap_or_default();
    match (finished.outcome, finished.error_code) {
        (RunOutcome::Completed, _) if text.is_empty() => ToolOutcome {
            ok: true,
            summary: "completed".into(),
            output: "(the subagent finished without a reply)".into(),
            details: ToolDetails::None,
        },
        (RunOutcome::Completed, _) => ToolOutcome {
            ok: true,
            summary: "completed".into(),
            output: bound_output(text, false),
            details: ToolDetails::None,
        },
        (RunOutcome::Cancelled, _) => refused("cancelled", "cancelled: the subagent was cancelled"),
        (_, code) => {
            let code = code.map_or("execution_failed", ErrorCode::as_str);
            let summary = format!("failed ({code})");
            refused(
                &summary,
                &format!("{summary}: the subagent did not finish its task"),
            )
        }
    }
}

#[cfg(test)]
mod tests;
