//! A provider that runs its own loop calls the turn's tools back mid-step (`run/callbacks.rs`,
//! `Origin::Step`), on the virtual clock: each call goes through the pipeline of a direct call
//! and is answered before the step ends; approval, denial, cancellation mid-call, a crash, and
//! the conversation that replays after.

use super::{calls_answered, replay_valid, Harness, CALLBACK};
use crate::codemode::text::ToolErrorCode;
use crate::history::{ActivityState, Body, RunOutcome};
use crate::providers::StepFailure;
use crate::run::{Input, Output, Persistence, Reply, State, ToolEnd, Waiting};
use crate::tools::ToolOutcome;
use serde_json::{json, Value};

/// A run whose first step the test plays, started.
fn held() -> Harness {
    let mut h = Harness::with(vec![]);
    h.hold_steps = true;
    h.start(1_000);
    assert_eq!(h.requests.len(), 1);
    assert_eq!(h.run.state(), State::Streaming);
    h
}

/// The provider calls `name` with `input` back as call `call`.
fn call_back(h: &mut Harness, call: u64, name: &str, input: Value) {
    h.feed(Input::Call {
        call,
        name: name.into(),
        input,
        more: false,
        refused: None,
        id: None,
    });
    h.pump();
}

/// The answer to call `call`.
fn answer(h: &Harness, call: u64) -> Option<&Reply> {
    h.answers.iter().find(|(c, _)| *c == call).map(|(_, r)| r)
}

/// The step ends with `text`; the run goes on to its end.
fn end_step(h: &mut Harness, text: &str) {
    h.feed(Input::Model(super::text(text)));
    h.feed(Input::StepEnded(Ok(())));
    h.pump();
}

/// The calls back stored, in order: call ID, name, and where its `tool_call` and
/// `tool_result` records are.
fn stored_calls(h: &Harness) -> Vec<(String, String, usize, Option<usize>)> {
    h.store
        .iter()
        .enumerate()
        .filter_map(|(at, r)| match &r.body {
            Body::ToolCall { call_id, name, .. } => {
                let result = h.store.iter().position(
                    |r| matches!(&r.body, Body::ToolResult { call_id: c, .. } if c == call_id),
                );
                Some((call_id.clone(), name.clone(), at, result))
            }
            _ => None,
        })
        .collect()
}

