use crate::config::{Hooks, Policy};
use crate::history::compact::Snapshot;
use crate::history::room::Room;
use crate::providers::ModelEvent;
use crate::run::{AppendKind, Config, Input, Output, Persistence, Policies, Run, State, Stored};
use crate::tools::ToolRegistry;
use serde_json::json;
use std::sync::Arc;

fn config() -> Config {
    Config {
        session_id: "s".into(),
        run_id: "r".into(),
        record_session: "s".into(),
        quiet: false,
        seed: 7,
        prompt: "go".into(),
        history: Snapshot::default(),
        provider: "scripted".into(),
        fixed_bytes: 0,
        max_output_tokens: 1_000,
        max_steps: 2,
        context_window: u64::MAX,
        tools: Arc::new(ToolRegistry::builtin()),
        policies: Policies {
            read: Policy::Allow,
            write: Policy::Ask,
            shell: Policy::Ask,
            client: Policy::Ask,
            mcp: Policy::Ask,
            task: Policy::Allow,
            code: Policy::Allow,
        },
        hooks: Hooks::default(),
        tool_cards: true,
        tool_details: false,
        cwd: "/w".into(),
        left_out: None,
        code: None,
    }
}

fn stored() -> Input {
    Input::Appended(Ok(Stored {
        room: Some(Room::unbounded()),
        records: Some(1),
        revision: Some("rev".into()),
    }))
}

/// A step of 6,000 calls that all end at once (unknown tools, then past the activity bound)
/// runs as a loop: on a 256 KiB stack, where a chain of calls per call would overflow.
#[test]
fn thousands_of_calls_that_end_at_once_keep_a_flat_stack() {
    let worker = std::thread::Builder::new().stack_size(256 << 10);
    let finished = worker
        .spawn(|| {
            let mut run = Run::new(config());
            run.start(0);
            assert!(matches!(run.poll_output(), Some(Output::Append { .. })));
            run.handle(stored(), 1);
            while let Some(o) = run.poll_output() {
                if matches!(o, Output::Step(_) | Output::Idle(_)) {
                    break;
                }
            }
            for i in 0..6_000 {
                let call = ModelEvent::ToolCall {
                    call_id: format!("c{i}"),
                    name: "no_such_tool".into(),
                    input: json!({"n": i}),
                };
                run.handle(Input::Model(call), 2);
            }
            run.handle(Input::StepEnded(Ok(())), 3);
            let mut results = 0;
            let mut finished = None;
            while let Some(o) = run.poll_output() {
                match o {
                    Output::Append { records, kind } => {
                        results += records
                            .iter()
                            .filter(|r| matches!(r.body, crate::history::Body::ToolResult { .. }))
                            .count();
                        assert_ne!(kind, AppendKind::Step, "the activity bound ends the run");
                        run.handle(stored(), 4);
                    }
                    Output::Finished(f) => finished = Some(f),
                    Output::Idle(_) => break,
                    _ => {}
                }
            }
            assert_eq!(run.state(), State::Finished);
            (results, finished)
        })
        .unwrap()
        .join()
        .unwrap();
    assert_eq!(finished.0, 6_000, "every call is answered");
    let f = finished.1.unwrap();
    assert_eq!(f.persistence, Persistence::Durable);
    assert_eq!(f.error_code, Some(protocol_core::ErrorCode::ContentLimit));
}
