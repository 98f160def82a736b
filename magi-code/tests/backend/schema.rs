//! The machine-readable contract (`docs/schema/`): the committed files are what the wire
//! types generate, every captured trace's frames validate, and the schema refuses what the
//! protocol refuses (unknown codes and events, extra fields, extra params).

use serde_json::{json, Value};
use std::collections::HashMap;
use std::path::{Path, PathBuf};

const ID: &str = "https://magi-code.dev/schema/magi-code.local-agent.v1.json";

struct Validator {
    schemas: boon::Schemas,
    frame: boon::SchemaIndex,
    request: boon::SchemaIndex,
}

impl Validator {
    fn new() -> Self {
        let mut schemas = boon::Schemas::new();
        let mut c = boon::Compiler::new();
        c.enable_format_assertions();
        c.add_resource(ID, magi_code::wire::schema()).unwrap();
        let frame = c.compile(ID, &mut schemas).unwrap();
        let request = c
            .compile(&format!("{ID}#/$defs/Request"), &mut schemas)
            .unwrap();
        Self {
            schemas,
            frame,
            request,
        }
    }

    fn frame_ok(&self, v: &Value) -> Result<(), String> {
        self.schemas
            .validate(v, self.frame)
            .map_err(|e| format!("{e:#}"))
    }

    fn request_ok(&self, v: &Value) -> Result<(), String> {
        self.schemas
            .validate(v, self.request)
            .map_err(|e| format!("{e:#}"))
    }
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[track_caller]
fn same_bytes(file: &str, generated: &str, flag: &str) {
    let path = repo().join("docs/schema").join(file);
    let committed = std::fs::read_to_string(&path).unwrap_or_default();
    if committed != generated {
        let line = committed
            .lines()
            .zip(generated.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| committed.lines().count().min(generated.lines().count()))
            + 1;
        panic!(
            "docs/schema/{file} is not what the wire types generate (first difference at line \
             {line}); run `cargo run -p magi-code -- schema{flag} > docs/schema/{file}`"
        );
    }
}

#[test]
fn the_committed_schema_and_declarations_are_what_the_types_generate() {
    same_bytes(
        "magi-code.local-agent.v1.json",
        &magi_code::wire::schema_text(),
        "",
    );
    same_bytes(
        "protocol.d.ts",
        &magi_code::wire::typescript(),
        " --typescript",
    );
    // The TypeScript package builds from its own folder: its committed copy is the same.
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let package = std::fs::read_to_string(root.join("clients/typescript/src/protocol.d.ts"));
    assert!(
        package.is_ok_and(|p| p == magi_code::wire::typescript()),
        "clients/typescript/src/protocol.d.ts is not docs/schema/protocol.d.ts; copy it \
         (`npm run build` in clients/typescript does)"
    );
}

#[test]
fn adding_a_result_field_changes_the_generated_schema() {
    // The drift test compares bytes; this shows a result type's field reaches those bytes.
    let text = magi_code::wire::schema_text();
    let schema: Value = serde_json::from_str(&text).unwrap();
    let turn = &schema["$defs"]["TurnStartResult"];
    assert_eq!(turn["additionalProperties"], false);
    assert_eq!(turn["required"], json!(["run_id", "accepted"]));
    let mut changed = schema.clone();
    changed["$defs"]["TurnStartResult"]["properties"]["extra"] = json!({"type": "string"});
    assert_ne!(serde_json::to_string_pretty(&changed).unwrap() + "\n", text);
}

/// Every frame of every trace in `protocol-core/tests/traces`, with the requests of that
/// child answered by a `result`.
fn trace_frames() -> Vec<(String, Value, Option<Value>)> {
    let dir = repo().join("protocol-core/tests/traces");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "jsonl"))
        .collect();
    files.sort();
    assert!(files.len() >= 10, "the trace corpus is missing");
    let mut out = Vec::new();
    for file in files {
        let name = file.file_name().unwrap().to_string_lossy().into_owned();
        let mut bytes: HashMap<(String, bool), Vec<u8>> = HashMap::new();
        for line in std::fs::read_to_string(&file).unwrap().lines() {
            let r: Value = serde_json::from_str(line).unwrap();
            let (Some(child), Some(dir)) = (r["child"].as_str(), r["dir"].as_str()) else {
                continue;
            };
            let data = match (r["text"].as_str(), r["hex"].as_str()) {
                (Some(t), _) => t.as_bytes().to_vec(),
                (None, Some(h)) => (0..h.len() / 2)
                    .map(|i| u8::from_str_radix(&h[2 * i..2 * i + 2], 16).unwrap())
                    .collect(),
                _ => continue,
            };
            match dir {
                "out" => bytes.entry((child.into(), true)).or_default().extend(data),
                "in" => bytes.entry((child.into(), false)).or_default().extend(data),
                _ => {}
            }
        }
        let mut children: Vec<&(String, bool)> = bytes.keys().filter(|k| k.1).collect();
        children.sort();
        for key in children {
            let requests: HashMap<String, Value> = bytes
                .get(&(key.0.clone(), false))
                .map(|b| {
                    b.split(|&c| c == b'\n')
                        .filter_map(|l| serde_json::from_slice::<Value>(l).ok())
                        .filter_map(|v| Some((v["id"].as_str()?.to_owned(), v.clone())))
                        .collect()
                })
                .unwrap_or_default();
            let all = &bytes[key];
            // Only complete frames: a stalled trace may end inside one.
            let complete = &all[..all.iter().rposition(|&c| c == b'\n').map_or(0, |i| i + 1)];
            for line in complete.split(|&c| c == b'\n').filter(|l| !l.is_empty()) {
                let frame: Value = serde_json::from_slice(line).unwrap();
                let request = frame
                    .get("result")
                    .and_then(|_| frame["id"].as_str())
                    .and_then(|id| requests.get(id).cloned());
                out.push((format!("{name} child {}", key.0), frame, request));
            }
        }
    }
    out
}

