//! The engine's side of turns: admission, the live event stream under flow control, the run
//! terminal, and stopping while a run is active. The runner itself lives in the backend.

use protocol_core::sim::{ready_view, request, Sim};
use protocol_core::{OpOutcome, RequestId, State, WorkerCommand, WorkerEvent};
use serde_json::{json, Value};

fn req(id: &str, method: &str, params: Value) -> Vec<u8> {
    request(id, method, &params)
}

fn last(s: &Sim) -> Value {
    s.frames().last().cloned().unwrap()
}

fn code(v: &Value) -> Option<&str> {
    v["error"]["code"].as_str()
}

/// Ready and attached to session "s1".
fn attached() -> Sim {
    let mut s = Sim::new();
    s.send(&req(
        "init",
        "initialize",
        json!({"required_capabilities": []}),
    ));
    s.send(&req("c", "session.create", json!({})));
    let mut view = ready_view();
    view.session_id = Some("s1".into());
    s.worker(WorkerEvent::OpDone {
        id: RequestId::new("c").unwrap(),
        outcome: OpOutcome::Result(
            json!({"session_id":"s1","durable":false,"revision":"r0","notices":[]}),
        ),
        view: Some(view),
    });
    s
}

fn start(s: &mut Sim, id: &str) -> String {
    s.send(&req(
        id,
        "turn.start",
        json!({"session_id":"s1","prompt":"hi"}),
    ));
    assert!(matches!(
        s.commands.last(),
        Some(WorkerCommand::StartTurn { .. })
    ));
    let run_id = format!("run-{id}");
    s.worker(WorkerEvent::TurnAdmitted {
        id: RequestId::new(id).unwrap(),
        run_id: run_id.clone(),
    });
    run_id
}

fn event(run: &str, name: &str, critical: bool) -> WorkerEvent {
    WorkerEvent::RunEvent {
        run_id: run.into(),
        name: name.into(),
        data: json!({"session_id":"s1","run_id":run}),
        critical,
    }
}

fn finished(run: &str) -> WorkerEvent {
    WorkerEvent::RunFinished {
        run_id: run.into(),
        data: json!({"session_id":"s1","run_id":run,"outcome":"completed","persistence":"durable","revision":"r1","error_code":null}),
        view: None,
    }
}

#[test]
fn admission_checks_the_attachment() {
    let mut s = Sim::new();
    s.send(&req(
        "init",
        "initialize",
        json!({"required_capabilities": []}),
    ));
    s.send(&req(
        "t0",
        "turn.start",
        json!({"session_id":"s1","prompt":"hi"}),
    ));
    assert_eq!(code(&last(&s)), Some("session_missing"));
    let mut s = attached();
    s.send(&req(
        "t1",
        "turn.start",
        json!({"session_id":"other","prompt":"hi"}),
    ));
    assert_eq!(code(&last(&s)), Some("stale_session"));
    s.send(&req(
        "t2",
        "turn.start",
        json!({"session_id":"s1","prompt":"   "}),
    ));
    assert_eq!(code(&last(&s)), Some("invalid_params"));
    s.send(&req(
        "t3",
        "turn.start",
        json!({"session_id":"s1","prompt":"hi"}),
    ));
    s.worker(WorkerEvent::TurnRejected {
        id: RequestId::new("t3").unwrap(),
        code: protocol_core::ErrorCode::StaleSelection,
    });
    assert_eq!(code(&last(&s)), Some("stale_selection"));
    assert!(s.engine.active_run().is_none());
}

