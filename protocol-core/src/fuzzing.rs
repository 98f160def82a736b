//! Entry points shared by the cargo-fuzz targets and the corpus-replay tests. Each asserts
//! the invariants that must hold for any input; a panic here is a bug.
//!
//! Test support: compiled only with the `testing` feature (it drives [`crate::sim::Sim`]).

use crate::framing::{FrameEvent, LineAt, LineDecoder};
use crate::ids::RequestId;
use crate::limits::{
    INPUT_FRAME_BYTES, OUTPUT_FRAME_BYTES, PENDING_OUTPUT_FRAMES, READ_BATCH_BYTES,
};
use crate::sim::{ready_view, request, Sim};
use crate::worker::{OpOutcome, WorkerEvent};

/// Feeds `data` to a decoder in chunks whose sizes come from the data itself.
pub fn framing(data: &[u8]) {
    let mut d = LineDecoder::new();
    let mut rest = data;
    let mut step = 1usize;
    while !rest.is_empty() {
        let n = rest.len().min(step);
        let chunk = &rest[..n];
        let f = d.feed(chunk);
        assert!(f.consumed <= chunk.len());
        assert!(d.buffered_len() <= INPUT_FRAME_BYTES);
        match f.event {
            Some(FrameEvent::TooLarge) => return,
            Some(FrameEvent::Line(LineAt::Input(r))) => {
                assert!(r.end < f.consumed && chunk[r.end] == b'\n');
                assert!(!chunk[r.clone()].contains(&b'\n'));
            }
            Some(FrameEvent::Line(LineAt::Buffered)) => {
                assert!(!d.buffered().contains(&b'\n'));
                d.clear();
            }
            None => assert_eq!(f.consumed, chunk.len()),
        }
        rest = &rest[f.consumed..];
        step = step % 7919 + chunk.first().map_or(1, |b| *b as usize + 1);
    }
    d.finish();
}

/// Parses `data` as one line: never panics, and echoes an ID only when it is well-formed.
pub fn envelope(data: &[u8]) {
    if let Err(r) = crate::envelope::parse(data) {
        if let Some(id) = r.id {
            assert!(crate::ids::is_id_grammar(id.as_str()));
        }
    }
}

/// Drives a whole simulated child with `data` as client input (first byte picks the write
/// chunk, stalls and EOF) and checks the transport invariants.
pub fn engine(data: &[u8]) {
    let Some((&mode, input)) = data.split_first() else {
        return;
    };
    let mut sim = Sim::new();
    sim.write_chunk = 1 + (mode as usize % 5) * 1000;
    // Mode bit 0x20: a run is active and emits events between the client's writes.
    let run = (mode & 0x20 != 0).then(|| start_run(&mut sim));
    for chunk in input.chunks(READ_BATCH_BYTES + 13) {
        if let Some(run) = &run {
            if sim.engine.accepts_worker_event() {
                let critical = chunk.first().is_some_and(|b| b & 1 == 1);
                sim.worker(WorkerEvent::RunEvent {
                    run_id: run.clone(),
                    name: "message.delta".into(),
                    data: serde_json::json!({"session_id": "s1", "run_id": run, "part": chunk.len()}),
                    critical,
                });
            }
            sim.stalled = chunk.last().is_some_and(|b| b & 2 == 2);
        }
        sim.send(chunk);
        if mode & 0x40 != 0 {
            sim.advance(700);
        }
        assert!(sim.max_buffered_input <= INPUT_FRAME_BYTES + READ_BATCH_BYTES);
        assert!(sim.max_queued <= PENDING_OUTPUT_FRAMES);
    }
    if let Some(run) = &run {
        sim.stalled = false;
        sim.run();
        if sim.engine.accepts_worker_event() {
            sim.worker(WorkerEvent::RunFinished {
                run_id: run.clone(),
                data: serde_json::json!({"session_id": "s1", "run_id": run, "outcome": "completed"}),
                view: None,
            });
        }
    }
    if mode & 0x80 != 0 {
        sim.close_input();
    }
    sim.advance(5_000);
    check_frames(&sim);
}

/// Initializes, attaches session `s1` and admits a run; returns its ID.
fn start_run(sim: &mut Sim) -> String {
    sim.send(&request(
        "fz-init",
        "initialize",
        &serde_json::json!({"required_capabilities": []}),
    ));
    sim.send(&request(
        "fz-create",
        "session.create",
        &serde_json::json!({}),
    ));
    let mut view = ready_view();
    view.session_id = Some("s1".into());
    if let Some(id) = RequestId::new("fz-create") {
        sim.worker(WorkerEvent::OpDone {
            id,
            outcome: OpOutcome::Result(serde_json::json!({})),
            view: Some(view),
        });
    }
    sim.send(&request(
        "fz-turn",
        "turn.start",
        &serde_json::json!({"session_id": "s1", "prompt": "go"}),
    ));
    if let Some(id) = RequestId::new("fz-turn") {
        sim.worker(WorkerEvent::TurnAdmitted {
            id,
            run_id: "run-1".into(),
        });
    }
    "run-1".into()
}

/// Every written frame is one JSON object within the output bound, and `seq` goes 1, 2, 3, …
pub fn check_frames(sim: &Sim) {
    for (expect, line) in (1u64..).zip(sim.lines()) {
        assert!(line.len() < OUTPUT_FRAME_BYTES);
        let v: serde_json::Value = serde_json::from_slice(line).expect("frames are JSON");
        assert_eq!(
            v["seq"].as_u64(),
            Some(expect),
            "seq strictly increases by one"
        );
        assert_eq!(v["instance_id"].as_str(), Some(sim.engine.instance_id()));
        let has_result = v.get("result").is_some();
        let has_error = v.get("error").is_some();
        if v["type"] == "response" {
            assert!(has_result != has_error, "exactly one of result/error");
            if has_error {
                assert_eq!(v["error"].as_object().map(serde_json::Map::len), Some(1));
            }
        }
    }
}
