//! Random runs: steps of 0–4 calls of every sort, approvals and client answers given, denied
//! or left to expire, a cancel, an append failure and a crash at any point; the invariants
//! of `runner.md` 2 and 5 and of `run.finished` hold for each.

use super::{call, calls_answered, replay_valid, text, usage, valid_request, Harness, CALLBACK};
use crate::config::code_mode::CodePolicies;
use crate::config::{Hook, Hooks};
use crate::history::projection::Projection;
use crate::history::room::Room;
use crate::history::RunOutcome;
use crate::history::{Body, Record};
use crate::providers::ModelEvent;
use crate::run::fuzzing::{config, with_code, CLIENT_TOOL};
use crate::run::{AppendKind, Input, Output, Persistence, State, Waiting};
use proptest::prelude::*;
use protocol_core::ErrorCode;
use serde_json::json;

/// One tool call of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// A read built-in: runs unasked, batches with its neighbours.
    Read,
    /// A write built-in: asks.
    Write,
    /// A tool not offered.
    Unknown,
    /// Input that is not an object, or breaks the schema.
    Bad,
    /// The client's tool.
    Client,
    /// `exec`: its cell reads, writes (asks) and calls a tool not offered.
    Exec,
    /// A read the provider calls back mid-step (one that runs its own loop).
    CallBack,
    CallBackExec,
}

fn kind() -> impl Strategy<Value = Kind> {
    prop_oneof![
        4 => Just(Kind::Read),
        3 => Just(Kind::Write),
        1 => Just(Kind::Unknown),
        1 => Just(Kind::Bad),
        1 => Just(Kind::Client),
        1 => Just(Kind::Exec),
        2 => Just(Kind::CallBack),
        1 => Just(Kind::CallBackExec),
    ]
}

#[derive(Debug, Clone)]
struct Step {
    text: bool,
    usage: Option<u64>,
    calls: Vec<Kind>,
}

fn step() -> impl Strategy<Value = Step> {
    (
        any::<bool>(),
        prop_oneof![Just(None), Just(Some(1_000)), Just(Some(8_500))],
        prop::collection::vec(kind(), 0..5),
    )
        .prop_map(|(text, usage, calls)| Step { text, usage, calls })
}

#[derive(Debug, Clone)]
struct Plan {
    steps: Vec<Step>,
    /// Answers in turn: 0 allow, 1 deny, 2 let it expire (approvals); 0 ok, 1 failed, 2 time
    /// out (client calls).
    answers: Vec<u8>,
    cancel_at: Option<usize>,
    fail_at: Option<usize>,
    crash_at: Option<usize>,
    /// 0 unbounded, 1 a fresh projection's room, 2 none.
    room: u8,
    hooks: bool,
    small_window: bool,
}

fn plan() -> impl Strategy<Value = Plan> {
    (
        prop::collection::vec(step(), 0..5),
        prop::collection::vec(0..3u8, 0..8),
        prop::option::of(0..60usize),
        prop::option::of(0..12usize),
        prop::option::weighted(0.3, 0..80usize),
        prop_oneof![6 => Just(0u8), 3 => Just(1), 1 => Just(2)],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(steps, answers, cancel_at, fail_at, crash_at, room, hooks, small_window)| Plan {
                steps,
                answers,
                cancel_at,
                fail_at,
                crash_at,
                room,
                hooks,
                small_window,
            },
        )
}

fn script(steps: &[Step]) -> Vec<Vec<ModelEvent>> {
    steps
        .iter()
        .enumerate()
        .map(|(s, st)| {
            let mut ev = Vec::new();
            if st.text {
                ev.push(text(&format!("step {s}")));
            }
            for (i, k) in st.calls.iter().enumerate() {
                let id = format!("s{s}c{i}");
                ev.push(match k {
                    Kind::Read => call(&id, "read_file", json!({"path": format!("f{i}")})),
                    Kind::Write => call(&id, "write_file", json!({"path": "w", "content": id})),
                    Kind::Unknown => call(&id, "no_such_tool", json!({})),
                    Kind::Bad if i % 2 == 0 => call(&id, "read_file", json!("{not json")),
                    Kind::Bad => call(&id, "read_file", json!({"path": 5})),
                    Kind::Client => call(&id, CLIENT_TOOL, json!({"n": i})),
                    Kind::Exec => call(&id, "exec", json!({"code": format!("return {i}")})),
                    Kind::CallBackExec => call(
                        &format!("{CALLBACK}{id}"),
                        "exec",
                        json!({"code": format!("return {i}")}),
                    ),
                    Kind::CallBack => call(
                        &format!("{CALLBACK}{id}"),
                        "read_file",
                        json!({"path": format!("b{i}")}),
                    ),
                });
            }
            if let Some(t) = st.usage {
                ev.push(usage(t));
            }
            ev
        })
        .collect()
}

