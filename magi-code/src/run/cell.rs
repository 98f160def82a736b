//! A Code Mode cell as the wait of its `exec` call (`code-mode.md` 4): its code's calls are
//! callbacks (`callbacks.rs`, `Origin::Cell`); the cell adds its wall clock, which stops while
//! a nested call awaits its approval, its interrupt on timeout or cancellation, and its end,
//! which becomes `exec`'s outcome before the batch completes as usual.

use super::batch::{Calls, CallsNext, Cell, Queued, Wait};
use super::calls;
use super::io::CellTool;
use super::io::{Input, InterruptReason, Output};
use super::shared::Shared;
use crate::codemode::decl::{declaration, DESCRIBE_BYTES, EXEC};
use crate::codemode::text::{result_text, CellState};
use crate::tools::{ToolDetails, ToolKind, ToolOutcome, ToolRegistry};

/// The tools a cell reaches in `table` (`CodeConfig::tools`): every one but `exec`, those
/// offered to code only included, in name order (`ALL_TOOLS`'s), each with its `describe`
/// declaration.
#[must_use]
pub fn reachable(table: &ToolRegistry) -> Vec<CellTool> {
    let mut tools: Vec<CellTool> = table
        .all_specs()
        .iter()
        .filter(|s| s.name != EXEC && table.lookup(&s.name) != Some(ToolKind::Code))
        .map(|s| CellTool {
            name: s.name.clone(),
            description: s.description.clone(),
            declaration: declaration(s, DESCRIBE_BYTES),
        })
        .collect();
    tools.sort_by(|a, b| a.name.cmp(&b.name));
    tools
}

/// Acts on `input` for calls that wait for their cell (others go to `calls`).
pub fn on_input(sh: &mut Shared, mut c: Box<Calls>, input: Input) -> CallsNext {
    let Wait::Cell(mut cell) = std::mem::replace(&mut c.wait, Wait::Nothing) else {
        return calls::on_call_input(sh, c, input);
    };
    interrupt_if_due(sh, &mut cell);
    match input {
        Input::CellEnded {
            state,
            output,
            elapsed_ms,
        } => {
            cell.callbacks.drain(sh);
            let lines = if output.is_empty() {
                Vec::new()
            } else {
                vec![output]
            };
            // N is the cell's `code_call` records (`decisions.md` 52), whatever the helper counted.
            let text = result_text(state, elapsed_ms, cell.callbacks.issued, &lines);
            if let Some(o) = c.outcomes.first_mut() {
                *o = Some(ToolOutcome {
                    ok: state == CellState::Completed,
                    summary: state.line().to_owned(),
                    output: text,
                    details: ToolDetails::None,
                });
            }
            return calls::resume(sh, c);
        }
        Input::Call {
            call,
            name,
            input,
            more,
            refused,
            id,
        } => {
            let q = Queued {
                call,
                name,
                input,
                refused,
                id,
            };
            let hold = cell.hold();
            cell.callbacks.take(sh, q, more, hold);
        }
        Input::CellStopped => {
            // The helper ended the cell under its calls: they are cut short at once.
            cell.interrupted.get_or_insert(InterruptReason::Timeout);
            let hold = cell.hold();
            cell.callbacks.route(sh, Input::Tick, hold);
        }
        input @ (Input::Tick
        | Input::Appended(_)
        | Input::Approval { .. }
        | Input::HookEnded(_)
        | Input::ToolsEnded(_)
        | Input::ClientResult { .. }) => {
            let hold = cell.hold();
            cell.callbacks.route(sh, input, hold);
        }
        _ => {}
    }
    pause(sh, &mut cell);
    interrupt_if_due(sh, &mut cell);
    c.wait = Wait::Cell(cell);
    CallsNext::Wait(c)
}

/// The clock stops while a nested call awaits its approval, and goes on after.
fn pause(sh: &Shared, cell: &mut Cell) {
    match (cell.callbacks.awaits_approval(), cell.paused_since) {
        (true, None) => cell.paused_since = Some(sh.now),
        (false, Some(t)) => {
            cell.paused = cell.paused.saturating_add(sh.now.saturating_sub(t));
            cell.paused_since = None;
        }
        _ => {}
    }
}

/// Asks for the interrupt once, on cancellation or when the wall clock (approval waits not
/// counted) has run out, and cancels the nested call's waits.
fn interrupt_if_due(sh: &mut Shared, cell: &mut Cell) {
    if cell.interrupted.is_some() {
        return;
    }
    let end = cell
        .started
        .saturating_add(cell.timeout_ms)
        .saturating_add(cell.paused);
    // A record that could not be stored ends the cell as a cancellation would: the run
    // ends degraded once it is over.
    let why = if sh.cancelled || sh.degraded {
        InterruptReason::Cancel
    } else if cell.paused_since.is_none() && sh.now >= end {
        InterruptReason::Timeout
    } else {
        return;
    };
    cell.interrupted = Some(why);
    sh.push(Output::Interrupt(why));
    let hold = cell.hold();
    cell.callbacks.route(sh, Input::Tick, hold);
    pause(sh, cell);
}
