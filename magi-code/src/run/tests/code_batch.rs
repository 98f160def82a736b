//! Code Mode's batches on the machine side (`code-mode.md` 4): the calls the helper sends
//! together start as one batch, read-class ones up to 4 at once, others alone in issue order;
//! calls the helper refused are recorded and answered with its error.

use super::code::{batches, cell, code_calls, code_calls_together, code_config, ended, finals};
use super::{calls_answered, replay_valid};
use crate::codemode::text::{CellState, ToolErrorCode};
use crate::config::code_mode::CodePolicies;
use crate::history::ActivityState;
use crate::run::{Input, State, Waiting};
use serde_json::{json, Value};

#[test]
fn reads_sent_together_run_four_at_a_time_and_others_alone_in_issue_order() {
    let mut h = cell(code_config(CodePolicies::default(), 200), vec![]);
    let read = |p: &str| ("read_file", json!({ "path": p }));
    let calls: Vec<_> = ["a", "b", "c", "d", "e", "f"].map(read).to_vec();
    code_calls_together(&mut h, 10, &calls);
    assert_eq!(batches(&h), [4, 2]);
    let answered: Vec<u64> = h.answers.iter().map(|(c, _)| *c).collect();
    assert_eq!(answered, [10, 11, 12, 13, 14, 15]);
    // A write (ask) between reads splits them, and waits for its approval alone.
    code_calls_together(
        &mut h,
        20,
        &[
            read("g"),
            ("write_file", json!({"path": "w", "content": "x"})),
            read("h"),
        ],
    );
    assert_eq!(batches(&h), [4, 2, 1]);
    assert_eq!(h.run.state(), State::AwaitingApproval);
    let Some(Waiting::Approval(id)) = h.idle().waiting else {
        panic!("the write asks");
    };
    h.feed(Input::Approval {
        approval_id: id,
        allow: true,
    });
    h.pump();
    assert_eq!(batches(&h), [4, 2, 1, 1, 1]);
    let answered: Vec<u64> = h.answers.iter().skip(6).map(|(c, _)| *c).collect();
    assert_eq!(answered, [20, 21, 22]);
    ended(&mut h, CellState::Completed, "");
    let seqs: Vec<u64> = code_calls(&h).iter().map(|c| c.0).collect();
    assert_eq!(seqs, (0..9).collect::<Vec<_>>());
    calls_answered(&h.store).unwrap();
    replay_valid(&h.store).unwrap();
}

#[test]
fn calls_the_helper_refused_are_recorded_and_answered_with_its_error() {
    let mut h = cell(code_config(CodePolicies::default(), 200), vec![]);
    for (n, code) in [(1, ToolErrorCode::InvalidInput), (2, ToolErrorCode::Limit)] {
        h.feed(Input::Call {
            call: n,
            name: "read_file".into(),
            input: Value::Null,
            more: false,
            refused: Some((code, format!("refused {n}"))),
            id: None,
        });
        h.pump();
    }
    assert!(h.jobs.is_empty() && batches(&h).is_empty(), "never run");
    assert_eq!(
        h.answers,
        [
            (
                1,
                Err((ToolErrorCode::InvalidInput, "refused 1".to_owned()))
            ),
            (2, Err((ToolErrorCode::Limit, "refused 2".to_owned())))
        ]
    );
    ended(&mut h, CellState::Completed, "");
    let calls = code_calls(&h);
    assert_eq!(
        calls,
        [
            (0, "read_file".to_owned(), "refused 1".to_owned(), true),
            (1, "read_file".to_owned(), "refused 2".to_owned(), true)
        ]
    );
    let nested = finals(&h, "read_file");
    assert_eq!(nested.len(), 2);
    assert!(nested.iter().all(|(s, _)| *s == ActivityState::Failed));
}

#[test]
fn a_tick_while_the_helper_sends_a_group_starts_none_of_it() {
    let mut h = cell(code_config(CodePolicies::default(), 200), vec![]);
    let read = |call: u64, path: &str, more: bool| Input::Call {
        call,
        name: "read_file".into(),
        input: json!({ "path": path }),
        more,
        refused: None,
        id: None,
    };
    h.feed(read(0, "a", true));
    h.now += 5;
    h.feed(Input::Tick);
    h.pump();
    assert!(
        batches(&h).is_empty(),
        "nothing starts while the group comes in"
    );
    h.feed(read(1, "b", false));
    h.pump();
    assert_eq!(batches(&h), [2]);
    assert_eq!(h.answers.len(), 2);
}
