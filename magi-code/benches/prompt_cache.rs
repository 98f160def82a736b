//! Prompt-caching benchmark (`runner.md` 1 "Prompt caching"): one 20-step tool loop (19
//! `read_file` steps, then text) through the real binary on each wire API against a loopback
//! fake that records every request body. Per wire it prints the mean shared-prefix ratio
//! between consecutive requests (`cache_control` members removed; the shared prefix of
//! request N+1 over its length; target ≥ 95%) and the bytes a cache could skip (the sum of the
//! shared prefixes), beside the bytes sent.
//!
//! Run: `cargo bench -p magi-code --bench prompt_cache`.

#[path = "support/child.rs"]
mod child;

use child::{read_body, Child};
use serde_json::{json, Value};
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::sync::{Arc, Mutex};

/// Steps of the loop: this many less one tool calls, then the answer.
const STEPS: usize = 20;
const TITLE_MARK: &str = "short title for the conversation";
const BREAKPOINT: &str = "\"cache_control\":{\"type\":\"ephemeral\"},";

#[derive(Clone, Copy)]
enum Wire {
    Chat,
    Anthropic,
    Responses,
}

/// How many tool results the request's conversation holds.
fn results(wire: Wire, body: &Value) -> usize {
    let count = |v: &Value, f: &dyn Fn(&Value) -> bool| {
        v.as_array()
            .map_or(0, |a| a.iter().filter(|x| f(x)).count())
    };
    match wire {
        Wire::Chat => count(&body["messages"], &|m| m["role"] == "tool"),
        Wire::Anthropic => body["messages"].as_array().map_or(0, |ms| {
            ms.iter()
                .map(|m| count(&m["content"], &|b| b["type"] == "tool_result"))
                .sum()
        }),
        Wire::Responses => count(&body["input"], &|i| i["type"] == "function_call_output"),
    }
}

fn ev(data: &Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap_or("")
    )
}