/// Runs `plan` to its end (or its crash); returns the harness and the writes allowed.
fn play(p: &Plan) -> (Harness, usize) {
    let hooks = if p.hooks {
        let hook = Hook {
            command: "check".into(),
            tools: Some(vec!["write_file".into(), "read_file".into()]),
        };
        Hooks {
            pre_tool: vec![hook.clone()],
            post_tool: vec![hook],
        }
    } else {
        Hooks::default()
    };
    let window = if p.small_window { 10_000 } else { 200_000 };
    let cfg = with_code(config(window, hooks), CodePolicies::default(), 200, 300_000);
    let mut h = Harness::new(cfg, script(&p.steps));
    h.helper = Some(vec![
        ("read_file".into(), json!({"path": "c"})),
        ("write_file".into(), json!({"path": "w", "content": "code"})),
        ("no_such_tool".into(), json!({})),
    ]);
    h.room = match p.room {
        0 => Room::unbounded(),
        1 => Room::left_by(&Projection::default()),
        _ => Room::none(),
    };
    let fail_at = p.fail_at;
    h.fail = Box::new(move |n, _| (Some(n) == fail_at).then_some(ErrorCode::PersistenceFailed));
    h.cancel_at = p.cancel_at;
    h.crash_at = p.crash_at;
    let mut answers = p.answers.iter().copied().cycle();
    let mut allowed = 0;
    h.start(1_000);
    for _ in 0..200 {
        if h.crashed || !h.finished().is_empty() {
            break;
        }
        let answer = answers.next().unwrap_or(0);
        match h.idle().waiting {
            Some(Waiting::Approval(id)) if answer < 2 => {
                allowed += usize::from(answer == 0);
                h.now += 1_000;
                h.feed(Input::Approval {
                    approval_id: id,
                    allow: answer == 0,
                });
            }
            Some(Waiting::ClientCall(id)) if answer < 2 => {
                h.now += 1_000;
                h.feed(Input::ClientResult {
                    call_id: id,
                    ok: answer == 0,
                    output: "client says".into(),
                });
            }
            Some(_) => {
                h.now = h.idle().until.expect("a deadline");
                h.feed(Input::Tick);
            }
            None => panic!(
                "stuck in {:?}: nothing asked, nothing awaited",
                h.run.state()
            ),
        }
        h.pump();
    }
    (h, allowed)
}

