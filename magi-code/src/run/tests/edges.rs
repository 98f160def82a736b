//! The machine's timers and failure paths at their edges, on the virtual clock.

use super::{call, calls_answered, replay_valid, text, usage, write, Harness};
use crate::config::Hooks;
use crate::history::compact::Snapshot;
use crate::history::{Body, Item, RunOutcome};
use crate::run::fuzzing::{config, CLIENT_TOOL};
use crate::run::{AppendKind, Input, Output, Persistence, State, Waiting};
use crate::wire::Event;
use protocol_core::limits::{APPROVAL_EXPIRY_MS, CLIENT_TOOL_TIMEOUT_MS};
use protocol_core::ErrorCode;
use serde_json::json;

/// Starts at `t0` a run whose first step writes (policy `ask`) and whose second replies.
fn awaiting_approval(t0: u64) -> (Harness, String) {
    let mut h = Harness::with(vec![vec![text("let me write"), write("c1")]]);
    h.start(t0);
    let Some(Waiting::Approval(id)) = h.idle().waiting else {
        panic!("not waiting for the approval: {:?}", h.run.state());
    };
    assert_eq!(h.run.state(), State::AwaitingApproval);
    // The approval is registered before its request goes out, which names it.
    let opened = h
        .outputs
        .iter()
        .position(|o| *o == Output::OpenApproval(id.clone()))
        .expect("opened");
    let asked = h
        .outputs
        .iter()
        .position(|o| matches!(o, Output::Event(Event::ApprovalRequested(d)) if d.approval_id == id && d.expires_in_ms == APPROVAL_EXPIRY_MS))
        .expect("asked");
    assert!(opened < asked);
    (h, id)
}

/// The run went on past the call to its second step, and completed durably.
fn went_on(h: &Harness) {
    assert_eq!(h.requests.len(), 2, "a second step");
    let f = h.the_end();
    assert_eq!(
        (f.outcome, f.persistence, f.error_code),
        (RunOutcome::Completed, Persistence::Durable, None)
    );
    calls_answered(&h.store).unwrap();
    replay_valid(&h.store).unwrap();
}

#[test]
fn approval_expires_at_60000_ms_and_the_call_is_denied() {
    let t0 = 5_000;
    let (mut h, _) = awaiting_approval(t0);
    assert_eq!(APPROVAL_EXPIRY_MS, 60_000);
    assert_eq!(h.idle().until, Some(t0 + 60_000));
    h.now = t0 + 59_999;
    h.feed(Input::Tick);
    h.pump();
    assert_eq!(
        h.run.state(),
        State::AwaitingApproval,
        "59,999 ms: still waiting"
    );
    assert!(h.finished().is_empty());
    h.now = t0 + 60_000;
    h.feed(Input::Tick);
    h.pump();
    // An expired approval is a denial (`runner.md` 2), saying why.
    let (output, is_error) = h.result_of("c1");
    assert!(
        is_error && output.starts_with("denied by the user"),
        "{output}"
    );
    assert!(output.contains("expired"), "{output}");
    assert!(h.jobs.is_empty(), "the write never ran");
    went_on(&h);
    // The step after carries the error result.
    let second = &h.requests[1].items;
    assert!(second
        .iter()
        .any(|i| matches!(i, Item::ToolResult { call_id, is_error: true, .. } if call_id == "c1")));
}

#[test]
fn an_answer_after_expiry_is_ignored() {
    let (mut h, id) = awaiting_approval(0);
    h.now = 60_000;
    h.feed(Input::Tick);
    h.pump();
    let before = h.outputs.len();
    h.feed(Input::Approval {
        approval_id: id,
        allow: true,
    });
    h.pump();
    assert_eq!(h.outputs.len(), before, "nothing after the end");
    assert!(h.jobs.is_empty());
    went_on(&h);
}

#[test]
fn an_allowed_call_runs_and_a_denied_one_does_not() {
    for allow in [true, false] {
        let (mut h, id) = awaiting_approval(0);
        // An answer to another approval changes nothing.
        h.feed(Input::Approval {
            approval_id: "00000000-0000-4000-8000-00000000dead".into(),
            allow: true,
        });
        h.pump();
        assert_eq!(h.run.state(), State::AwaitingApproval);
        h.now = 59_999;
        h.feed(Input::Approval {
            approval_id: id,
            allow,
        });
        h.pump();
        assert_eq!(h.jobs.len(), usize::from(allow), "allow {allow}");
        let (output, is_error) = h.result_of("c1");
        if allow {
            assert_eq!(output, "out of write_file");
        } else {
            assert!(
                is_error && output.starts_with("denied by the user"),
                "{output}"
            );
        }
        went_on(&h);
    }
}

