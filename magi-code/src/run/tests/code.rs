//! Code Mode on the machine side (`code-mode.md` 4–8): a cell's nested calls through the
//! direct calls' pipeline under `code_mode.tools`, its records and activities, its clock
//! without approval waits, its limits, interrupts and end, on the virtual clock.

use super::{call, calls_answered, replay_valid, replayed, Harness};
use crate::codemode::text::{CellState, ToolErrorCode, CODE_BYTES};
use crate::config::code_mode::CodePolicies;
use crate::config::{Hook, Hooks, Policy};
use crate::history::{ActivityState, Body, Item, RunOutcome};
use crate::providers::ModelEvent;
use crate::run::fuzzing::{config, with_code, CLIENT_TOOL};
use crate::run::{
    Config, Input, InterruptReason, Output, Persistence, Reply, State, ToolEnd, Waiting,
};
use crate::tools::ToolOutcome;
use crate::wire::Event;
use protocol_core::limits::APPROVAL_EXPIRY_MS;
use protocol_core::ErrorCode;
use serde_json::{json, Value};

const T0: u64 = 1_000;
const TIMEOUT_MS: u64 = 10_000;

/// The fuzz configuration with `exec` offered, code policies `code`, `max_calls` calls.
pub(super) fn code_config(code: CodePolicies, max_calls: u32) -> Config {
    with_code(
        config(200_000, Hooks::default()),
        code,
        max_calls,
        TIMEOUT_MS,
    )
}

fn exec(id: &str, code: &str) -> ModelEvent {
    call(id, "exec", json!({ "code": code }))
}

/// A harness whose first step calls `exec` (and `more`), started at [`T0`] with its cell
/// out.
pub(super) fn cell(cfg: Config, more: Vec<ModelEvent>) -> Harness {
    let mut step = vec![exec(
        "x1",
        "const a = await tools.read_file({path: 'a'})\nreturn a",
    )];
    step.extend(more);
    let mut h = Harness::new(cfg, vec![step]);
    h.start(T0);
    assert_eq!(h.cells.len(), 1, "the cell started");
    h
}

/// The code calls `name` with `input` as call `n`, at the clock's time.
fn code_call(h: &mut Harness, n: u64, name: &str, input: Value) {
    h.feed(Input::Call {
        call: n,
        name: name.into(),
        input,
        more: false,
        refused: None,
        id: None,
    });
    h.pump();
}

/// The code calls `(name, input)` of `calls` from call `first` on, sent together.
pub(super) fn code_calls_together(h: &mut Harness, first: u64, calls: &[(&str, Value)]) {
    for (i, (name, input)) in calls.iter().enumerate() {
        h.feed(Input::Call {
            call: first + i as u64,
            name: (*name).into(),
            input: input.clone(),
            more: i + 1 < calls.len(),
            refused: None,
            id: None,
        });
    }
    h.pump();
}

/// The sizes of the tool batches the driver was given.
pub(super) fn batches(h: &Harness) -> Vec<usize> {
    h.outputs
        .iter()
        .filter_map(|o| match o {
            Output::Tools { jobs, .. } => Some(jobs.len()),
            _ => None,
        })
        .collect()
}

pub(super) fn ended(h: &mut Harness, state: CellState, output: &str) {
    h.feed(Input::CellEnded {
        state,
        output: output.into(),
        elapsed_ms: h.now - T0,
    });
    h.pump();
}