#[test]
fn a_call_back_mid_step_runs_as_a_direct_call_and_is_answered_before_the_step_ends() {
    let mut h = held();
    call_back(&mut h, 7, "read_file", json!({"path": "a.txt"}));
    assert_eq!(answer(&h, 7), Some(&Ok("out of read_file".to_owned())));
    assert_eq!(h.run.state(), State::Streaming, "the step still streams");
    // Its `tool_call` record was stored before the tool ran, its result after.
    let append = h
        .outputs
        .iter()
        .position(|o| matches!(o, Output::Append { records, .. } if records.iter().any(|r| matches!(r.body, Body::ToolCall { .. }))))
        .expect("the call's record");
    let ran = h
        .outputs
        .iter()
        .position(|o| matches!(o, Output::Tools { .. }))
        .expect("the tool ran");
    assert!(append < ran);
    end_step(&mut h, "read it");
    // Its activity is a direct call's: no `code: ` summary.
    let shown: Vec<(ActivityState, Option<String>)> = h
        .store
        .iter()
        .filter_map(|r| match &r.body {
            Body::Activity { state, summary, .. } => Some((*state, summary.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(shown.len(), 2, "{shown:?}");
    assert!(shown
        .iter()
        .all(|(_, s)| !s.as_deref().unwrap_or("").starts_with("code: ")));
    let f = h.the_end();
    assert_eq!(
        (f.outcome, f.persistence),
        (RunOutcome::Completed, Persistence::Durable)
    );
    assert_eq!(h.requests.len(), 1, "a call back needs no second step");
    let calls = stored_calls(&h);
    assert_eq!(calls.len(), 1);
    assert!(calls[0].0.starts_with(CALLBACK) && calls[0].1 == "read_file");
    assert!(calls[0].3.is_some_and(|r| r > calls[0].2));
    calls_answered(&h.store).unwrap();
    replay_valid(&h.store).unwrap();
}

#[test]
fn a_call_back_that_asks_waits_for_its_approval_and_a_denial_throws_denied() {
    for allow in [false, true] {
        let mut h = held();
        call_back(
            &mut h,
            1,
            "write_file",
            json!({"path": "w.txt", "content": "x"}),
        );
        assert_eq!(answer(&h, 1), None, "it waits");
        let Some(Waiting::Approval(id)) = h.idle().waiting else {
            panic!("no approval asked: {:?}", h.run.state());
        };
        assert_eq!(h.run.state(), State::AwaitingApproval);
        h.now += 500;
        h.feed(Input::Approval {
            approval_id: id,
            allow,
        });
        h.pump();
        let got = answer(&h, 1).expect("answered after the approval");
        if allow {
            assert!(got.is_ok(), "{got:?}");
            assert_eq!(h.jobs.len(), 1);
        } else {
            assert!(matches!(got, Err((ToolErrorCode::Denied, _))), "{got:?}");
            assert!(h.jobs.is_empty(), "a denied call never runs");
        }
        end_step(&mut h, "done");
        assert_eq!(h.the_end().outcome, RunOutcome::Completed);
        calls_answered(&h.store).unwrap();
        replay_valid(&h.store).unwrap();
    }
}

#[test]
fn an_approval_a_call_back_waits_for_expires_at_its_deadline() {
    let mut h = held();
    call_back(
        &mut h,
        1,
        "write_file",
        json!({"path": "w.txt", "content": "x"}),
    );
    let until = h.idle().until.expect("the approval's expiry");
    h.now = until - 1;
    h.feed(Input::Tick);
    h.pump();
    assert_eq!(answer(&h, 1), None);
    h.now = until;
    h.feed(Input::Tick);
    h.pump();
    assert!(matches!(
        answer(&h, 1),
        Some(Err((ToolErrorCode::Denied, _)))
    ));
}

#[test]
fn cancel_during_a_call_back_cuts_it_short_and_the_run_ends_cancelled() {
    let mut h = held();
    h.hold_tools = true;
    call_back(&mut h, 3, "shell", json!({"command": "sleep 100"}));
    assert_eq!(h.jobs.len(), 0, "shell asks first");
    let Some(Waiting::Approval(id)) = h.idle().waiting else {
        panic!("no approval asked");
    };
    h.feed(Input::Approval {
        approval_id: id,
        allow: true,
    });
    h.pump();
    assert_eq!(h.jobs.len(), 1, "the shell runs");
    h.cancel();
    h.pump();
    // The driver's cancelled shell ends as cancelled; the provider gets `cancelled`.
    h.feed(Input::ToolsEnded(vec![ToolEnd {
        outcome: Some(ToolOutcome::fail("cancelled")),
        lost: None,
    }]));
    h.pump();
    assert!(
        matches!(answer(&h, 3), Some(Err((ToolErrorCode::Cancelled, _)))),
        "{:?}",
        h.answers
    );
    h.feed(Input::StepEnded(Err(StepFailure::Cancelled)));
    h.pump();
    assert_eq!(h.the_end().outcome, RunOutcome::Cancelled);
    calls_answered(&h.store).unwrap();
    replay_valid(&h.store).unwrap();
}

#[test]
fn a_step_that_ends_under_its_call_back_cuts_it_short() {
    let mut h = held();
    h.hold_tools = true;
    call_back(&mut h, 4, "read_file", json!({"path": "a"}));
    assert_eq!(h.jobs.len(), 1);
    end_step(&mut h, "gone");
    assert_eq!(answer(&h, 4), None, "nobody waits for it any more");
    let f = h.the_end();
    assert_eq!(f.outcome, RunOutcome::Completed);
    calls_answered(&h.store).unwrap();
    replay_valid(&h.store).unwrap();
}

#[test]
fn a_crash_mid_call_back_leaves_its_call_on_disk_and_the_history_replays() {
    let mut h = held();
    h.hold_tools = true;
    call_back(&mut h, 5, "read_file", json!({"path": "a"}));
    h.crash_at = Some(h.inputs);
    h.feed(Input::ToolsEnded(vec![ToolEnd {
        outcome: Some(ToolOutcome::fail("late")),
        lost: None,
    }]));
    assert!(h.crashed);
    // The call is on disk without its result: replay answers it `no result`.
    let calls = stored_calls(&h);
    assert_eq!(calls.len(), 1);
    assert_eq!(calls[0].3, None);
    replay_valid(&h.store).unwrap();
}

#[test]
fn a_call_back_to_a_tool_not_offered_is_unknown_and_a_failed_record_degrades_the_run() {
    let mut h = held();
    call_back(&mut h, 6, "exec", json!({"code": "1"}));
    assert!(
        matches!(answer(&h, 6), Some(Err((ToolErrorCode::UnknownTool, _)))),
        "{:?}",
        h.answers
    );
    let appends = h.appends.len();
    h.fail =
        Box::new(move |n, _| (n == appends).then_some(protocol_core::ErrorCode::PersistenceFailed));
    call_back(&mut h, 8, "read_file", json!({"path": "b"}));
    assert!(matches!(
        answer(&h, 8),
        Some(Err((ToolErrorCode::Failed, _)))
    ));
    assert!(h.jobs.is_empty(), "a call whose record is lost never runs");
    end_step(&mut h, "so");
    let f = h.the_end();
    assert_eq!(
        (f.persistence, f.error_code),
        (
            Persistence::Degraded,
            Some(protocol_core::ErrorCode::PersistenceFailed)
        )
    );
}
