//! The engine's side of `client.tools`: `initialize` validation and result shapes, and the
//! admission of `client.tool.result` (session and run here, the call in the worker).

use protocol_core::sim::{ready_view, request, Sim, SIM_INSTANCE_ID};
use protocol_core::{
    Capability, CapabilitySet, Config, Engine, OpOutcome, RequestId, Time, WorkerCommand,
    WorkerEvent,
};
use serde_json::{json, Value};

/// A simulated child whose build supports `client.tools`.
fn sim() -> Sim {
    let mut s = Sim::new();
    s.engine = Engine::new(
        Config {
            supported: CapabilitySet::base().with(Capability::ClientTools),
        },
        SIM_INSTANCE_ID,
        Time(0),
    );
    s
}

fn last(s: &Sim) -> Value {
    s.frames().last().cloned().unwrap()
}

fn code(v: &Value) -> Option<&str> {
    v["error"]["code"].as_str()
}

fn tool(name: &str) -> Value {
    json!({"name": name, "description": "d", "input_schema": {"type": "object"}})
}

fn init(s: &mut Sim, params: Value) -> Value {
    s.send(&request("init", "initialize", &params));
    last(s)
}

fn with_tools(tools: Vec<Value>) -> Value {
    json!({"required_capabilities": ["client.tools"], "client_tools": tools})
}

#[test]
fn negotiated_result_adds_capability_limits_and_descriptor() {
    let mut s = sim();
    let f = init(&mut s, with_tools(vec![tool("open_tab"), tool("ask-user")]));
    let r = &f["result"];
    let caps = r["capabilities"].as_array().unwrap();
    assert_eq!(caps.len(), 17);
    assert_eq!(caps[16], "client.tools");
    assert_eq!(
        r["extensions"],
        json!({"client.tools": {"version": 1, "tools": ["open_tab", "ask-user"]}})
    );
    assert_eq!(r["limits"]["client_tools"], 32);
    assert_eq!(r["limits"]["client_tool_input_bytes"], 49_152);
    assert_eq!(r["limits"]["client_tool_output_bytes"], 49_152);
    assert_eq!(r["limits"]["client_tool_timeout_ms"], 120_000);
    let Some(WorkerCommand::StartInit {
        capabilities,
        client_tools,
    }) = s
        .commands
        .iter()
        .find(|c| matches!(c, WorkerCommand::StartInit { .. }))
    else {
        panic!("no StartInit");
    };
    assert_eq!(capabilities, &["client.tools"]);
    assert_eq!(client_tools.len(), 2);
    assert_eq!(client_tools[1].name, "ask-user");
}

#[test]
fn base_only_clients_see_todays_shapes() {
    // Even on a build that supports client.tools.
    let mut base = Sim::new();
    let want = init(&mut base, json!({"required_capabilities": []}));
    let mut s = sim();
    let got = init(&mut s, json!({"required_capabilities": []}));
    assert_eq!(got, want);
    let r = &got["result"];
    assert!(r.get("extensions").is_none());
    assert_eq!(r["capabilities"].as_array().unwrap().len(), 16);
    assert!(r["limits"].get("client_tools").is_none());
    assert!(r["limits"].get("client_tool_timeout_ms").is_none());
    // A base client's command carries no client tools (and so traces keep their shape).
    let cmd = serde_json::to_value(&s.commands[0]).unwrap();
    assert!(cmd.get("client_tools").is_none(), "{cmd}");
    // client.tool.result is not admitted without the capability.
    s.send(&request(
        "r",
        "client.tool.result",
        &json!({"session_id":"s1","run_id":"r","call_id":"c","ok":true,"output":""}),
    ));
    assert_eq!(code(&last(&s)), Some("unsupported_capability"));
}

#[test]
fn an_unsupporting_build_refuses_the_capability() {
    let mut s = Sim::new();
    let f = init(&mut s, with_tools(vec![tool("t")]));
    assert_eq!(code(&f), Some("unsupported_capability"));
}

/// Each breach is `invalid_params` before any side effect: no worker command, and a
/// corrected `initialize` is still admitted.
#[test]
fn every_bound_is_checked_before_any_side_effect() {
    let many = |n: usize| (0..n).map(|i| tool(&format!("t{i}"))).collect::<Vec<_>>();
    let desc = |n: usize| json!({"name": "t", "description": "x".repeat(n), "input_schema": {"type": "object"}});
    let schema = |n: usize| json!({"name": "t", "description": "", "input_schema": {"type": "object", "d": "x".repeat(n - 24)}});
    let bad = [
        json!({"required_capabilities": [], "client_tools": []}),
        json!({"required_capabilities": ["client.tools"]}),
        with_tools(many(33)),
        with_tools(vec![tool(&"a".repeat(65))]),
        with_tools(vec![tool("a.b")]),
        with_tools(vec![tool("")]),
        with_tools(vec![tool("x"), tool("x")]),
        with_tools(vec![tool("shell")]),
        with_tools(vec![tool("read_file")]),
        with_tools(vec![tool("task")]),
        with_tools(vec![tool("mcp__fs__read")]),
        with_tools(vec![desc(1025)]),
        with_tools(vec![schema(16_385)]),
        with_tools(vec![
            json!({"name": "t", "description": "", "input_schema": {"type": "array"}}),
        ]),
    ];
    for params in bad {
        let mut s = sim();
        let f = init(&mut s, params.clone());
        assert_eq!(code(&f), Some("invalid_params"), "{params}");
        assert!(s.commands.is_empty(), "{params}");
    }
    let good = [
        with_tools(many(32)),
        with_tools(vec![tool(&"a".repeat(64))]),
        with_tools(vec![desc(1024)]),
        with_tools(vec![schema(16_384)]),
    ];
    for params in good {
        let mut s = sim();
        let f = init(&mut s, params.clone());
        assert!(f["result"]["capabilities"].is_array(), "{params} {f}");
    }
    // After a refusal the child is still uninitialized and admits a corrected request.
    let mut s = sim();
    s.send(&request("a", "initialize", &with_tools(many(33))));
    let f = init(&mut s, with_tools(many(1)));
    assert!(f["result"]["capabilities"].is_array());
}