/// The stored nested calls: seq, name, output, is_error; each names `x1`, its `code_call`
/// (without output) stored before its `code_result`, paired by `seq`.
pub(super) fn code_calls(h: &Harness) -> Vec<(u64, String, String, bool)> {
    /// A call's seq and name, and its end once read.
    type Read = (u64, String, Option<(String, bool)>);
    let mut calls: Vec<Read> = Vec::new();
    for r in &h.store {
        match &r.body {
            Body::CellCall {
                call_id,
                seq,
                name,
                output,
                is_error,
                ..
            } => {
                assert_eq!(call_id, "x1");
                assert_eq!(
                    (output, is_error),
                    (&None, &None),
                    "a new code_call has no output"
                );
                assert!(calls.iter().all(|c| c.0 != *seq), "one code_call per seq");
                calls.push((*seq, name.clone(), None));
            }
            Body::CellResult {
                call_id,
                seq,
                output,
                is_error,
                ..
            } => {
                assert_eq!(call_id, "x1");
                let c = calls.iter_mut().find(|c| c.0 == *seq);
                let c = c.expect("a code_result follows its code_call");
                assert!(c.2.is_none(), "one code_result per call");
                c.2 = Some((output.clone(), *is_error));
            }
            _ => {}
        }
    }
    calls
        .into_iter()
        .map(|(seq, name, end)| {
            let (output, is_error) = end.expect("every stored code_call has its code_result");
            (seq, name, output, is_error)
        })
        .collect()
}

/// The final state and summary of every activity named `name`.
pub(super) fn finals(h: &Harness, name: &str) -> Vec<(ActivityState, String)> {
    h.store
        .iter()
        .filter_map(|r| match &r.body {
            Body::Activity {
                name: n,
                state,
                summary,
                ..
            } if n == name && *state != ActivityState::Started => {
                Some((*state, summary.clone().unwrap_or_default()))
            }
            _ => None,
        })
        .collect()
}

fn err(code: ToolErrorCode) -> impl Fn(&Reply) -> bool {
    move |r| matches!(r, Err((c, _)) if *c == code)
}

#[test]
fn two_nested_reads_are_answered_in_issue_order_with_code_call_records() {
    let mut h = cell(code_config(CodePolicies::default(), 200), vec![]);
    assert_eq!(h.cells[0].max_calls, 200);
    assert!(h.cells[0].tools.iter().all(|t| t.name != "exec"));
    // The second is issued while the first runs: it waits its turn.
    code_call(&mut h, 7, "read_file", json!({"path": "a"}));
    code_call(&mut h, 8, "read_file", json!({"path": "b"}));
    assert_eq!(batches(&h), [1, 1]);
    let order: Vec<_> = h.jobs.iter().map(|j| j.input["path"].clone()).collect();
    assert_eq!(order, [json!("a"), json!("b")]);
    assert_eq!(
        h.answers,
        [
            (7, Ok("out of read_file".to_owned())),
            (8, Ok("out of read_file".to_owned()))
        ]
    );
    h.now = T0 + 1_234;
    ended(&mut h, CellState::Completed, "two files");
    let (output, is_error) = h.result_of("x1");
    assert_eq!(output, "exec completed\nin 1.2 s, 2 tool calls\ntwo files");
    assert!(!is_error);
    let calls = code_calls(&h);
    assert_eq!(calls.len(), 2);
    assert_eq!((calls[0].0, calls[1].0), (0, 1));
    assert!(calls.iter().all(|c| c.1 == "read_file" && !c.3));
    // Nested activities say `code: `, between exec's started and final entries.
    let nested = finals(&h, "read_file");
    assert_eq!(nested.len(), 2);
    assert!(nested
        .iter()
        .all(|(s, t)| *s == ActivityState::Completed && t.starts_with("code: read_file")));
    let exec = finals(&h, "exec");
    assert_eq!(
        exec,
        [(ActivityState::Completed, "exec: 2 lines".to_owned())]
    );
    let at = |f: &dyn Fn(&Body) -> bool| h.store.iter().position(|r| f(&r.body)).unwrap();
    let exec_call = at(&|b| matches!(b, Body::ToolCall { call_id, .. } if call_id == "x1"));
    let first = at(&|b| matches!(b, Body::CellCall { .. }));
    let result = at(&|b| matches!(b, Body::ToolResult { call_id, .. } if call_id == "x1"));
    assert!(exec_call < first && first < result);
    // Only exec is a tool call: the nested ones are never replayed to the model.
    let replayed_calls: Vec<_> = replayed(&h.store)
        .into_iter()
        .filter_map(|i| match i {
            Item::ToolCall { call_id, .. } => Some(call_id),
            _ => None,
        })
        .collect();
    assert_eq!(replayed_calls, ["x1"]);
    calls_answered(&h.store).unwrap();
    replay_valid(&h.store).unwrap();
    assert_eq!(h.the_end().outcome, RunOutcome::Completed);
}

