//! One call of a `client.tools` tool. The backend never runs it: it asks the client with
//! `client.tool.call`, waits for the one winning `client.tool.result`, and sends
//! `client.tool.cancel` when the run is cancelled or the wait times out.

use super::client_calls::{CallEnd, CLIENT_TOOL_TIMEOUT};
use super::emit::RunOutput;
use crate::tools::outcome::bound_output;
use crate::tools::ToolOutcome;
use crate::wire::events::{ClientToolCallData, ClientToolCancelData};
use crate::wire::Event;
use protocol_core::limits::CLIENT_TOOL_INPUT_BYTES;
use serde_json::Value;

/// Asks the client to run its tool `name` and waits for the answer (at most the advertised
/// `client_tool_timeout_ms`; the wait itself is tested in `client_calls`).
pub fn run(out: &mut RunOutput<'_>, name: &str, input: &Value) -> ToolOutcome {
    let size = serde_json::to_vec(input).map_or(usize::MAX, |b| b.len());
    if size > CLIENT_TOOL_INPUT_BYTES {
        // Fails without an event: the client never sees an input over its bound.
        return ToolOutcome::fail("invalid input: larger than the client tool input bound");
    }
    let Some(input) = input.as_object() else {
        // `prepare` refuses a non-object input first; the wire's `input` is an object.
        return ToolOutcome::fail("invalid input: not an object");
    };
    let calls = out.ctx.client_calls;
    let call_id = uuid::Uuid::new_v4().hyphenated().to_string();
    calls.open(&out.run_id, &call_id);
    let (session_id, run_id) = out.ids();
    out.critical(Event::ClientToolCall(ClientToolCallData {
        session_id,
        run_id,
        call_id: call_id.clone(),
        name: name.to_owned(),
        input: input.clone(),
    }));
    let cancel = out.ctx.cancel;
    let end = calls.wait(&call_id, CLIENT_TOOL_TIMEOUT, &|| cancel.is_cancelled());
    match end {
        CallEnd::Answered { ok: true, output } => {
            ToolOutcome::success("answered by the client".into(), output, false)
        }
        CallEnd::Answered { ok: false, output } => ToolOutcome {
            ok: false,
            summary: "failed in the client".into(),
            output: bound_output(output, false),
            details: crate::tools::outcome::ToolDetails::None,
        },
        CallEnd::TimedOut | CallEnd::Cancelled => {
            let (session_id, run_id) = out.ids();
            out.critical(Event::ClientToolCancel(ClientToolCancelData {
                session_id,
                run_id,
                call_id,
            }));
            if end == CallEnd::TimedOut {
                ToolOutcome::fail("timed out: the client did not answer")
            } else {
                ToolOutcome::fail("cancelled")
            }
        }
    }
}
