//! The `task` tool (`runner.md` 7): a subagent runs the same turn loop as a turn, with its own
//! history in `sessions/subagents/<session_id>-<n>.jsonl`, its own instructions and tools
//! (never `task`), and the parent's cancellation, policies and approvals. The client sees none
//! of its events but its approval requests; its final text is the call's result.

use super::client;
use super::context;
use super::emit::RunOutput;
use super::quiet::Quiet;
use super::task::TaskIn;
use crate::config::Profile;
use crate::history::{Body, Record, ToolSpec};
use crate::mcp::McpHub;
use crate::providers::ModelClient;
use crate::run::{Finished, RunOutcome};
use crate::runtime::Runtime;
use crate::session::{self, Selection};
use crate::store::{sync_dir, Appender, SessionId, Sessions};
use crate::tools::outcome::bound_output;
use crate::tools::{ToolDetails, ToolOutcome, ToolRegistry};
use protocol_core::ErrorCode;
use serde_json::Value;
use std::fs;
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::sync::Arc;

/// Said to every subagent after the base prompt.
const SUBAGENT_NOTE: &str = "You are a subagent: another agent delegated one task to you. \
     Work on it alone with your tools; your final reply is all that agent sees of your work, \
     so make it complete and self-contained.";

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

/// A subagent ready to run: the same loop as a turn, under the parent run's IDs (so its
/// approvals are the parent run's), its records under its own ID in its own file, over its
/// own tool table.
pub struct Child<'a> {
    /// Its output: quiet, to its own history.
    pub out: RunOutput<'a>,
    /// Its model.
    pub model: Box<dyn ModelClient>,
    /// Its task.
    pub prompt: String,
    /// The selection it runs on.
    pub selection: Selection,
    /// Its system prompt.
    pub instructions: String,
}

/// Prepares one `task` call's subagent, or the error result when the input, the agent or its
/// model is refused or its history cannot be made.
pub fn prepare<'a>(out: &RunOutput<'a>, input: &Value) -> Result<Child<'a>, ToolOutcome> {
    let task: TaskIn = serde_json::from_value(input.clone())
        .map_err(|_| refusal("invalid input: expected {description, prompt, agent?} strings"))?;
    if task.prompt.trim().is_empty() {
        return Err(refusal("invalid input: the prompt is empty"));
    }
    let ctx = out.ctx;
    let rt = &ctx.rt;
    let profile = profile(rt, task.agent.as_deref()).map_err(refusal)?;
    let selection = selection(out, profile).map_err(refusal)?;
    let model = client::client(
        rt,
        (&selection.provider, &selection.model),
        &task.prompt,
        None,
        (&out.session_id, None),
    )
    .map_err(|_| refusal("the agent's model is not available"))?;
    let cwd = rt.cwd.to_string_lossy().into_owned();
    let (id, appender) = match create_history(&rt.root, &cwd, &out.session_id) {
        Ok(h) => h,
        Err(HistoryError::IdTooLong) => {
            return Err(refusal(
                "refused: the session ID is too long for a subagent history",
            ));
        }
        Err(HistoryError::Store) => {
            return Err(refusal("the subagent's history could not be stored"));
        }
    };
    let table = Arc::new(table(ctx.mcp.as_deref(), profile));
    let instructions = instructions(rt, profile, table.specs());
    let mut sub = RunOutput::new(ctx, out.session_id.clone(), out.run_id.clone());
    sub.tools = table;
    sub.subagent = Some(Quiet::new(id.as_str().to_owned(), appender));
    Ok(Child {
        out: sub,
        model,
        prompt: task.prompt,
        selection,
        instructions,
    })
}

/// The `task` call's result once its subagent `finished`: its final text, or an error result
/// when it failed or was cancelled.
#[must_use]
pub fn outcome(sub: &RunOutput<'_>, finished: &Finished) -> ToolOutcome {
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