#[test]
fn direct_deny_does_not_stop_a_call_from_code() {
    let mut cfg = code_config(CodePolicies::default(), 200);
    cfg.policies.read = Policy::Deny;
    let mut h = cell(cfg, vec![]);
    code_call(&mut h, 1, "read_file", json!({"path": "a"}));
    assert_eq!(h.answers, [(1, Ok("out of read_file".to_owned()))]);
    ended(&mut h, CellState::Completed, "");
    assert_eq!(h.jobs.len(), 1);
}

#[test]
fn code_deny_stops_a_call_that_a_direct_allow_would_run() {
    let code = CodePolicies {
        read: Policy::Deny,
        ..CodePolicies::default()
    };
    let mut h = cell(
        code_config(code, 200),
        vec![call("d1", "read_file", json!({"path": "d"}))],
    );
    code_call(&mut h, 1, "read_file", json!({"path": "a"}));
    assert_eq!(h.answers.len(), 1);
    assert!(
        err(ToolErrorCode::Denied)(&h.answers[0].1),
        "{:?}",
        h.answers
    );
    assert!(h.jobs.is_empty(), "the nested read never ran");
    ended(&mut h, CellState::Failed, "ToolError: denied");
    // The direct read after exec runs under the direct policy (allow).
    assert_eq!(h.jobs.len(), 1);
    assert_eq!(h.result_of("d1").0, "out of read_file");
    assert_eq!(code_calls(&h)[0].2, "denied by policy");
    assert_eq!(finals(&h, "exec")[0].0, ActivityState::Failed);
}

#[test]
fn the_cell_clock_stops_while_a_nested_call_awaits_its_approval() {
    let mut h = cell(code_config(CodePolicies::default(), 200), vec![]);
    assert_eq!(h.idle().until, Some(T0 + TIMEOUT_MS));
    h.now = 3_000;
    code_call(
        &mut h,
        1,
        "write_file",
        json!({"path": "w", "content": "x"}),
    );
    let Some(Waiting::Approval(id)) = h.idle().waiting else {
        panic!("no approval: {:?}", h.run.state());
    };
    assert_eq!(h.run.state(), State::AwaitingApproval);
    let asked = h.events().into_iter().find_map(|e| match e {
        Event::ApprovalRequested(d) => Some(d.summary.clone()),
        _ => None,
    });
    assert!(
        asked.unwrap().starts_with("code: "),
        "the approval says code"
    );
    // Only the approval's own expiry is pending while it waits.
    assert_eq!(h.idle().until, Some(3_000 + APPROVAL_EXPIRY_MS));
    h.now = 50_000;
    h.feed(Input::Approval {
        approval_id: id,
        allow: true,
    });
    h.pump();
    assert_eq!(h.answers, [(1, Ok("out of write_file".to_owned()))]);
    // 47,000 ms awaited the approval: the 10,000 ms end there later.
    let end = T0 + TIMEOUT_MS + 47_000;
    assert_eq!(h.idle().until, Some(end));
    h.now = end - 1;
    h.feed(Input::Tick);
    h.pump();
    assert!(h.interrupts.is_empty());
    h.now = end;
    h.feed(Input::Tick);
    h.pump();
    assert_eq!(h.interrupts, [InterruptReason::Timeout]);
    // Asked for once: the helper ends the cell.
    h.now = end + 50;
    h.feed(Input::Tick);
    h.pump();
    assert_eq!(h.interrupts.len(), 1);
    ended(&mut h, CellState::TimedOut, "");
    let (output, is_error) = h.result_of("x1");
    assert_eq!(output.lines().next(), Some("exec timed out"));
    assert!(is_error);
    assert_eq!(finals(&h, "exec")[0].0, ActivityState::Failed);
    assert_eq!(h.the_end().outcome, RunOutcome::Completed);
}

