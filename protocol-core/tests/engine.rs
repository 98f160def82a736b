//! Engine behaviour on a virtual clock: admission, state gates, flow control, deadlines and
//! the stopping sequence. Each protocol promise tested here names its spec sentence.

use protocol_core::sim::{ready_view, request, Sim};
use protocol_core::{
    ErrorCode, OpOutcome, Request, RequestId, State, StopPhase, WorkerCommand, WorkerEvent,
};
use serde_json::{json, Value};

fn req(id: &str, method: &str, params: Value) -> Vec<u8> {
    request(id, method, &params)
}

fn init(caps: &[&str]) -> Vec<u8> {
    req(
        "init",
        "initialize",
        json!({ "required_capabilities": caps }),
    )
}

fn ready(caps: &[&str]) -> Sim {
    let mut s = Sim::new();
    s.send(&init(caps));
    assert!(matches!(s.engine.state(), State::Ready(_)));
    s
}

fn last(s: &Sim) -> Value {
    s.frames().last().cloned().expect("a frame")
}

fn error_of(v: &Value) -> Option<&str> {
    v["error"]["code"].as_str()
}

fn by_id<'a>(frames: &'a [Value], id: &str) -> Vec<&'a Value> {
    frames.iter().filter(|f| f["id"] == id).collect()
}

#[test]
fn response_envelope_fields() {
    let s = ready(&["status"]);
    let f = last(&s);
    let o = f.as_object().unwrap();
    let mut keys: Vec<&str> = o.keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(
        keys,
        [
            "id",
            "instance_id",
            "protocol",
            "result",
            "seq",
            "type",
            "version"
        ]
    );
    assert_eq!(f["protocol"], "magi-code.local-agent");
    assert_eq!(f["version"], 1);
    assert_eq!(f["type"], "response");
    assert_eq!(f["seq"], 1);
    assert_eq!(f["result"]["capabilities"].as_array().unwrap().len(), 16);
    assert_eq!(f["result"]["limits"]["request_ids"], 4096);
    assert_eq!(f["result"]["status"]["state"], "idle");
}

#[test]
fn status_while_starting_is_answered_before_initialize() {
    let mut s = Sim::new();
    s.auto_init = None;
    s.send(&init(&[]));
    s.send(&req("st", "status", json!({})));
    s.send(&req(
        "init2",
        "initialize",
        json!({"required_capabilities": []}),
    ));
    s.send(&req("so", "session.open", json!({"session_id": "x"})));
    let f = s.frames();
    assert_eq!(f[0]["id"], "st");
    assert_eq!(
        f[0]["result"],
        json!({"state":"starting","readiness":"initializing","provider":null,"model":null,
               "context_id":null,"session_id":null,"run_id":null,"selection":null})
    );
    assert_eq!(error_of(&f[1]), Some("already_initialized"));
    assert_eq!(error_of(&f[2]), Some("not_initialized"));
    s.worker(WorkerEvent::InitReady { view: ready_view() });
    let f = s.frames();
    assert_eq!(f[3]["id"], "init");
    assert_eq!(f[3]["result"]["status"]["readiness"], "ready");
}

#[test]
fn failed_startup_is_sticky() {
    let mut s = Sim::new();
    s.auto_init = Some(WorkerEvent::InitFailed {
        code: ErrorCode::ConfigurationInvalid,
        provider: None,
        model: None,
        context_id: None,
    });
    s.send(&init(&[]));
    assert_eq!(error_of(&last(&s)), Some("configuration_invalid"));
    s.send(&req("st", "status", json!({})));
    assert_eq!(last(&s)["result"]["state"], "failed");
    assert_eq!(last(&s)["result"]["readiness"], "configuration_invalid");
    assert_eq!(last(&s)["result"]["selection"], Value::Null);
    s.send(&req(
        "i2",
        "initialize",
        json!({"required_capabilities": []}),
    ));
    assert_eq!(error_of(&last(&s)), Some("already_initialized"));
    s.send(&req("c", "session.create", json!({})));
    assert_eq!(error_of(&last(&s)), Some("configuration_invalid"));
}

#[test]
fn a_worker_reporting_a_non_startup_code_becomes_startup_failed() {
    let mut s = Sim::new();
    s.auto_init = Some(WorkerEvent::InitFailed {
        code: ErrorCode::Busy,
        provider: None,
        model: None,
        context_id: None,
    });
    s.send(&init(&[]));
    assert_eq!(error_of(&last(&s)), Some("startup_failed"));
}

