//! Calls a callee makes back into the run while the run waits for it: a Code Mode cell's code
//! (its `exec` call waits), or a provider that runs its own loop mid-step (the step waits).
//! They go through the pipeline of direct calls (`calls::start_nested`: schema, policy and
//! approval, hooks, the runaway rule, records, activities, cards, the output bound,
//! cancellation) in issue order: the calls the callee sent together as one batch, so that
//! read-class calls that need no approval run concurrently (up to 4), later ones queued. Each
//! answer goes back as [`Output::Answer`].

use super::batch::{
    Callbacks, Calls, CallsNext, Hold, Nested, NestedCall, Origin, Queued, Slot, Step, Todo, Wait,
};
use super::call::ToolRun;
use super::calls;
use super::cell;
use super::io::{Input, Output, Reply};
use super::nested;
use super::shared::Shared;
use crate::codemode::decl::EXEC;
use crate::codemode::text::ToolErrorCode;
use crate::tools::ToolKind;
use crate::wire::events::ClientToolCancelData;
use crate::wire::Event;
use serde_json::Value;
use std::collections::VecDeque;

impl Callbacks {
    /// No call yet from `origin`, at most `max_calls`.
    #[must_use]
    pub fn new(origin: Origin, max_calls: Option<u32>) -> Self {
        Self {
            origin,
            issued: 0,
            max_calls,
            inner: None,
            queue: VecDeque::new(),
            gathering: false,
        }
    }

    /// Takes call `call` the callee made (`more`: others of its flush follow at once): queued
    /// to start with its flush, or past `max_calls` thrown `limit` at once, with no record and
    /// no activity (`decisions.md` 52).
    pub fn take(&mut self, sh: &mut Shared, q: Queued, more: bool, hold: Hold) {
        let queued = u64::try_from(self.queue.len()).unwrap_or(u64::MAX);
        let within = self
            .max_calls
            .is_none_or(|m| self.issued.saturating_add(queued) < u64::from(m));
        if within {
            self.queue.push_back(q);
        } else {
            let m = self.max_calls.unwrap_or_default();
            let why = format!("limit: a cell makes at most {m} tool calls");
            let result = Err((ToolErrorCode::Limit, why));
            sh.push(Output::Answer {
                call: q.call,
                result,
            });
        }
        self.gathering = more;
        self.issue(sh, hold);
    }

    /// Hands an input to the calls in flight, if any.
    pub fn route(&mut self, sh: &mut Shared, input: Input, hold: Hold) {
        let Some(inner) = self.inner.take() else {
            return;
        };
        let next = held(sh, hold, |sh| match (&inner.wait, input) {
            // A provider's `exec` call: its cell starts once its records are stored, and
            // takes what comes while it runs.
            (Wait::CellStored(..), Input::Appended(r)) => calls::step_stored(sh, inner, r),
            (Wait::Cell(_), input) => cell::on_input(sh, inner, input),
            (_, input) => calls::on_call_input(sh, inner, input),
        });
        self.settle(sh, next, true);
    }

    /// Whether the calls in flight are a cell's (a provider's `exec` call).
    #[must_use]
    pub fn in_cell(&self) -> bool {
        self.inner.as_ref().is_some_and(|c| c.in_cell())
    }

    /// Starts the queued calls, in issue order and as one batch, while none is in flight.
    pub fn issue(&mut self, sh: &mut Shared, hold: Hold) {
        while !self.gathering && self.inner.is_none() && !self.queue.is_empty() {
            let next = self.start(sh, hold);
            self.settle(sh, next, true);
        }
    }

    /// The callee is gone: the calls in flight and those queued end cancelled (each still
    /// gets its records), unanswered, since nobody waits for them any more.
    pub fn drain(&mut self, sh: &mut Shared) {
        let hold = Hold {
            cancel: true,
            until: None,
        };
        if let Some(inner) = self.inner.take() {
            let next = held(sh, hold, |sh| abandon(sh, inner));
            self.settle(sh, next, false);
        }
        self.gathering = false;
        if !self.queue.is_empty() {
            let next = self.start(sh, hold);
            self.settle(sh, next, false);
        }
    }

    /// Whether a call in flight waits for its approval (a cell's clock stops meanwhile).
    #[must_use]
    pub fn awaits_approval(&self) -> bool {
        self.inner
            .as_ref()
            .is_some_and(|c| matches!(c.wait, Wait::Approval { .. }))
    }

    /// Starts the queued calls as one batch, each `seq` in issue order.
    fn start(&mut self, sh: &mut Shared, hold: Hold) -> CallsNext {
        let mut from = Nested {
            origin: self.origin.clone(),
            calls: Vec::with_capacity(self.queue.len()),
            answers: Vec::new(),
        };
        let mut list = Vec::with_capacity(self.queue.len());
        for q in self.queue.drain(..) {
            let seq = self.issued;
            self.issued += 1;
            let refuse = match q.refused {
                Some((code, why)) => Some((why, code)),
                None => refusal(sh, &self.origin, &q.name),
            };
            let id = match (&self.origin, q.id) {
                (Origin::Cell { call_id }, _) => call_id.clone(),
                (Origin::Step, Some(id)) if plain(&id) => id,
                (Origin::Step, _) => sh.voice.fresh_id("cb-"),
            };
            from.calls.push(NestedCall {
                call: q.call,
                seq,
                refuse,
            });
            list.push((id, q.name, q.input));
        }
        held(sh, hold, |sh| start_nested(sh, from, list))
    }