#[test]
fn the_max_calls_th_call_runs_and_the_next_is_limit_with_no_record() {
    let mut h = cell(code_config(CodePolicies::default(), 2), vec![]);
    for n in 0..3 {
        code_call(&mut h, n, "read_file", json!({ "path": format!("f{n}") }));
    }
    assert_eq!(h.jobs.len(), 2);
    assert!(h.answers[..2].iter().all(|(_, r)| r.is_ok()));
    assert!(
        err(ToolErrorCode::Limit)(&h.answers[2].1),
        "{:?}",
        h.answers
    );
    ended(&mut h, CellState::Completed, "");
    // Past `max_calls` (decisions.md 52): no record, no activity, and N counts the records.
    let calls = code_calls(&h);
    assert_eq!(calls.iter().map(|c| c.0).collect::<Vec<_>>(), [0, 1]);
    assert_eq!(finals(&h, "read_file").len(), 2);
    let (output, _) = h.result_of("x1");
    assert_eq!(output.lines().nth(1), Some("in 0.0 s, 2 tool calls"));
}

#[test]
fn a_failed_code_call_append_runs_no_call_and_ends_the_run_degraded() {
    let mut h = cell(code_config(CodePolicies::default(), 5), vec![]);
    let appends = h.appends.len();
    h.fail = Box::new(move |n, _| (n == appends).then_some(ErrorCode::PersistenceFailed));
    code_call(&mut h, 0, "read_file", json!({"path": "f0"}));
    assert!(
        h.jobs.is_empty(),
        "a call whose record is not stored never runs"
    );
    assert!(
        err(ToolErrorCode::Failed)(&h.answers[0].1),
        "{:?}",
        h.answers
    );
    assert_eq!(h.interrupts, [InterruptReason::Cancel]);
    ended(&mut h, CellState::Cancelled, "");
    let end = h.the_end();
    assert_eq!(end.persistence, Persistence::Degraded);
    assert_eq!(end.error_code, Some(ErrorCode::PersistenceFailed));
}

#[test]
fn exec_itself_and_names_not_offered_are_unknown_tools() {
    let mut h = cell(code_config(CodePolicies::default(), 200), vec![]);
    code_call(&mut h, 1, "exec", json!({"code": "return 1"}));
    code_call(&mut h, 2, "no_such_tool", json!({}));
    assert!(h.cells.len() == 1, "no second cell");
    assert!(h
        .answers
        .iter()
        .all(|(_, r)| err(ToolErrorCode::UnknownTool)(r)));
    assert_eq!(h.answers.len(), 2);
    ended(&mut h, CellState::Completed, "");
    let calls = code_calls(&h);
    assert_eq!(
        (calls[0].1.as_str(), calls[1].1.as_str()),
        ("exec", "no_such_tool")
    );
    let exec = finals(&h, "exec");
    assert_eq!(exec.len(), 2, "the nested exec's activity and exec's own");
    assert!(exec[0].1.starts_with("code: "));
}

#[test]
fn bad_input_and_repeats_throw_their_codes() {
    let mut h = cell(code_config(CodePolicies::default(), 200), vec![]);
    code_call(&mut h, 1, "read_file", json!("not an object"));
    code_call(&mut h, 2, "read_file", json!({"path": 5}));
    for n in 3..6 {
        code_call(&mut h, n, "grep", json!({"pattern": "x"}));
    }
    let codes: Vec<_> = h
        .answers
        .iter()
        .map(|(_, r)| r.clone().err().map(|e| e.0))
        .collect();
    let invalid = Some(ToolErrorCode::InvalidInput);
    let limit = Some(ToolErrorCode::Limit);
    assert_eq!(codes, [invalid, invalid, None, None, limit]);
}

#[test]
fn code_over_256_kib_never_runs() {
    let big = "a".repeat(CODE_BYTES + 1);
    let mut h = Harness::new(
        code_config(CodePolicies::default(), 200),
        vec![vec![exec("x1", &big)]],
    );
    h.start(T0);
    assert!(h.cells.is_empty());
    assert_eq!(
        h.result_of("x1"),
        ("exec refused: code over 256 KiB".to_owned(), true)
    );
    assert_eq!(finals(&h, "exec")[0].0, ActivityState::Failed);
}