#[test]
fn capability_preflight_allows_a_corrected_retry() {
    let mut s = Sim::new();
    s.send(&req(
        "a",
        "initialize",
        json!({"required_capabilities": ["tool.cards", "tool.nope"]}),
    ));
    assert_eq!(error_of(&last(&s)), Some("unsupported_capability"));
    s.send(&req(
        "b",
        "initialize",
        json!({"required_capabilities": ["nope.nope"]}),
    ));
    assert_eq!(error_of(&last(&s)), Some("unsupported_capability"));
    let seventeen: Vec<String> = (0..17).map(|i| format!("c{i}")).collect();
    s.send(&req(
        "c",
        "initialize",
        json!({"required_capabilities": seventeen}),
    ));
    assert_eq!(error_of(&last(&s)), Some("invalid_params"));
    s.send(&req(
        "d",
        "initialize",
        json!({"required_capabilities": ["bad name"]}),
    ));
    assert_eq!(error_of(&last(&s)), Some("invalid_params"));
    s.send(&req(
        "e",
        "initialize",
        json!({"required_capabilities": [], "x": 1}),
    ));
    assert_eq!(error_of(&last(&s)), Some("invalid_params"));
    s.send(&req(
        "f",
        "initialize",
        json!({"required_capabilities": ["status", "status"]}),
    ));
    assert_eq!(last(&s)["id"], "f");
    assert!(last(&s)["result"].is_object());
    assert!(
        s.commands
            .iter()
            .filter(|c| matches!(c, WorkerCommand::StartInit { .. }))
            .count()
            == 1
    );
}

#[test]
fn sixteen_capabilities_are_accepted() {
    let all: Vec<&str> = protocol_core::Capability::BASE
        .iter()
        .map(|c| c.as_str())
        .collect();
    let s = ready(&all);
    assert!(last(&s)["result"].is_object());
}

#[test]
fn optional_capabilities_need_negotiation() {
    let mut s = ready(&["status"]);
    for (m, p) in [
        ("session.discover", json!({})),
        ("model.catalog.status", json!({})),
        ("model.refresh", json!({"provider":"scripted"})),
        ("operation.cancel", json!({"request_id":"x"})),
    ] {
        s.send(&req(&format!("id-{m}"), m, p));
        assert_eq!(error_of(&last(&s)), Some("unsupported_capability"), "{m}");
    }
    let mut s = ready(&["session.discover"]);
    s.send(&req("d", "session.discover", json!({"limit": 5})));
    assert!(matches!(
        s.commands.last(),
        Some(WorkerCommand::StartOp {
            request: Request::SessionDiscover {
                limit: 5,
                cursor: None
            },
            ..
        })
    ));
}

#[test]
fn precedence_state_before_capability_before_params() {
    let mut s = Sim::new();
    s.send(&req("a", "session.discover", json!({"bogus": 1})));
    assert_eq!(error_of(&last(&s)), Some("not_initialized"));
    let mut s = ready(&[]);
    s.send(&req("b", "session.discover", json!({"bogus": 1})));
    assert_eq!(error_of(&last(&s)), Some("unsupported_capability"));
    s.send(&req("c", "session.open", json!({"bogus": 1})));
    assert_eq!(error_of(&last(&s)), Some("invalid_params"));
    s.send(&req("c2", "status", json!([])));
    assert_eq!(error_of(&last(&s)), Some("invalid_params"));
    s.send(b"{\"protocol\":\"magi-code.local-agent\",\"version\":1,\"id\":\"c3\",\"method\":\"status\",\"params\":{\"a\":{\"k\":1,\"\\u006b\":2}}}\n");
    assert_eq!(error_of(&last(&s)), Some("invalid_params"));
    s.send(&req("d", "no.such.method", json!({})));
    assert_eq!(error_of(&last(&s)), Some("unsupported_method"));
    assert_eq!(last(&s)["id"], "d");
}