#[test]
fn every_frame_of_the_captured_traces_validates() {
    let v = Validator::new();
    let frames = trace_frames();
    assert!(frames.len() > 50, "only {} frames", frames.len());
    let mut events = 0;
    for (at, frame, request) in &frames {
        if let Err(e) = v.frame_ok(frame) {
            panic!("{at}: {e}\n{frame}");
        }
        if let Some(r) = request {
            if let Err(e) = v.request_ok(r) {
                panic!("{at}: an accepted request breaks $defs.Request: {e}\n{r}");
            }
        }
        events += usize::from(frame["type"] == "event");
    }
    assert!(events > 0, "the corpus holds run events");
}

fn sample(event: &str, data: Value) -> Value {
    json!({"protocol":"magi-code.local-agent","version":1,"type":"event",
        "instance_id":"4d34f0fc-a9ce-4632-bfad-7899d04d5915","seq":7,"event":event,"data":data})
}

fn delta() -> Value {
    json!({"session_id":"s1","run_id":"4d34f0fc-a9ce-4632-bfad-7899d04d5915",
        "message_id":"a-1","part":0,"text":"hi"})
}

fn error(code: &str) -> Value {
    json!({"protocol":"magi-code.local-agent","version":1,"type":"response",
        "instance_id":"4d34f0fc-a9ce-4632-bfad-7899d04d5915","seq":3,"id":"r1","error":{"code":code}})
}

#[test]
fn every_error_code_validates_and_an_unknown_one_does_not() {
    let v = Validator::new();
    for code in protocol_core::ErrorCode::ALL {
        v.frame_ok(&error(code.as_str())).unwrap();
    }
    assert!(v.frame_ok(&error("no_such_code")).is_err());
    let mut with_text = error("busy");
    with_text["error"]["message"] = json!("details");
    assert!(v.frame_ok(&with_text).is_err(), "errors are code-only");
    let mut null_id = error("invalid_request");
    null_id["id"] = Value::Null;
    v.frame_ok(&null_id).unwrap();
}