/// Starts at `t0` a run whose first step calls the client's tool.
fn awaiting_client(t0: u64) -> (Harness, String) {
    let mut h = Harness::with(vec![vec![call("k1", CLIENT_TOOL, json!({"q": 1}))]]);
    h.start(t0);
    let Some(Waiting::ClientCall(id)) = h.idle().waiting else {
        panic!("not waiting for the client: {:?}", h.run.state());
    };
    assert_eq!(h.run.state(), State::AwaitingClientTool);
    assert!(h.outputs.iter().any(
        |o| matches!(o, Output::Event(Event::ClientToolCall(d)) if d.call_id == id && d.name == CLIENT_TOOL)
    ));
    assert!(h.jobs.is_empty(), "the backend never runs a client tool");
    (h, id)
}

fn cancels_of(h: &Harness, id: &str) -> usize {
    h.events()
        .iter()
        .filter(|e| matches!(e, Event::ClientToolCancel(d) if d.call_id == id))
        .count()
}

#[test]
fn a_client_tool_times_out_at_120000_ms_and_is_cancelled() {
    let t0 = 777;
    let (mut h, id) = awaiting_client(t0);
    assert_eq!(CLIENT_TOOL_TIMEOUT_MS, 120_000);
    assert_eq!(h.idle().until, Some(t0 + 120_000));
    h.now = t0 + 119_999;
    h.feed(Input::Tick);
    h.pump();
    assert_eq!(h.run.state(), State::AwaitingClientTool);
    assert_eq!(cancels_of(&h, &id), 0);
    h.now = t0 + 120_000;
    h.feed(Input::Tick);
    h.pump();
    assert_eq!(cancels_of(&h, &id), 1, "client.tool.cancel on timeout");
    let (output, is_error) = h.result_of("k1");
    assert!(is_error && output.contains("timed out"), "{output}");
    // A late answer is ignored.
    h.feed(Input::ClientResult {
        call_id: id,
        ok: true,
        output: "late".into(),
    });
    h.pump();
    went_on(&h);
}

#[test]
fn a_client_answer_just_before_the_deadline_is_the_result() {
    let (mut h, id) = awaiting_client(0);
    h.now = 119_999;
    h.feed(Input::ClientResult {
        call_id: "someone-else".into(),
        ok: true,
        output: "wrong".into(),
    });
    h.pump();
    assert_eq!(h.run.state(), State::AwaitingClientTool);
    h.feed(Input::ClientResult {
        call_id: id.clone(),
        ok: true,
        output: "from the client".into(),
    });
    h.pump();
    assert_eq!(cancels_of(&h, &id), 0);
    assert_eq!(h.result_of("k1"), ("from the client".into(), false));
    went_on(&h);
}

/// A cancelled run ends its wait at once and finishes `cancelled`, every call answered.
fn cancelled_at_once(h: &mut Harness, call_id: &str) {
    let before = h.inputs;
    h.cancel();
    assert_eq!(h.idle().waiting, None, "the wait ends at once");
    assert_eq!(h.idle().until, None);
    h.pump();
    let f = h.the_end();
    assert_eq!(
        (f.outcome, f.persistence),
        (RunOutcome::Cancelled, Persistence::Durable)
    );
    // The step's append and the final one: no further model request.
    let after = h.inputs - before - 1;
    assert!(after <= 2, "{after} inputs after the cancel");
    assert_eq!(h.requests.len(), 1);
    let (output, is_error) = h.result_of(call_id);
    assert!(is_error && output.contains("cancelled"), "{output}");
    assert!(h.jobs.is_empty());
    calls_answered(&h.store).unwrap();
    replay_valid(&h.store).unwrap();
}

#[test]
fn cancel_while_awaiting_an_approval_ends_the_wait_at_once() {
    let (mut h, _) = awaiting_approval(0);
    h.now = 10;
    cancelled_at_once(&mut h, "c1");
}

#[test]
fn cancel_while_awaiting_a_client_tool_ends_the_wait_at_once() {
    let (mut h, id) = awaiting_client(0);
    h.now = 10;
    cancelled_at_once(&mut h, "k1");
    assert_eq!(cancels_of(&h, &id), 1, "the client is told");
}

/// A configuration whose history is a finished turn after a measured request of `tokens`.
fn measured(tokens: u64) -> crate::run::Config {
    let mut cfg = config(10_000, Hooks::default());
    cfg.history = Snapshot {
        inputs: vec!["first".into()],
        after: vec![
            Item::User {
                text: "first".into(),
            },
            Item::Assistant {
                text: "answer".into(),
            },
        ],
        records: 4,
        last_input_tokens: Some(tokens),
        ..Snapshot::default()
    };
    cfg
}