#[test]
fn identity_errors_use_null_id() {
    let mut s = ready(&[]);
    for line in [
        &b"\n"[..],
        b"\r\n",
        b"[1]\n",
        b"{nope\n",
        b"{\"id\":\"a\",\"id\":\"b\"}\n",
        b"{\"id\":5}\n",
        b"\xff\xfe\n",
    ] {
        s.send(line);
        let f = last(&s);
        assert_eq!(f["id"], Value::Null, "{line:?}");
    }
    let codes: Vec<String> = s.frames()[1..]
        .iter()
        .map(|f| f["error"]["code"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        codes,
        [
            "invalid_frame",
            "invalid_frame",
            "invalid_request",
            "invalid_request",
            "invalid_request",
            "invalid_request",
            "invalid_request"
        ]
    );
    let deep = format!("{{\"a\":{}1{}}}\n", "[".repeat(32), "]".repeat(32));
    s.send(deep.as_bytes());
    assert_eq!(error_of(&last(&s)), Some("invalid_frame"));
    assert_eq!(last(&s)["id"], Value::Null);
    // Depth 32 (object + 31 arrays) parses and reaches the envelope checks.
    let ok_depth = format!("{{\"a\":{}1{}}}\n", "[".repeat(31), "]".repeat(31));
    s.send(ok_depth.as_bytes());
    assert_eq!(error_of(&last(&s)), Some("invalid_request"));
}

#[test]
fn duplicate_ids_never_reexecute() {
    let mut s = ready(&[]);
    s.send(&req("x", "status", json!({})));
    s.send(&req("x", "shutdown", json!({})));
    assert_eq!(error_of(&last(&s)), Some("duplicate_id"));
    assert_eq!(last(&s)["id"], "x");
    assert!(matches!(s.engine.state(), State::Ready(_)));
    // The initialize ID itself is retained too.
    s.send(&req("init", "status", json!({})));
    assert_eq!(error_of(&last(&s)), Some("duplicate_id"));
    // A rejected well-formed request's ID is retained.
    s.send(&req("u", "no.method", json!({})));
    s.send(&req("u", "status", json!({})));
    assert_eq!(error_of(&last(&s)), Some("duplicate_id"));
}

#[test]
fn request_limit_counts_rejected_requests_and_closes() {
    let mut s = ready(&[]);
    // "init" is ID 1; 4,095 more, half of them rejected.
    for i in 1..4096 {
        let m = if i % 2 == 0 { "status" } else { "no.method" };
        s.send(&req(&format!("r{i}"), m, json!({})));
    }
    assert_eq!(s.frames().len(), 4096);
    assert!(s.exit.is_none());
    s.send(&req("r1", "status", json!({})));
    assert_eq!(error_of(&last(&s)), Some("duplicate_id"));
    s.send(&req("one-too-many", "status", json!({})));
    assert_eq!(error_of(&last(&s)), Some("request_limit"));
    assert_eq!(last(&s)["id"], "one-too-many");
    s.send(&req("after", "status", json!({})));
    assert_eq!(s.frames().len(), 4098);
    assert_eq!(s.exit, Some(1));
}

#[test]
fn protocol_mismatch_closes_with_exit_1() {
    let mut s = ready(&[]);
    let mut line = serde_json::to_vec(&json!({"protocol":"magi-code.local-agent","version":2,"id":"v2","method":"status","params":{}})).unwrap();
    line.push(b'\n');
    line.extend_from_slice(&req("after", "status", json!({})));
    s.send(&line);
    assert_eq!(error_of(&last(&s)), Some("protocol_mismatch"));
    assert_eq!(last(&s)["id"], "v2");
    assert_eq!(s.frames().len(), 2);
    assert_eq!(s.exit, Some(1));
}

#[test]
fn frame_too_large_on_byte_65537_then_close() {
    let mut s = ready(&[]);
    let mut line = vec![b' '; 65_536];
    line.extend_from_slice(b"x");
    s.send(&line);
    assert_eq!(error_of(&last(&s)), Some("frame_too_large"));
    assert_eq!(last(&s)["id"], Value::Null);
    assert_eq!(s.exit, Some(1));
    assert!(s.max_buffered_input <= 65_536 + 4_096);
}

#[test]
fn largest_frame_is_accepted() {
    let mut s = ready(&[]);
    let base = req("big", "status", json!({}));
    let mut line = base[..base.len() - 2].to_vec(); // drop "}\n"
    line.resize(65_534, b' ');
    line.extend_from_slice(b"}\r\n");
    assert_eq!(line.len(), 65_537); // 65,536 bytes + LF, CR included
    s.send(&line);
    assert_eq!(last(&s)["id"], "big");
    assert!(last(&s)["result"].is_object());
}

#[test]
fn eof_mid_frame_gets_incomplete_frame_and_exit_0() {
    let mut s = ready(&[]);
    s.send(b"{\"protocol\":\"magi-code.local-agent\",\"version\":1,\"id\":\"p\",\"method\":\"shutdown\",\"params\":{}}");
    s.close_input();
    let f = last(&s);
    assert_eq!(error_of(&f), Some("incomplete_frame"));
    assert_eq!(f["id"], Value::Null);
    assert_eq!(s.exit, Some(0));
}

#[test]
fn eof_during_startup_cancels_it() {
    let mut s = Sim::new();
    s.auto_init = None;
    s.send(&init(&[]));
    s.close_input();
    assert_eq!(error_of(&last(&s)), Some("startup_cancelled"));
    assert!(s.commands.contains(&WorkerCommand::CancelStartup));
    assert_eq!(s.exit, Some(0));
    // A late readiness report changes nothing.
    s.worker(WorkerEvent::InitReady { view: ready_view() });
    assert_eq!(s.frames().len(), 1);
}

#[test]
fn shutdown_during_startup() {
    let mut s = Sim::new();
    s.auto_init = None;
    s.auto_cleanup = false;
    s.send(&init(&[]));
    s.send(&req("s", "shutdown", json!({})));
    s.send(&req("late", "status", json!({})));
    let f = s.frames();
    assert_eq!(f.len(), 2);
    assert_eq!(f[0]["id"], "s");
    assert_eq!(f[0]["result"], json!({"state":"stopping"}));
    assert_eq!(f[1]["id"], "init");
    assert_eq!(error_of(&f[1]), Some("startup_cancelled"));
    assert!(s.commands.contains(&WorkerCommand::CancelStartup));
    assert!(s.commands.contains(&WorkerCommand::Cleanup));
    assert_eq!(s.exit, None);
    // Cleanup wait: at most 2,000 ms, then exit anyway.
    s.advance(1_999);
    assert_eq!(s.exit, None);
    s.advance(1);
    assert_eq!(s.exit, Some(0));
}

#[test]
fn cleanup_done_ends_the_wait_early() {
    let mut s = ready(&[]);
    s.auto_cleanup = false;
    s.send(&req("s", "shutdown", json!({})));
    assert_eq!(s.exit, None);
    s.advance(10);
    s.worker(WorkerEvent::CleanupDone);
    assert_eq!(s.exit, Some(0));
}

#[test]
fn shutdown_before_initialize() {
    let mut s = Sim::new();
    s.send(&req("s", "shutdown", json!({})));
    assert_eq!(last(&s)["result"], json!({"state":"stopping"}));
    assert_eq!(s.exit, Some(0));
}

#[test]
fn a_stalled_reader_is_closed_by_the_output_deadline() {
    let mut s = ready(&[]);
    s.stalled = true;
    let mut many = Vec::new();
    for i in 0..100 {
        many.extend_from_slice(&req(&format!("s{i}"), "status", json!({})));
    }
    s.send(&many);
    // Flow control: at most 32 frames queued, the rest waits unparsed.
    assert_eq!(s.engine.queued_frames(), 32);
    assert!(!s.engine.wants_input());
    assert!(s.max_queued <= 32);
    s.advance(1_999);
    assert_eq!(s.exit, None);
    s.advance(1);
    assert_eq!(s.exit, Some(1));
}

#[test]
fn partial_writes_do_not_postpone_the_deadline() {
    let mut s = ready(&[]);
    s.stalled = true;
    s.send(&req("a", "status", json!({})));
    s.advance(1_500);
    s.engine.handle_written(10, s.now);
    s.advance(499);
    assert!(!matches!(s.engine.state(), State::Stopping(_)));
    s.advance(1);
    assert!(matches!(s.engine.state(), State::Stopping(st) if st.exit == 1));
}

#[test]
fn a_reading_client_can_pipeline_without_limit() {
    let mut s = ready(&[]);
    s.write_chunk = 777;
    let mut many = Vec::new();
    for i in 0..2_000 {
        many.extend_from_slice(&req(&format!("p{i}"), "status", json!({})));
    }
    s.send(&many);
    let f = s.frames();
    assert_eq!(f.len(), 2_001);
    assert!(f[1..]
        .iter()
        .enumerate()
        .all(|(i, v)| v["id"] == format!("p{i}")));
    assert!(s.max_queued <= 32);
}

#[test]
fn eof_with_a_stalled_writer_exits_1_after_the_closing_deadline() {
    let mut s = ready(&[]);
    s.stalled = true;
    s.send(&req("a", "status", json!({})));
    s.auto_cleanup = false;
    s.advance(100);
    s.close_input();
    // The frame's own deadline (2,000 ms from enqueue) comes before the closing deadline.
    s.advance(1_899);
    assert!(matches!(s.engine.state(), State::Stopping(st) if st.phase == StopPhase::Draining));
    s.advance(1);
    assert!(
        matches!(s.engine.state(), State::Stopping(st) if st.phase == StopPhase::CleanupWait && st.exit == 1)
    );
    s.advance(2_000);
    assert_eq!(s.exit, Some(1));
}

#[test]
fn broken_output_exits_1() {
    let mut s = ready(&[]);
    s.stalled = true;
    s.send(&req("a", "status", json!({})));
    s.engine.handle_output_error(s.now);
    s.run();
    assert_eq!(s.exit, Some(1));
}

fn op_id(s: &Sim) -> RequestId {
    match s
        .commands
        .iter()
        .rev()
        .find(|c| matches!(c, WorkerCommand::StartOp { .. }))
    {
        Some(WorkerCommand::StartOp { id, .. }) => id.clone(),
        _ => panic!("no op"),
    }
}

#[test]
fn one_session_operation_at_a_time() {
    let mut s = ready(&[]);
    s.send(&req("o1", "session.create", json!({})));
    s.send(&req("o2", "session.open", json!({"session_id":"abc"})));
    assert_eq!(error_of(&last(&s)), Some("busy"));
    s.send(&req("st", "status", json!({})));
    assert_eq!(last(&s)["id"], "st");
    let mut view = ready_view();
    view.session_id = Some("sess-1".into());
    s.worker(WorkerEvent::OpDone {
        id: op_id(&s),
        outcome: OpOutcome::Result(
            json!({"session_id":"sess-1","durable":false,"revision":"r1","notices":[]}),
        ),
        view: Some(view),
    });
    assert_eq!(last(&s)["id"], "o1");
    s.send(&req("st2", "status", json!({})));
    assert_eq!(last(&s)["result"]["session_id"], "sess-1");
    s.send(&req("o3", "session.open", json!({"session_id":"abc"})));
    assert!(matches!(
        s.commands.last(),
        Some(WorkerCommand::StartOp { .. })
    ));
}

#[test]
fn operation_cancel() {
    let mut s = ready(&["operation.cancel"]);
    s.send(&req("c0", "operation.cancel", json!({"request_id":"none"})));
    assert_eq!(error_of(&last(&s)), Some("stale_operation"));
    s.send(&req("o1", "session.list", json!({})));
    s.send(&req("c1", "operation.cancel", json!({"request_id":"o1"})));
    let f = s.frames();
    let n = f.len();
    assert_eq!(f[n - 2]["id"], "c1");
    assert_eq!(f[n - 2]["result"], json!({"cancellation_requested": true}));
    assert_eq!(f[n - 1]["id"], "o1");
    assert_eq!(error_of(&f[n - 1]), Some("operation_cancelled"));
    assert!(s
        .commands
        .iter()
        .any(|c| matches!(c, WorkerCommand::CancelOp { id } if id.as_str() == "o1")));
    // Until the worker reports, the worker is still busy; cancelling again is stale.
    s.send(&req("c2", "operation.cancel", json!({"request_id":"o1"})));
    assert_eq!(error_of(&last(&s)), Some("stale_operation"));
    s.send(&req("o2", "session.list", json!({})));
    assert_eq!(error_of(&last(&s)), Some("busy"));
    s.worker(WorkerEvent::OpDone {
        id: op_id(&s),
        outcome: OpOutcome::Error(ErrorCode::OperationCancelled),
        view: None,
    });
    assert_eq!(
        by_id(&s.frames(), "o1").len(),
        1,
        "one response per request"
    );
    s.send(&req("o3", "session.list", json!({})));
    assert_eq!(op_id(&s).as_str(), "o3");
}

#[test]
fn shutdown_cancels_a_session_operation() {
    let mut s = ready(&[]);
    s.send(&req("o1", "session.list", json!({})));
    s.send(&req("s", "shutdown", json!({})));
    let f = s.frames();
    assert_eq!(f[f.len() - 2]["id"], "s");
    assert_eq!(error_of(&f[f.len() - 1]), Some("operation_cancelled"));
    assert_eq!(s.exit, Some(0));
}

#[test]
fn seq_is_strictly_increasing_across_all_frames() {
    let mut s = ready(&[]);
    for i in 0..50 {
        s.send(&req(
            &format!("q{i}"),
            if i % 3 == 0 { "status" } else { "bad" },
            json!({}),
        ));
    }
    protocol_core::fuzzing::check_frames(&s);
}

#[test]
fn a_result_too_large_for_one_frame_is_content_limit_never_cut() {
    let mut s = ready(&[]);
    s.send(&req("big", "session.list", json!({})));
    s.worker(WorkerEvent::OpDone {
        id: op_id(&s),
        outcome: OpOutcome::Result(json!({ "blob": "x".repeat(70_000) })),
        view: None,
    });
    assert_eq!(last(&s)["id"], "big");
    assert_eq!(error_of(&last(&s)), Some("content_limit"));
    assert!(s.lines().iter().all(|l| l.len() < 65_536));
}

#[test]
fn discover_limits_are_advertised_only_when_negotiated() {
    let s = ready(&[]);
    let limits = &s.frames()[0]["result"]["limits"];
    assert!(limits.get("discover_page_entries").is_none());
    assert_eq!(
        limits.as_object().unwrap().len(),
        protocol_core::limits::ADVERTISED.len()
    );
    let s = ready(&["session.discover"]);
    let limits = &s.frames()[0]["result"]["limits"];
    assert_eq!(limits["discover_page_entries"], 100);
    assert_eq!(
        limits.as_object().unwrap().len(),
        protocol_core::limits::ADVERTISED.len() + protocol_core::limits::DISCOVER_ADVERTISED.len()
    );
}

fn base_names() -> Vec<&'static str> {
    protocol_core::Capability::BASE
        .iter()
        .map(|c| c.as_str())
        .collect()
}