/// The SSE answer: a `read_file` call of `f{n}`, or (`None`) the closing text.
fn answer_sse(wire: Wire, call: Option<usize>) -> String {
    let input = call.map(|n| json!({"path": format!("f{n}.txt")}).to_string());
    let id = call.map(|n| format!("call_{n}"));
    match (wire, input, id) {
        (Wire::Chat, Some(input), Some(id)) => {
            let d = json!({"choices": [{"index": 0, "delta": {"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": "read_file", "arguments": input}}]}, "finish_reason": null}]});
            let f = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls"}]});
            format!("data: {d}\n\ndata: {f}\n\ndata: [DONE]\n\n")
        }
        (Wire::Chat, ..) => {
            let d = json!({"choices": [{"index": 0, "delta": {"content": "done"}, "finish_reason": null}]});
            let f = json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]});
            format!("data: {d}\n\ndata: {f}\n\ndata: [DONE]\n\n")
        }
        (Wire::Anthropic, input, id) => {
            let start = json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant", "content": [], "usage": {"input_tokens": 10, "output_tokens": 1}}});
            let (block, delta, reason) = match (input, id) {
                (Some(input), Some(id)) => (
                    json!({"type": "tool_use", "id": id, "name": "read_file", "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": input}),
                    "tool_use",
                ),
                _ => (
                    json!({"type": "text", "text": ""}),
                    json!({"type": "text_delta", "text": "done"}),
                    "end_turn",
                ),
            };
            [
                start,
                json!({"type": "content_block_start", "index": 0, "content_block": block}),
                json!({"type": "content_block_delta", "index": 0, "delta": delta}),
                json!({"type": "content_block_stop", "index": 0}),
                json!({"type": "message_delta", "delta": {"stop_reason": reason}, "usage": {"output_tokens": 5}}),
                json!({"type": "message_stop"}),
            ]
            .iter()
            .map(ev)
            .collect()
        }
        (Wire::Responses, input, id) => {
            let item = match (input, id) {
                (Some(input), Some(id)) => {
                    json!({"type": "function_call", "id": "fc", "call_id": id, "name": "read_file", "arguments": input, "status": "completed"})
                }
                _ => {
                    json!({"type": "message", "id": "msg", "role": "assistant", "content": [{"type": "output_text", "text": "done"}]})
                }
            };
            [
                json!({"type": "response.output_item.done", "sequence_number": 0, "output_index": 0, "item": item}),
                json!({"type": "response.completed", "sequence_number": 1, "response": {"id": "r", "status": "completed", "output": [], "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15}}}),
            ]
            .iter()
            .map(ev)
            .collect()
        }
    }
}

/// A recording fake for `wire`: its base URL and the request bodies it saw (titles aside).
fn fake(wire: Wire) -> (String, Arc<Mutex<Vec<Vec<u8>>>>) {
    let l = TcpListener::bind("127.0.0.1:0").unwrap();
    let base = format!("http://{}", l.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s2 = seen.clone();
    std::thread::spawn(move || {
        for s in l.incoming().flatten() {
            let seen = s2.clone();
            std::thread::spawn(move || serve(wire, s, &seen));
        }
    });
    (base, seen)
}

fn serve(wire: Wire, s: TcpStream, seen: &Mutex<Vec<Vec<u8>>>) {
    let Some(raw) = read_body(&s) else {
        return;
    };
    let mut w = s;
    if String::from_utf8_lossy(&raw).contains(TITLE_MARK) {
        let _ = w.write_all(b"HTTP/1.1 500 X\r\ncontent-length: 2\r\nconnection: close\r\n\r\n{}");
        return;
    }
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let n = results(wire, &body);
    seen.lock().unwrap().push(raw);
    let sse = answer_sse(wire, (n + 1 < STEPS).then_some(n));
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        sse.len()
    );
    let _ = w
        .write_all(head.as_bytes())
        .and_then(|()| w.write_all(sse.as_bytes()));
}

/// Runs the loop on `wire`: (requests, mean ratio, bytes skippable, bytes sent).
fn measure(wire: Wire) -> (usize, f64, usize, usize) {
    let (base, seen) = fake(wire);
    let home = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    for i in 0..STEPS {
        std::fs::write(cwd.path().join(format!("f{i}.txt")), format!("file {i}\n")).unwrap();
    }
    let settings = match wire {
        Wire::Chat => json!({"provider": "local", "model": "m",
            "providers": {"local": {"kind": "openai-compatible", "base_url": format!("{base}/v1")}}}),
        Wire::Responses => json!({"provider": "local", "model": "m",
            "providers": {"local": {"kind": "openai-compatible", "base_url": format!("{base}/v1"), "wire_api": "responses"}}}),
        Wire::Anthropic => {
            let creds = json!({"anthropic": {"api_key": "sk-bench-key-123456"}});
            std::fs::write(home.path().join("credentials.json"), creds.to_string()).unwrap();
            json!({"provider": "anthropic", "model": "claude-sonnet-4-5",
                "providers": {"anthropic": {"base_url": base}}})
        }
    };
    let mut settings = settings;
    settings["tools"] = json!({"read": "allow"});
    std::fs::write(home.path().join("settings.json"), settings.to_string()).unwrap();
    let mut c = Child::start(home.path(), cwd.path());
    let sid = c.session();
    c.send(
        "turn.start",
        &json!({"session_id": sid, "prompt": "read f0 to f18"}),
    );
    loop {
        let v = c.next();
        if v["event"] == "run.finished" {
            assert_eq!(v["data"]["outcome"], "completed", "{v}");
            break;
        }
    }
    c.finish();
    let bodies: Vec<String> = seen
        .lock()
        .unwrap()
        .iter()
        .map(|b| String::from_utf8_lossy(b).replace(BREAKPOINT, ""))
        .collect();
    assert_eq!(bodies.len(), STEPS, "one request a step");
    let mut ratios = Vec::new();
    let mut skip = 0;
    for w in bodies.windows(2) {
        let shared = w[0]
            .bytes()
            .zip(w[1].bytes())
            .take_while(|(a, b)| a == b)
            .count();
        skip += shared;
        ratios.push(shared as f64 / w[1].len() as f64);
    }
    let sent = bodies.iter().map(String::len).sum();
    let mean = ratios.iter().sum::<f64>() / ratios.len() as f64;
    (bodies.len(), mean, skip, sent)
}

fn main() {
    println!("| wire | requests | mean shared prefix | bytes a cache could skip | bytes sent | target | verdict |");
    println!("| --- | ---: | ---: | ---: | ---: | --- | --- |");
    for (name, wire) in [
        ("Chat Completions", Wire::Chat),
        ("Anthropic Messages", Wire::Anthropic),
        ("Responses", Wire::Responses),
    ] {
        let (n, mean, skip, sent) = measure(wire);
        let verdict = if mean >= 0.95 { "met" } else { "NOT met" };
        println!(
            "| {name} | {n} | {:.1}% | {skip} | {sent} | ≥ 95% | {verdict} |",
            mean * 100.0
        );
    }
}
