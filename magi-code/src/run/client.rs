//! A call of a client tool (the `client.tools` extension) as states of its batch: the
//! `client.tool.call` the client is asked with, its answer, or its expiry or cancellation,
//! after which the client is told `client.tool.cancel`.

use super::batch::{Calls, CallsNext, Step, Todo, Wait};
use super::io::Output;
use super::shared::Shared;
use crate::tools::outcome::bound_output;
use crate::tools::{ToolDetails, ToolOutcome};
use crate::wire::events::{ClientToolCallData, ClientToolCancelData};
use crate::wire::Event;
use protocol_core::limits::{CLIENT_TOOL_INPUT_BYTES, CLIENT_TOOL_TIMEOUT_MS};
use serde_json::Value;

/// Asks the client to run its tool (at most the advertised `client_tool_timeout_ms`).
pub fn ask_client(sh: &mut Shared, mut c: Box<Calls>, name: &str, input: &Value) -> Step {
    let size = serde_json::to_vec(input).map_or(usize::MAX, |b| b.len());
    let refused = if size > CLIENT_TOOL_INPUT_BYTES {
        // Fails without an event: the client never sees an input over its bound.
        Some("invalid input: larger than the client tool input bound")
    } else if !input.is_object() {
        Some("invalid input: not an object")
    } else {
        None
    };
    if let Some(why) = refused {
        c.outcomes[0] = Some(ToolOutcome::fail(why));
        return Step::Go(c, Todo::Complete);
    }
    let id = sh.voice.fresh().hyphenated().to_string();
    sh.voice.queue.push_back(Output::OpenClientCall(id.clone()));
    let (session_id, run_id) = sh.voice.ids();
    sh.voice.critical(Event::ClientToolCall(ClientToolCallData {
        session_id,
        run_id,
        call_id: id.clone(),
        name: name.to_owned(),
        input: input.as_object().cloned().unwrap_or_default(),
    }));
    c.wait = Wait::Client {
        id,
        deadline: sh.now.saturating_add(CLIENT_TOOL_TIMEOUT_MS),
    };
    Step::Out(CallsNext::Wait(c))
}

pub fn client_answered(mut c: Box<Calls>, ok: bool, output: String) -> Step {
    c.outcomes[0] = Some(if ok {
        ToolOutcome::success("answered by the client".into(), output, false)
    } else {
        ToolOutcome {
            ok: false,
            summary: "failed in the client".into(),
            output: bound_output(output, false),
            details: ToolDetails::None,
        }
    });
    c.wait = Wait::Nothing;
    Step::Go(c, Todo::Complete)
}

/// The client did not answer in time, or the run was cancelled: the client is told.
pub fn client_gone(sh: &mut Shared, mut c: Box<Calls>) -> Step {
    let Wait::Client { id, .. } = std::mem::replace(&mut c.wait, Wait::Nothing) else {
        return Step::Out(CallsNext::Wait(c));
    };
    let (session_id, run_id) = sh.voice.ids();
    sh.voice
        .critical(Event::ClientToolCancel(ClientToolCancelData {
            session_id,
            run_id,
            call_id: id,
        }));
    c.outcomes[0] = Some(ToolOutcome::fail(if sh.cancelled {
        "cancelled"
    } else {
        "timed out: the client did not answer"
    }));
    Step::Go(c, Todo::Complete)
}