    /// Keeps the calls in flight, or answers the callee (`answer`).
    fn settle(&mut self, sh: &mut Shared, next: CallsNext, answer: bool) {
        match next {
            CallsNext::Wait(inner) => self.inner = Some(inner),
            CallsNext::Answered(runs) if answer => {
                for (call, run) in runs {
                    let result = answered(run);
                    sh.push(Output::Answer { call, result });
                }
            }
            // A callee's batch neither steps nor ends the run.
            CallsNext::Answered(_) | CallsNext::Stepped | CallsNext::Finish(_) => {}
        }
    }
}

/// Whether a callee's own call ID may name the call's records: short, of ID characters.
fn plain(id: &str) -> bool {
    !id.is_empty()
        && id.len() <= 128
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// Runs `f` with the run held as `hold` says.
fn held<T>(sh: &mut Shared, hold: Hold, f: impl FnOnce(&mut Shared) -> T) -> T {
    let (was, until_was) = (sh.cancelled, sh.work_until);
    sh.cancelled |= hold.cancel;
    sh.work_until = hold.until;
    let t = f(sh);
    (sh.cancelled, sh.work_until) = (was, until_was);
    t
}

/// Why the callee's call to `name` is refused before its policy: from a cell, a tool not
/// reachable from code (`exec` itself, or one the cell's list leaves out).
fn refusal(sh: &Shared, origin: &Origin, name: &str) -> Option<(String, ToolErrorCode)> {
    if *origin == Origin::Step {
        return None;
    }
    let reachable = sh
        .cfg
        .code
        .as_ref()
        .is_some_and(|c| c.tools.iter().any(|t| t.name == name));
    let code = sh.cfg.tools.lookup(name) == Some(ToolKind::Code);
    (name == EXEC || code || !reachable)
        .then(|| ("unknown tool".to_owned(), ToolErrorCode::UnknownTool))
}

/// What the callee gets: the output, or the `ToolError` it throws.
fn answered(run: ToolRun) -> Reply {
    if run.is_error {
        Err((run.code.unwrap_or(ToolErrorCode::Failed), run.output))
    } else {
        Ok(run.output)
    }
}

/// Runs the calls a callee issued (`list[i]` is `from.calls[i]`) through the pipeline of
/// direct calls, batched as they are: answered with [`CallsNext::Answered`] (now or after
/// their waits), never stored as a step. Their first records go out first; none runs before
/// the driver says they are stored.
fn start_nested(
    sh: &mut Shared,
    mut from: Nested,
    list: Vec<(String, String, Value)>,
) -> CallsNext {
    if sh.degraded {
        // An earlier record was lost: nothing more is stored, so nothing more runs.
        nested::unrecorded(&mut from);
        let c = calls::calls(Vec::new(), list, Some(from));
        return calls::run(sh, Step::Go(c, Todo::Batch));
    }
    let wait = nested::record_calls(sh, &from, &list);
    let mut c = calls::calls(Vec::new(), list, Some(from));
    if !wait {
        return calls::run(sh, Step::Go(c, Todo::Batch));
    }
    c.wait = Wait::Recorded;
    CallsNext::Wait(c)
}

/// Ends a call in flight now, as cancelled (its callee is gone): its final activity, a
/// `client.tool.cancel` if the client runs it, and its last record. The caller holds the run
/// cancelled meanwhile, so that a call not started is too.
fn abandon(sh: &mut Shared, mut c: Box<Calls>) -> CallsNext {
    if let Wait::Client { id, .. } = &c.wait {
        let (session_id, run_id) = sh.voice.ids();
        let call_id = id.clone();
        sh.voice
            .critical(Event::ClientToolCancel(ClientToolCancelData {
                session_id,
                run_id,
                call_id,
            }));
    }
    if c.done < c.n {
        if let Some(p) = c.current.take() {
            c.slots.push(Slot::Started(Box::new(p)));
        }
        for slot in c.slots.iter_mut().skip(c.done) {
            if let Slot::Started(p) = slot {
                p.refuse("cancelled", ToolErrorCode::Cancelled);
            }
        }
        c.slots.resize_with(c.n, || Slot::Skipped);
        c.outcomes.resize_with(c.n, || None);
        for o in c.outcomes.iter_mut().skip(c.done) {
            *o = None;
        }
    }
    c.post = None;
    c.wait = Wait::Nothing;
    calls::run(sh, Step::Go(c, Todo::Complete))
}
