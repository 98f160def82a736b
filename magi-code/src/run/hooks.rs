//! A call's `pre_tool` and `post_tool` hooks as moves of the calls (`calls.rs` runs them),
//! and the refusals met while preparing a call (a denial, a blocking hook, cancellation).

use super::batch::{Calls, CallsNext, HookInput, Slot, Step, Todo, Wait};
use super::call::Prepared;
use super::io::{HookEnd, Output};
use super::shared::Shared;
use crate::codemode::text::ToolErrorCode;
use crate::wire::DiagnosticCode;

/// Why a call a blocking `pre_tool` hook stopped did not run.
pub const BLOCKED: &str = "blocked by a hook";
/// The `pre_tool` exit status that blocks the call.
pub const BLOCK_STATUS: i32 = 2;

/// Runs the `pre_tool` hooks matching the call from index `from`; when none is left the
/// call is prepared.
pub fn pre_hooks(sh: &mut Shared, mut c: Box<Calls>, mut p: Prepared, from: usize) -> Step {
    let hooks = &sh.cfg.hooks.pre_tool;
    if let Some(i) = (from..hooks.len()).find(|&i| hooks[i].matches(&p.name)) {
        let stdin = HookInput {
            event: "pre_tool",
            input: &p.input,
            ok: None,
            session_id: &sh.cfg.session_id,
            tool: &p.name,
        };
        sh.voice.queue.push_back(Output::Hook {
            command: hooks[i].command.clone(),
            stdin: stdin.bytes(),
            until: sh.work_until,
        });
        c.wait = Wait::PreHook(i);
        c.current = Some(p);
        return Step::Out(CallsNext::Wait(c));
    }
    p.post = sh.cfg.hooks.post_tool.iter().any(|h| h.matches(&p.name));
    c.slots.push(Slot::Started(Box::new(p)));
    c.wait = Wait::Nothing;
    Step::Go(c, Todo::Prepare)
}

/// A call the run refuses while preparing it (a denial, a blocking hook, cancellation).
pub fn refused(mut c: Box<Calls>, why: &str, code: ToolErrorCode) -> Step {
    if let Some(mut p) = c.current.take() {
        p.refuse(why, code);
        c.slots.push(Slot::Started(Box::new(p)));
    }
    c.wait = Wait::Nothing;
    Step::Go(c, Todo::Prepare)
}

pub fn pre_hook_ended(sh: &mut Shared, mut c: Box<Calls>, i: usize, end: HookEnd) -> Step {
    match end {
        HookEnd::Exit(0) => {}
        HookEnd::Exit(BLOCK_STATUS) => return refused(c, BLOCKED, ToolErrorCode::Blocked),
        HookEnd::Cancelled => return refused(c, "cancelled", ToolErrorCode::Cancelled),
        end => hook_failed(sh, "pre_tool", &end),
    }
    match c.current.take() {
        Some(p) => pre_hooks(sh, c, p, i + 1),
        None => {
            c.wait = Wait::Nothing;
            Step::Go(c, Todo::Prepare)
        }
    }
}

/// The diagnostic never names the command or the input: either may hold a secret.
fn hook_failed(sh: &mut Shared, event: &str, end: &HookEnd) {
    let why = match end {
        HookEnd::Exit(code) => format!("exit {code}"),
        HookEnd::Failed(p) => p.clone(),
        HookEnd::Cancelled => "cancelled".to_owned(),
    };
    sh.voice.diagnostic(
        DiagnosticCode::HookFailed,
        &format!("a {event} hook failed ({why})"),
    );
}

/// Runs the `post_tool` hooks matching the completed call from index `from`.
pub fn post_hooks(sh: &mut Shared, mut c: Box<Calls>, from: usize, ok: bool) -> Step {
    let hooks = &sh.cfg.hooks.post_tool;
    let Some((name, input)) = &c.post else {
        c.wait = Wait::Nothing;
        return Step::Go(c, Todo::Complete);
    };
    if let Some(i) = (from..hooks.len()).find(|&i| hooks[i].matches(name)) {
        let stdin = HookInput {
            event: "post_tool",
            input,
            ok: Some(ok),
            session_id: &sh.cfg.session_id,
            tool: name,
        };
        sh.voice.queue.push_back(Output::Hook {
            command: hooks[i].command.clone(),
            stdin: stdin.bytes(),
            until: sh.work_until,
        });
        c.wait = Wait::PostHook { hook: i, ok };
        return Step::Out(CallsNext::Wait(c));
    }
    c.post = None;
    c.wait = Wait::Nothing;
    Step::Go(c, Todo::Complete)
}

pub fn post_hook_ended(
    sh: &mut Shared,
    c: Box<Calls>,
    hook: usize,
    ok: bool,
    end: HookEnd,
) -> Step {
    match end {
        HookEnd::Exit(0) => post_hooks(sh, c, hook + 1, ok),
        // A cancelled run skips the rest.
        HookEnd::Cancelled => {
            let mut c = c;
            c.post = None;
            c.wait = Wait::Nothing;
            Step::Go(c, Todo::Complete)
        }
        end => {
            hook_failed(sh, "post_tool", &end);
            post_hooks(sh, c, hook + 1, ok)
        }
    }
}