#[test]
fn a_cell_times_out_at_exactly_its_wall_clock() {
    let mut h = cell(code_config(CodePolicies::default(), 200), vec![]);
    h.now = T0 + TIMEOUT_MS - 1;
    h.feed(Input::Tick);
    h.pump();
    assert!(h.interrupts.is_empty());
    h.now = T0 + TIMEOUT_MS;
    h.feed(Input::Tick);
    h.pump();
    assert_eq!(h.interrupts, [InterruptReason::Timeout]);
    // A call the code still issues is cancelled.
    code_call(&mut h, 1, "read_file", json!({"path": "a"}));
    assert!(err(ToolErrorCode::Cancelled)(&h.answers[0].1));
    assert!(h.jobs.is_empty());
    ended(&mut h, CellState::TimedOut, "");
    assert!(h
        .result_of("x1")
        .0
        .starts_with("exec timed out\nin 10.0 s, 1 tool calls"));
}

#[test]
fn cancel_during_a_nested_shell_call_interrupts_and_cancels_it() {
    let code = CodePolicies {
        shell: Policy::Allow,
        ..CodePolicies::default()
    };
    let mut h = cell(code_config(code, 200), vec![]);
    h.hold_tools = true;
    code_call(&mut h, 1, "shell", json!({"command": "sleep 100"}));
    assert_eq!(h.jobs.len(), 1);
    h.cancel();
    h.pump();
    assert_eq!(h.interrupts, [InterruptReason::Cancel]);
    // The driver's cancelled shell ends as cancelled; the code gets `cancelled`.
    h.feed(Input::ToolsEnded(vec![ToolEnd {
        outcome: Some(ToolOutcome::fail("cancelled")),
        lost: None,
    }]));
    h.pump();
    assert!(
        err(ToolErrorCode::Cancelled)(&h.answers[0].1),
        "{:?}",
        h.answers
    );
    ended(&mut h, CellState::Cancelled, "");
    assert_eq!(h.result_of("x1").0.lines().next(), Some("exec cancelled"));
    assert_eq!(h.the_end().outcome, RunOutcome::Cancelled);
    assert_eq!(h.requests.len(), 1, "no step after the cancel");
    calls_answered(&h.store).unwrap();
    replay_valid(&h.store).unwrap();
}

#[test]
fn cancel_while_a_nested_call_awaits_approval_ends_the_wait() {
    let mut h = cell(code_config(CodePolicies::default(), 200), vec![]);
    code_call(&mut h, 1, "shell", json!({"command": "ls"}));
    assert_eq!(h.run.state(), State::AwaitingApproval);
    h.cancel();
    h.pump();
    assert_eq!(h.interrupts, [InterruptReason::Cancel]);
    assert!(h.idle().waiting.is_none());
    assert!(err(ToolErrorCode::Cancelled)(&h.answers[0].1));
    ended(&mut h, CellState::Cancelled, "");
    assert_eq!(h.the_end().outcome, RunOutcome::Cancelled);
}

#[test]
fn a_cell_that_ends_under_its_nested_call_cancels_it() {
    let mut h = cell(code_config(CodePolicies::default(), 200), vec![]);
    h.hold_tools = true;
    code_call(&mut h, 1, "read_file", json!({"path": "a"}));
    code_call(&mut h, 2, "read_file", json!({"path": "b"}));
    ended(&mut h, CellState::Failed, "Error: gone");
    assert!(h.answers.is_empty(), "no code waits for them");
    let calls = code_calls(&h);
    assert_eq!(calls.len(), 2, "each call issued has its record");
    assert!(calls.iter().all(|c| c.3 && c.2.contains("cancelled")));
    // A late end of the abandoned job changes nothing.
    h.feed(Input::ToolsEnded(vec![ToolEnd {
        outcome: Some(ToolOutcome::fail("late")),
        lost: None,
    }]));
    h.pump();
    assert_eq!(h.result_of("x1").0.lines().next(), Some("exec failed"));
    assert!(matches!(h.outputs.last(), Some(Output::Finished(_))));
    calls_answered(&h.store).unwrap();
}