fn check(p: &Plan, h: &Harness, allowed: usize) -> Result<(), TestCaseError> {
    // Whole appends only: every stored call has its result; after a crash or a lost append,
    // but for the one `exec` whose cell ran (stored before it, answered at replay).
    if h.crashed || h.appends.iter().any(|a| !a.1) {
        let open_exec = h.store.iter().rev().find_map(|r| match &r.body {
            Body::ToolCall { call_id, name, .. } if name == "exec" => Some(call_id.clone()),
            _ => None,
        });
        let answered = h.store.iter().any(|r| {
            matches!(&r.body, Body::ToolResult { call_id, .. } if Some(call_id) == open_exec.as_ref())
        });
        // So is a provider's call back, stored before it ran.
        let unanswered = |id: &String| {
            (!answered && Some(id) == open_exec.as_ref())
                || (id.starts_with(CALLBACK)
                    && !h.store.iter().any(
                        |r| matches!(&r.body, Body::ToolResult { call_id, .. } if call_id == id),
                    ))
        };
        let store: Vec<_> = h
            .store
            .iter()
            .filter(|r| !matches!(&r.body, Body::ToolCall { call_id, .. } if unanswered(call_id)))
            .cloned()
            .collect();
        calls_answered(&store).map_err(TestCaseError::fail)?;
    } else {
        calls_answered(&h.store).map_err(TestCaseError::fail)?;
    }
    // Every request, and the conversation a later turn replays, is valid on every API.
    for r in &h.requests {
        valid_request(&r.items).map_err(TestCaseError::fail)?;
    }
    replay_valid(&h.store).map_err(TestCaseError::fail)?;
    // A write runs only when allowed.
    let writes = h.jobs.iter().filter(|j| j.name == "write_file").count();
    prop_assert!(writes <= allowed, "{writes} writes ran, {allowed} allowed");
    code_calls_in_order(&h.store).map_err(TestCaseError::fail)?;
    let finished = h.finished();
    if h.crashed {
        prop_assert!(finished.len() <= 1);
        return Ok(());
    }
    prop_assert_eq!(finished.len(), 1, "one Finished");
    // Every call back was answered before its step went on (reads ask nothing).
    let asked = p
        .steps
        .iter()
        .flat_map(|s| &s.calls)
        .filter(|k| matches!(k, Kind::CallBack | Kind::CallBackExec));
    let answered = h.callback_answers().len();
    prop_assert!(answered <= asked.count(), "{answered} answers");
    // A cell's calls may wait for an approval the played provider does not wait out.
    let cells = p
        .steps
        .iter()
        .any(|s| s.calls.contains(&Kind::CallBackExec));
    if h.cancelled_at.is_none() && h.appends.iter().all(|a| a.1) && !cells {
        prop_assert_eq!(answered, h.callbacks as usize, "every call back answered");
    }
    prop_assert!(matches!(h.outputs.last(), Some(Output::Finished(_))));
    prop_assert_eq!(h.run.state(), State::Finished);
    let f = finished[0];
    let input_failed = h.appends.first().is_some_and(|a| !a.1);
    let later_failed = h.appends.iter().skip(1).any(|a| !a.1);
    let want = if input_failed {
        Persistence::NotStarted
    } else if later_failed || h.appends.last().map(|a| a.0) != Some(AppendKind::Final) {
        Persistence::Degraded
    } else {
        Persistence::Durable
    };
    prop_assert_eq!(f.persistence, want, "appends {:?}", h.appends);
    if f.persistence == Persistence::Durable {
        prop_assert!(h.appends.iter().all(|a| a.1));
    } else {
        // Lost records never go unexplained: no revision, and a code that says why.
        prop_assert_eq!(f.revision.clone(), None);
        prop_assert!(f.error_code.is_some());
    }
    if f.persistence == Persistence::NotStarted {
        prop_assert_eq!(f.outcome, RunOutcome::Failed);
        prop_assert!(h.requests.is_empty(), "no step before the input is stored");
    }
    // A cancelled run asks the provider for nothing more.
    prop_assert_eq!(h.steps_after_cancel, 0);
    prop_assert_eq!(h.summaries_after_cancel, 0);
    if let Some(at) = h.cancelled_at {
        let after = h.inputs - at;
        let bound = 2 * h.pending_at_cancel + 4;
        prop_assert!(
            after <= bound,
            "{after} inputs after the cancel, bound {bound} (plan {p:?})"
        );
    }
    Ok(())
}

/// Each cell's `code_call` records come after its `exec` call, `seq` from 0 without gaps,
/// each `code_result` after its `code_call` (once); a cell whose `exec` has its result has
/// one `code_call` per call its code issued within `max_calls`, each with its result.
fn code_calls_in_order(store: &[Record]) -> Result<(), String> {
    use std::collections::{HashMap, HashSet};
    let mut seqs: HashMap<&str, u64> = HashMap::new();
    let mut ended: HashSet<(&str, u64)> = HashSet::new();
    for r in store {
        match &r.body {
            Body::ToolCall { call_id, name, .. } if name == "exec" => {
                seqs.insert(call_id, 0);
            }
            Body::CellCall { call_id, seq, .. } => {
                let next = seqs
                    .get_mut(call_id.as_str())
                    .ok_or_else(|| format!("code_call of {call_id} before its exec"))?;
                if *seq != *next {
                    return Err(format!("{call_id}: seq {seq}, expected {next}"));
                }
                *next += 1;
            }
            Body::CellResult { call_id, seq, .. } => {
                let issued = seqs.get(call_id.as_str()).copied().unwrap_or(0);
                if *seq >= issued || !ended.insert((call_id.as_str(), *seq)) {
                    return Err(format!(
                        "{call_id}: code_result {seq} without its code_call"
                    ));
                }
            }
            Body::ToolResult {
                call_id, output, ..
            } if seqs.contains_key(call_id.as_str()) => {
                let n = seqs[call_id.as_str()];
                let cell = output.starts_with("exec ");
                if cell
                    && !output.starts_with("exec refused")
                    && !output.contains(&format!("s, {n} tool calls"))
                {
                    return Err(format!("{call_id}: {n} records for {output:?}"));
                }
                let done = ended.iter().filter(|e| e.0 == call_id.as_str()).count();
                if cell && u64::try_from(done).ok() != Some(n) {
                    return Err(format!("{call_id}: {done} code_results of {n} calls"));
                }
            }
            _ => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1024, ..ProptestConfig::default() })]

    #[test]
    fn random_runs_keep_the_invariants(p in plan()) {
        let (h, allowed) = play(&p);
        check(&p, &h, allowed)?;
    }
}
