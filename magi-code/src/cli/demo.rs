//! `magi-code demo`: a short real exchange with `serve --stdio`, every frame printed.

use crate::client::pipe::{request, Server};
use serde_json::{json, Value};
use std::io::Write;

/// Spawns `serve --stdio` as a real child over pipes and runs initialize → status →
/// session.create → an echo turn → shutdown, printing every frame. Returns 1 when a step
/// failed (startup, the session, the turn), else the child's exit code.
pub fn demo() -> i32 {
    let Ok(mut server) = Server::spawn_self() else {
        eprintln!("magi-code demo: could not start the server");
        return 1;
    };
    let (Some(mut frames), Some(mut stdin)) = (server.frames(), server.stdin.take()) else {
        return 1;
    };
    // Sends one request and prints frames until its answer (and, for a turn, its terminal).
    let mut exchange =
        |id: &str, method: &str, params: Value, until_event: Option<&str>| -> Option<Value> {
            let f = request(id, method, &params);
            println!("→ {f}");
            writeln!(stdin, "{f}").ok()?;
            let mut answer = None;
            while let Some(Ok(l)) = frames.next_line() {
                println!("← {l}");
                let v: Value = serde_json::from_str(&l).unwrap_or(Value::Null);
                if v["id"] == id {
                    answer = Some(v.clone());
                    if until_event.is_none() || v.get("error").is_some() {
                        break;
                    }
                }
                if until_event.is_some_and(|e| v["event"] == e) {
                    break;
                }
            }
            answer
        };
    let caps =
        json!({"required_capabilities": ["status", "session.create", "turn.start", "shutdown"]});
    let ready = exchange("r1", "initialize", caps, None).is_some_and(|a| a.get("result").is_some());
    exchange("r2", "status", json!({}), None);
    let created = exchange("r3", "session.create", json!({}), None);
    let mut turned = false;
    if let Some(sid) = created
        .as_ref()
        .and_then(|c| c["result"]["session_id"].as_str())
    {
        let params = json!({"session_id": sid, "prompt": "Hello from the magi-code demo."});
        turned = exchange("r4", "turn.start", params, Some("run.finished"))
            .is_some_and(|a| a.get("result").is_some());
    }
    exchange("r5", "shutdown", json!({}), None);
    drop(stdin);
    let code = server.wait();
    println!("server exited with status {code}");
    if !(ready && turned) {
        eprintln!("magi-code demo: the exchange failed (see the frames above; `magi-code doctor` says why)");
        return 1;
    }
    code
}