#[test]
fn an_unknown_event_or_an_extra_field_fails() {
    let v = Validator::new();
    v.frame_ok(&sample("message.delta", delta())).unwrap();
    assert!(v.frame_ok(&sample("message.deltas", delta())).is_err());
    let mut extra = delta();
    extra["extra"] = json!(1);
    assert!(v.frame_ok(&sample("message.delta", extra)).is_err());
    let mut top = sample("message.delta", delta());
    top["extra"] = json!(1);
    assert!(v.frame_ok(&top).is_err(), "an extra envelope member");
    let result = json!({"protocol":"magi-code.local-agent","version":1,"type":"response",
        "instance_id":"4d34f0fc-a9ce-4632-bfad-7899d04d5915","seq":2,"id":"r2",
        "result":{"run_id":"4d34f0fc-a9ce-4632-bfad-7899d04d5915","accepted":true}});
    v.frame_ok(&result).unwrap();
    let mut more = result.clone();
    more["result"]["queued"] = json!(false);
    assert!(v.frame_ok(&more).is_err(), "an extra result field");
    let mut both = result;
    both["error"] = json!({"code": "busy"});
    assert!(v.frame_ok(&both).is_err(), "result and error");
}

#[test]
fn live_chunk_and_summary_bounds_at_their_edge() {
    let v = Validator::new();
    let live = protocol_core::limits::LIVE_CHUNK_BYTES;
    let mut d = delta();
    d["text"] = json!("x".repeat(live));
    v.frame_ok(&sample("message.delta", d.clone())).unwrap();
    d["text"] = json!("x".repeat(live + 1));
    assert!(v.frame_ok(&sample("message.delta", d)).is_err());
    let n = protocol_core::limits::SUMMARY_BYTES;
    let diag = |s: String| {
        sample(
            "diagnostic",
            json!({"session_id":"s1","run_id":"4d34f0fc-a9ce-4632-bfad-7899d04d5915","code":"provider_retry","summary":s}),
        )
    };
    v.frame_ok(&diag("s".repeat(n))).unwrap();
    assert!(v.frame_ok(&diag("s".repeat(n + 1))).is_err());
}

fn request(method: &str, params: Value) -> Value {
    json!({"protocol":"magi-code.local-agent","version":1,"id":"r1","method":method,"params":params})
}

#[test]
fn requests_with_an_extra_param_or_member_fail() {
    let v = Validator::new();
    let start = json!({"session_id":"s1","prompt":"hello"});
    v.request_ok(&request("turn.start", start.clone())).unwrap();
    let mut extra = start.clone();
    extra["model"] = json!("m");
    assert!(v.request_ok(&request("turn.start", extra)).is_err());
    let mut top = request("turn.start", start);
    top["extra"] = json!(1);
    assert!(v.request_ok(&top).is_err());
    assert!(v.request_ok(&request("status", json!({"x": 1}))).is_err());
    assert!(v.request_ok(&request("no.such", json!({}))).is_err());
    v.request_ok(&request("status", json!({}))).unwrap();
}

#[test]
fn request_bounds_at_their_edge() {
    let v = Validator::new();
    let names = |n: usize| -> Vec<&str> {
        protocol_core::Capability::BASE
            .iter()
            .map(|c| c.as_str())
            .cycle()
            .take(n)
            .collect()
    };
    let max = protocol_core::limits::REQUIRED_CAPABILITIES;
    let init = |n| request("initialize", json!({"required_capabilities": names(n)}));
    v.request_ok(&init(max)).unwrap();
    assert!(v.request_ok(&init(max + 1)).is_err());
    let mut client = names(protocol_core::limits::REQUIRED_CAPABILITIES_WITH_CLIENT_TOOLS - 1);
    client.push("client.tools");
    let tools = json!([{"name":"open_tab","description":"d","input_schema":{"type":"object"}}]);
    v.request_ok(&request(
        "initialize",
        json!({"required_capabilities": client, "client_tools": tools}),
    ))
    .unwrap();
    assert!(
        v.request_ok(&request(
            "initialize",
            json!({"required_capabilities": ["status"], "client_tools": tools})
        ))
        .is_err(),
        "client_tools without the capability"
    );
    let prompt = protocol_core::limits::PROMPT_BYTES;
    let turn = |p: String| request("turn.start", json!({"session_id":"s1","prompt":p}));
    v.request_ok(&turn("p".repeat(prompt))).unwrap();
    assert!(v.request_ok(&turn("p".repeat(prompt + 1))).is_err());
    assert!(
        v.request_ok(&turn("  \n".into())).is_err(),
        "a blank prompt"
    );
    let page = |l: u64| request("session.list", json!({ "limit": l }));
    v.request_ok(&page(protocol_core::limits::PAGE_LIMIT_MAX))
        .unwrap();
    assert!(v
        .request_ok(&page(protocol_core::limits::PAGE_LIMIT_MAX + 1))
        .is_err());
    assert!(v.request_ok(&page(0)).is_err());
    let id = |n: usize| {
        let mut r = request("status", json!({}));
        r["id"] = json!("i".repeat(n));
        r
    };
    v.request_ok(&id(protocol_core::limits::ID_BYTES)).unwrap();
    assert!(v
        .request_ok(&id(protocol_core::limits::ID_BYTES + 1))
        .is_err());
}