/// extensions.md "tool.cards" and decisions.md 8, 32: the capability is listed after the base
/// names, the `extensions` member holds exactly its descriptor, and `limits` gains no key.
#[test]
fn tool_cards_negotiation_adds_the_descriptor_and_the_name() {
    let s = ready(&["tool.cards"]);
    let r = &s.frames()[0]["result"];
    let caps = r["capabilities"].as_array().unwrap();
    assert_eq!(caps.len(), 17);
    assert_eq!(caps[16], "tool.cards");
    assert_eq!(
        r["extensions"],
        json!({"tool.cards": {"version": 1, "kinds": ["command", "file_read", "file_edit", "search", "mcp", "client", "subagent", "generic"], "card_bytes": 4096}})
    );
    assert_eq!(
        r["limits"].as_object().unwrap().len(),
        protocol_core::limits::ADVERTISED.len()
    );
    let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["capabilities", "extensions", "limits", "status"]);
}

/// Base-only clients see exactly the base shapes: no `extensions` member, sixteen names.
#[test]
fn a_base_initialize_has_no_extensions_member() {
    for caps in [vec![], base_names()] {
        let s = ready(&caps);
        let r = &s.frames()[0]["result"];
        let mut keys: Vec<&str> = r.as_object().unwrap().keys().map(String::as_str).collect();
        keys.sort_unstable();
        assert_eq!(keys, ["capabilities", "limits", "status"]);
        assert_eq!(r["capabilities"].as_array().unwrap().len(), 16);
    }
}

/// extensions.md: 16 names at most unless `client.tools` is among them, so `tool.cards` fits
/// beside fifteen base names and not beside all sixteen.
#[test]
fn tool_cards_counts_toward_the_sixteen_names() {
    let mut fifteen: Vec<&str> = base_names()
        .into_iter()
        .filter(|n| *n != "initialize")
        .collect();
    fifteen.push("tool.cards");
    assert_eq!(fifteen.len(), 16);
    let s = ready(&fifteen);
    assert_eq!(
        s.frames()[0]["result"]["capabilities"]
            .as_array()
            .unwrap()
            .len(),
        17
    );
    let mut s = Sim::new();
    let mut seventeen = base_names();
    seventeen.push("tool.cards");
    s.send(&init(&seventeen));
    assert_eq!(error_of(&last(&s)), Some("invalid_params"));
    assert!(matches!(s.engine.state(), State::Uninitialized));
}