#[test]
fn a_run_streams_events_after_its_admission_and_ends_with_its_terminal() {
    let mut s = attached();
    let run = start(&mut s, "t1");
    assert_eq!(last(&s)["result"], json!({"run_id": run, "accepted": true}));
    s.send(&req("st", "status", json!({})));
    assert_eq!(last(&s)["result"]["state"], "running");
    assert_eq!(last(&s)["result"]["run_id"], run.as_str());
    s.worker(event(&run, "input.persisted", true));
    s.worker(event(&run, "message.delta", false));
    let f = last(&s);
    assert_eq!(f["type"], "event");
    assert_eq!(f["event"], "message.delta");
    assert!(f.get("id").is_none());
    // Busy while the run is active.
    s.send(&req(
        "t2",
        "turn.start",
        json!({"session_id":"s1","prompt":"again"}),
    ));
    assert_eq!(code(&last(&s)), Some("busy"));
    s.send(&req("o", "session.open", json!({"session_id":"s1"})));
    assert_eq!(code(&last(&s)), Some("busy"));
    // Cancel and approvals are checked against the active run.
    s.send(&req(
        "x1",
        "turn.cancel",
        json!({"session_id":"s1","run_id":"nope"}),
    ));
    assert_eq!(code(&last(&s)), Some("stale_run"));
    s.send(&req(
        "x2",
        "approval.answer",
        json!({"session_id":"s1","run_id":"nope","approval_id":"a","allow":true}),
    ));
    assert_eq!(code(&last(&s)), Some("stale_approval"));
    s.send(&req(
        "x3",
        "approval.answer",
        json!({"session_id":"s1","run_id":run,"approval_id":"a","allow":true}),
    ));
    assert!(matches!(
        s.commands.last(),
        Some(WorkerCommand::AnswerApproval { allow: true, .. })
    ));
    s.worker(WorkerEvent::Reply {
        id: RequestId::new("x3").unwrap(),
        outcome: OpOutcome::Result(json!({"recorded": true})),
    });
    assert_eq!(last(&s)["result"], json!({"recorded": true}));
    s.send(&req(
        "x4",
        "turn.cancel",
        json!({"session_id":"s1","run_id":run}),
    ));
    assert_eq!(last(&s)["result"], json!({"cancellation_requested": true}));
    s.send(&req(
        "x5",
        "turn.cancel",
        json!({"session_id":"s1","run_id":run}),
    ));
    assert_eq!(
        last(&s)["result"],
        json!({"cancellation_requested": true}),
        "idempotent for the active run"
    );
    s.worker(finished(&run));
    assert_eq!(last(&s)["event"], "run.finished");
    // No event after the terminal.
    s.worker(event(&run, "message.delta", false));
    assert_eq!(last(&s)["event"], "run.finished");
    s.send(&req(
        "x6",
        "turn.cancel",
        json!({"session_id":"s1","run_id":run}),
    ));
    assert_eq!(code(&last(&s)), Some("stale_run"));
    s.send(&req("st2", "status", json!({})));
    assert_eq!(last(&s)["result"]["state"], "idle");
    assert_eq!(last(&s)["result"]["run_id"], Value::Null);
    protocol_core::fuzzing::check_frames(&s);
}

#[test]
fn deltas_drop_before_numbering_and_critical_events_wait_for_room() {
    let mut s = attached();
    let run = start(&mut s, "t1");
    s.stalled = true;
    let mut many = Vec::new();
    for i in 0..32 {
        many.extend_from_slice(&req(&format!("q{i}"), "status", json!({})));
    }
    s.send(&many);
    assert_eq!(s.engine.queued_frames(), 32);
    s.worker(event(&run, "message.delta", false));
    assert_eq!(
        s.engine.queued_frames(),
        32,
        "a delta without room is dropped"
    );
    assert!(s.engine.accepts_worker_event());
    s.worker(event(&run, "message.reconcile", true));
    assert!(
        !s.engine.accepts_worker_event(),
        "a critical event waits, holding the channel"
    );
    s.stalled = false;
    s.run();
    assert!(s.engine.accepts_worker_event());
    assert_eq!(last(&s)["event"], "message.reconcile");
    // The dropped delta never got a seq: the numbering has no gap.
    protocol_core::fuzzing::check_frames(&s);
}

#[test]
fn shutdown_waits_for_the_run_terminal() {
    let mut s = attached();
    let run = start(&mut s, "t1");
    s.send(&req("bye", "shutdown", json!({})));
    assert!(s.commands.contains(&WorkerCommand::CancelRun {
        run_id: run.clone()
    }));
    assert_eq!(s.exit, None);
    s.advance(500);
    assert_eq!(s.exit, None);
    s.worker(finished(&run));
    assert_eq!(last(&s)["event"], "run.finished");
    assert_eq!(s.exit, Some(0));
}

#[test]
fn a_run_that_never_ends_fails_the_close() {
    let mut s = attached();
    start(&mut s, "t1");
    s.close_input();
    assert!(matches!(s.engine.state(), State::Stopping(_)));
    s.advance(1_999);
    assert_eq!(s.exit, None);
    s.advance(1);
    assert_eq!(s.exit, Some(1));
}

#[test]
fn a_turn_awaiting_admission_at_shutdown_is_still_answered() {
    let mut s = attached();
    s.send(&req(
        "t1",
        "turn.start",
        json!({"session_id":"s1","prompt":"hi"}),
    ));
    s.send(&req("bye", "shutdown", json!({})));
    assert!(s
        .commands
        .iter()
        .any(|c| matches!(c, WorkerCommand::CancelOp { id } if id.as_str() == "t1")));
    s.worker(WorkerEvent::TurnRejected {
        id: RequestId::new("t1").unwrap(),
        code: protocol_core::ErrorCode::OperationCancelled,
    });
    assert_eq!(last(&s)["id"], "t1");
    assert_eq!(code(&last(&s)), Some("operation_cancelled"));
    assert_eq!(s.exit, Some(0));
}