#[test]
fn eighteen_names_only_with_client_tools() {
    let mut names: Vec<&str> = Capability::BASE.iter().map(|c| c.as_str()).collect();
    names.push("client.tools");
    names.push("client.tools");
    assert_eq!(names.len(), 18);
    let mut s = sim();
    let f = init(
        &mut s,
        json!({"required_capabilities": names, "client_tools": [tool("t")]}),
    );
    assert!(f["result"]["capabilities"].is_array(), "{f}");
    names.push("status");
    let mut s = sim();
    let f = init(
        &mut s,
        json!({"required_capabilities": names, "client_tools": [tool("t")]}),
    );
    assert_eq!(code(&f), Some("invalid_params"));
    // Without client.tools, 17 names are over the bound.
    let mut seventeen: Vec<&str> = Capability::BASE.iter().map(|c| c.as_str()).collect();
    seventeen.push("status");
    let mut s = sim();
    let f = init(&mut s, json!({"required_capabilities": seventeen}));
    assert_eq!(code(&f), Some("invalid_params"));
}

/// Ready with client tools and attached to session "s1", with run "run-t" active.
fn running() -> Sim {
    let mut s = sim();
    init(&mut s, with_tools(vec![tool("t")]));
    s.send(&request("c", "session.create", &json!({})));
    let mut view = ready_view();
    view.session_id = Some("s1".into());
    s.worker(WorkerEvent::OpDone {
        id: RequestId::new("c").unwrap(),
        outcome: OpOutcome::Result(
            json!({"session_id":"s1","durable":false,"revision":"r0","notices":[]}),
        ),
        view: Some(view),
    });
    s.send(&request(
        "t",
        "turn.start",
        &json!({"session_id":"s1","prompt":"hi"}),
    ));
    s.worker(WorkerEvent::TurnAdmitted {
        id: RequestId::new("t").unwrap(),
        run_id: "run-t".into(),
    });
    s
}

fn result(id: &str, session: &str, run: &str, output: String) -> Vec<u8> {
    request(
        id,
        "client.tool.result",
        &json!({"session_id":session,"run_id":run,"call_id":"c1","ok":true,"output":output}),
    )
}

#[test]
fn result_admission_checks_session_run_and_output_bound() {
    let mut s = running();
    let before = s.commands.len();
    s.send(&result("a", "s2", "run-t", String::new()));
    assert_eq!(code(&last(&s)), Some("stale_session"));
    s.send(&result("b", "s1", "run-x", String::new()));
    assert_eq!(code(&last(&s)), Some("stale_call"));
    s.send(&result("c2", "s1", "run-t", "x".repeat(49_153)));
    assert_eq!(code(&last(&s)), Some("invalid_params"));
    assert_eq!(s.commands.len(), before, "refusals reach no worker");
    s.send(&result("d", "s1", "run-t", "x".repeat(49_152)));
    let Some(WorkerCommand::AnswerClientTool {
        id,
        run_id,
        call_id,
        ok,
        output,
    }) = s.commands.last()
    else {
        panic!("no AnswerClientTool");
    };
    assert_eq!(
        (id.as_str(), run_id.as_str(), call_id.as_str(), *ok),
        ("d", "run-t", "c1", true)
    );
    assert_eq!(output.len(), 49_152);
    s.worker(WorkerEvent::Reply {
        id: RequestId::new("d").unwrap(),
        outcome: OpOutcome::Error(protocol_core::ErrorCode::StaleCall),
    });
    assert_eq!(code(&last(&s)), Some("stale_call"));
    s.worker(WorkerEvent::RunFinished {
        run_id: "run-t".into(),
        data: json!({"session_id":"s1","run_id":"run-t","outcome":"completed","persistence":"durable","revision":"r1","error_code":null}),
        view: None,
    });
    s.send(&result("e", "s1", "run-t", String::new()));
    assert_eq!(code(&last(&s)), Some("stale_call"), "a finished run");
}

#[test]
fn result_without_attachment_is_session_missing() {
    let mut s = sim();
    init(&mut s, with_tools(vec![tool("t")]));
    s.send(&result("a", "s1", "r", String::new()));
    assert_eq!(code(&last(&s)), Some("session_missing"));
}