#[test]
fn the_limits_object_is_built_from_the_constants() {
    let schema = magi_code::wire::schema();
    let props = &schema["$defs"]["Limits"]["properties"];
    for (k, value) in protocol_core::limits::ADVERTISED
        .iter()
        .chain(protocol_core::limits::DISCOVER_ADVERTISED)
        .chain(protocol_core::limits::CLIENT_TOOLS_ADVERTISED)
    {
        assert_eq!(props[*k]["const"], json!(value), "{k}");
    }
    assert_eq!(
        props.as_object().unwrap().len(),
        protocol_core::limits::ADVERTISED.len()
            + protocol_core::limits::DISCOVER_ADVERTISED.len()
            + protocol_core::limits::CLIENT_TOOLS_ADVERTISED.len()
    );
}

/// Every object schema that lists properties is exact, but `input_schema` (the client's own
/// JSON Schema) and the `if` condition of a history entry (a test, not a shape).
#[test]
fn every_listed_object_is_closed() {
    fn walk(v: &Value, at: &str, open: &mut Vec<String>) {
        match v {
            Value::Object(m) => {
                if m.contains_key("properties")
                    && m.get("additionalProperties") != Some(&Value::Bool(false))
                    && !at.ends_with("/Methods")
                {
                    open.push(at.to_owned());
                }
                for (k, x) in m {
                    walk(x, &format!("{at}/{k}"), open);
                }
            }
            Value::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}/{i}"), open);
                }
            }
            _ => {}
        }
    }
    let mut open = Vec::new();
    walk(&magi_code::wire::schema(), "#", &mut open);
    assert_eq!(
        open,
        [
            "#/$defs/ClientTool/properties/input_schema",
            "#/$defs/HistoryEntry/if"
        ],
        "open objects"
    );
}

#[test]
fn a_card_is_on_tool_card_entries_only() {
    let v = Validator::new();
    let page = |entry: Value| {
        json!({"protocol":"magi-code.local-agent","version":1,"type":"response",
            "instance_id":"4d34f0fc-a9ce-4632-bfad-7899d04d5915","seq":4,"id":"h1",
            "result":{"session_id":"s1","revision":"r1","entries":[entry],"next_cursor":null,"complete":true}})
    };
    let card = json!({"kind":"generic","title":"list_dir","status":"completed"});
    let entry = |kind: &str, card: Option<&Value>| {
        let mut e = json!({"message_id":"m1","kind":kind,"text":"list_dir","partial":false,"part":0,"last_part":true});
        if let Some(c) = card {
            e["card"] = c.clone();
        }
        e
    };
    v.frame_ok(&page(entry("tool_card", Some(&card)))).unwrap();
    v.frame_ok(&page(entry("activity", None))).unwrap();
    assert!(v.frame_ok(&page(entry("tool_card", None))).is_err());
    assert!(v.frame_ok(&page(entry("activity", Some(&card)))).is_err());
    let mut odd = card;
    odd["kind"] = json!("spreadsheet");
    assert!(
        v.frame_ok(&page(entry("tool_card", Some(&odd)))).is_err(),
        "an unknown card kind"
    );
}