fn summarized(h: &Harness) -> bool {
    h.outputs.iter().any(|o| matches!(o, Output::Summarize(_)))
}

#[test]
fn compaction_before_a_step_starts_past_80_percent_of_the_window() {
    // The estimate is the last usage plus a token per 4 bytes stored since: the input's line.
    let mut probe = Harness::new(measured(0), vec![]);
    probe.start(0);
    let line = serde_json::to_vec(&probe.store[0]).unwrap().len() as u64 + 1;
    let edge = 8_000 - line / 4;
    let mut at = Harness::new(measured(edge), vec![]);
    at.start(0);
    assert!(!summarized(&at), "exactly 80% is not past it");
    assert_eq!(at.requests.len(), 1);
    let mut past = Harness::new(measured(edge + 1), vec![]);
    past.start(0);
    assert!(summarized(&past), "one token past 80% compacts");
    let kinds: Vec<_> = past.appends.iter().map(|a| a.0).collect();
    assert_eq!(
        kinds,
        [
            AppendKind::Input,
            AppendKind::Compaction,
            AppendKind::Compaction,
            AppendKind::Final
        ]
    );
    assert!(past.store.iter().any(|r| matches!(
        &r.body,
        Body::Compaction { summary: Some(s), .. } if s == "the summary so far"
    )));
    // The step after it sends the summary, not the old turn.
    let items = &past.requests[0].items;
    assert!(items
        .iter()
        .any(|i| matches!(i, Item::User { text } if text.contains("the summary so far"))));
    assert!(!items
        .iter()
        .any(|i| matches!(i, Item::Assistant { text } if text == "answer")));
    let f = past.the_end();
    assert_eq!(
        (f.outcome, f.persistence),
        (RunOutcome::Completed, Persistence::Durable)
    );
    replay_valid(&past.store).unwrap();
}

#[test]
fn a_step_whose_usage_passes_80_percent_compacts_mid_turn() {
    let script = |tokens| {
        vec![vec![
            usage(tokens),
            call("c1", "read_file", json!({"path": "a.txt"})),
        ]]
    };
    let mut low = Harness::new(config(10_000, Hooks::default()), script(6_000));
    low.start(0);
    assert!(!summarized(&low));
    let mut high = Harness::new(config(10_000, Hooks::default()), script(8_001));
    high.start(0);
    assert!(summarized(&high));
    assert_eq!(high.requests.len(), 2);
    // Mid-turn: the turn's input, call and result stay verbatim after the summary.
    let items = &high.requests[1].items;
    assert!(items
        .iter()
        .any(|i| matches!(i, Item::User { text } if text == "do the thing")));
    assert!(items
        .iter()
        .any(|i| matches!(i, Item::ToolResult { call_id, .. } if call_id == "c1")));
    super::valid_request(items).unwrap();
    let f = high.the_end();
    assert_eq!(
        (f.outcome, f.persistence),
        (RunOutcome::Completed, Persistence::Durable)
    );
    replay_valid(&high.store).unwrap();
}

#[test]
fn an_input_that_cannot_be_stored_fails_the_run_not_started() {
    let mut h = Harness::with(vec![]);
    h.fail =
        Box::new(|_, kind| (kind == AppendKind::Input).then_some(ErrorCode::PersistenceFailed));
    h.start(0);
    let f = h.the_end();
    assert_eq!(
        (f.outcome, f.persistence, f.revision.clone(), f.error_code),
        (
            RunOutcome::Failed,
            Persistence::NotStarted,
            None,
            Some(ErrorCode::PersistenceFailed)
        )
    );
    assert!(
        h.requests.is_empty(),
        "no provider work before the input is durable"
    );
    assert!(!h
        .events()
        .iter()
        .any(|e| matches!(e, Event::InputPersisted(_))));
    assert_eq!(h.appends.len(), 1);
}

#[test]
fn a_step_that_cannot_be_stored_degrades_the_run() {
    let mut h = Harness::with(vec![vec![call("c1", "read_file", json!({"path": "a"}))]]);
    h.fail = Box::new(|_, kind| (kind == AppendKind::Step).then_some(ErrorCode::PersistenceFailed));
    h.start(0);
    let f = h.the_end();
    assert_eq!(
        (f.outcome, f.persistence, f.revision.clone(), f.error_code),
        (
            RunOutcome::Failed,
            Persistence::Degraded,
            None,
            Some(ErrorCode::PersistenceFailed)
        )
    );
    // The run does not go on with a conversation the history does not hold.
    assert_eq!(h.requests.len(), 1);
    calls_answered(&h.store).unwrap();
    replay_valid(&h.store).unwrap();
}