#[test]
fn a_blocking_hook_and_a_failing_tool_throw_blocked_and_failed() {
    let mut cfg = code_config(CodePolicies::default(), 200);
    cfg.hooks.pre_tool = vec![Hook {
        command: "guard".into(),
        tools: Some(vec!["grep".into()]),
    }];
    let mut h = cell(cfg, vec![]);
    h.hook_status = 2;
    code_call(&mut h, 1, "grep", json!({"pattern": "x"}));
    assert!(
        err(ToolErrorCode::Blocked)(&h.answers[0].1),
        "{:?}",
        h.answers
    );
    h.hold_tools = true;
    code_call(&mut h, 2, "read_file", json!({"path": "a"}));
    h.feed(Input::ToolsEnded(vec![ToolEnd {
        outcome: Some(ToolOutcome::fail("not found")),
        lost: None,
    }]));
    h.pump();
    assert_eq!(
        h.answers[1],
        (2, Err((ToolErrorCode::Failed, "not found".to_owned())))
    );
    h.hold_tools = false;
    ended(&mut h, CellState::Completed, "");
    assert_eq!(finals(&h, "grep")[0].0, ActivityState::Failed);
    let nested = finals(&h, "read_file");
    assert_eq!(nested[0].0, ActivityState::Failed);
    assert!(nested[0].1.starts_with("code: "));
}

#[test]
fn a_nested_client_tool_is_asked_and_a_cell_end_cancels_it() {
    let code = CodePolicies {
        client: Policy::Allow,
        ..CodePolicies::default()
    };
    let mut h = cell(code_config(code, 200), vec![]);
    code_call(&mut h, 1, CLIENT_TOOL, json!({"q": 1}));
    let Some(Waiting::ClientCall(id)) = h.idle().waiting else {
        panic!("not asking the client: {:?}", h.run.state());
    };
    h.feed(Input::ClientResult {
        call_id: id,
        ok: true,
        output: "client says".into(),
    });
    h.pump();
    assert_eq!(h.answers, [(1, Ok("client says".to_owned()))]);
    code_call(&mut h, 2, CLIENT_TOOL, json!({"q": 2}));
    let Some(Waiting::ClientCall(second)) = h.idle().waiting else {
        panic!("not asking the client");
    };
    ended(&mut h, CellState::Failed, "");
    let told = h
        .events()
        .into_iter()
        .any(|e| matches!(e, Event::ClientToolCancel(d) if d.call_id == second));
    assert!(told, "the client hears the call is cancelled");
    assert!(code_calls(&h)[1].3);
}

#[test]
fn a_direct_deny_of_exec_starts_no_cell() {
    let mut cfg = code_config(CodePolicies::default(), 200);
    cfg.policies.code = Policy::Deny;
    let mut h = Harness::new(cfg, vec![vec![exec("x1", "return 1")]]);
    h.start(T0);
    assert!(h.cells.is_empty());
    assert_eq!(h.result_of("x1"), ("denied by policy".to_owned(), true));
}

/// Nested calls join the runaway row right after their `exec` call, before the step's
/// next calls (`code-mode.md` 8).
#[test]
fn nested_calls_join_the_runaway_row_after_their_exec_call() {
    let same = json!({"path": "a"});
    let mut h = cell(
        code_config(CodePolicies::default(), 200),
        vec![call("d1", "read_file", same.clone())],
    );
    code_call(&mut h, 1, "read_file", same.clone());
    code_call(&mut h, 2, "read_file", same);
    assert!(h.answers.iter().all(|(_, r)| r.is_ok()), "{:?}", h.answers);
    ended(&mut h, CellState::Completed, "");
    let (output, is_error) = h.result_of("d1");
    assert!(
        is_error && output.starts_with("refused: you repeated"),
        "{output}"
    );
}