#[test]
fn a_final_append_that_fails_is_degraded_and_never_durable() {
    let mut h = Harness::with(vec![]);
    h.fail =
        Box::new(|_, kind| (kind == AppendKind::Final).then_some(ErrorCode::PersistenceFailed));
    h.start(0);
    let f = h.the_end();
    assert_eq!(
        (f.persistence, f.revision.clone()),
        (Persistence::Degraded, None)
    );
    assert_eq!(f.error_code, Some(ErrorCode::PersistenceFailed));
}

#[test]
fn a_lost_output_fails_the_run_output_unavailable() {
    let (mut h, _) = awaiting_approval(0);
    h.feed(Input::OutputLost);
    assert_eq!(h.idle().waiting, None);
    let before = h.outputs.len();
    h.pump();
    assert!(
        !h.outputs[before..]
            .iter()
            .any(|o| matches!(o, Output::Event(_) | Output::Delta { .. })),
        "nothing is sent once the output is lost"
    );
    let f = h.the_end();
    assert_eq!(
        (f.outcome, f.error_code),
        (RunOutcome::Failed, Some(ErrorCode::OutputUnavailable))
    );
    // Its records are still stored whole.
    assert_eq!(f.persistence, Persistence::Durable);
    calls_answered(&h.store).unwrap();
    replay_valid(&h.store).unwrap();
}

#[test]
fn inputs_before_the_start_and_after_the_end_are_ignored() {
    let mut h = Harness::with(vec![]);
    h.feed(Input::Cancel);
    h.feed(Input::Appended(Err(ErrorCode::PersistenceFailed)));
    assert_eq!(h.run.state(), State::Admitted);
    assert!(
        matches!(h.run.poll_output(), Some(Output::Idle(_))),
        "idle, not started"
    );
    h.cancelled_at = None;
    h.start(0);
    assert_eq!(h.the_end().outcome, RunOutcome::Completed);
    h.feed(Input::Cancel);
    h.feed(Input::Tick);
    h.run.start(1);
    assert_eq!(h.run.poll_output(), None);
    assert_eq!(h.run.state(), State::Finished);
}

/// Runs a step of `n` calls to a tool not offered (each answered at once) on a thread with
/// a worker's default 2 MiB stack.
fn refused_calls_on_a_worker_stack(n: usize) {
    let done = std::thread::Builder::new()
        .stack_size(2 << 20)
        .spawn(move || {
            let calls = (0..n)
                .map(|i| call(&format!("c{i}"), "no_such_tool", json!({"i": i})))
                .collect();
            let mut h = Harness::with(vec![calls]);
            h.start(0);
            calls_answered(&h.store).unwrap();
            h.the_end().outcome
        })
        .unwrap()
        .join();
    assert_eq!(done.ok(), Some(RunOutcome::Completed));
}

#[test]
fn a_step_of_4096_refused_calls_fits_a_worker_stack() {
    // Anthropic's bound on one step's content blocks, the largest of the three wire APIs.
    refused_calls_on_a_worker_stack(crate::providers::anthropic::BLOCKS);
}

#[test]
fn a_cancel_while_the_input_is_stored_sends_no_request() {
    let mut h = Harness::with(vec![]);
    // Input 0 is the input's append outcome: the cancel comes just before it.
    h.cancel_at = Some(0);
    h.start(0);
    let f = h.the_end();
    assert_eq!(
        (f.outcome, f.persistence),
        (RunOutcome::Cancelled, Persistence::Durable)
    );
    assert!(h.requests.is_empty());
    assert!(h
        .events()
        .iter()
        .any(|e| matches!(e, Event::InputPersisted(_))));
}

#[test]
fn a_cancel_while_a_compaction_opens_sends_no_summary_request() {
    let mut probe = Harness::new(measured(0), vec![]);
    probe.start(0);
    let line = serde_json::to_vec(&probe.store[0]).unwrap().len() as u64 + 1;
    let mut h = Harness::new(measured(8_001 - line / 4), vec![]);
    // Input 1 is the outcome of the compaction's opening append.
    h.cancel_at = Some(1);
    h.start(0);
    assert!(!summarized(&h) && h.requests.is_empty());
    let f = h.the_end();
    assert_eq!(
        (f.outcome, f.persistence),
        (RunOutcome::Cancelled, Persistence::Durable)
    );
    // The compaction's activity is closed, for the client and in the store.
    let closed = |state| {
        h.store.iter().any(|r| {
            matches!(&r.body, Body::Activity { kind: crate::history::ActivityKind::Compaction, state: s, .. } if *s == state)
        })
    };
    assert!(closed(crate::history::ActivityState::Started));
    assert!(closed(crate::history::ActivityState::Failed));
    replay_valid(&h.store).unwrap();
}
