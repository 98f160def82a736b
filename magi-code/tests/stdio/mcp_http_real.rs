//! The real `@modelcontextprotocol/server-everything` (pinned in `tests/fixtures/mcp`) served
//! over Streamable HTTP on 127.0.0.1: the handshake and a `tools/call` through the binary, and
//! the start of one HTTP and one stdio server together against each alone.

use crate::common::fake_llm::{chat_text, chat_tool_call, FakeLlm};
use crate::common::npm::ensure_npm;
use crate::common::{start_turn, Env};
use crate::mcp::{finished, fixtures, mcp_settings, ready_in, real, session, until, WAIT};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Instant;

/// server-everything's Streamable HTTP server on a free loopback port; killed on drop.
struct Everything {
    child: Child,
    url: String,
}

impl Drop for Everything {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Everything {
    /// Starts it and waits (bounded) until it listens.
    fn start() -> Self {
        let entry = ensure_npm(
            &fixtures(),
            "node_modules/@modelcontextprotocol/server-everything/dist/index.js",
        );
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let mut child = Command::new("node")
            .arg(entry)
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let err = child.stderr.take().unwrap();
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                if line.contains("listening on port") {
                    let _ = tx.send(());
                }
            }
        });
        let me = Self {
            child,
            url: format!("http://127.0.0.1:{port}/mcp"),
        };
        rx.recv_timeout(WAIT)
            .expect("server-everything did not listen");
        me
    }
}

#[test]
fn the_real_server_everything_over_http_does_the_handshake_and_a_call() {
    let every = Everything::start();
    let def = json!({"url": every.url});
    let llm = FakeLlm::start(vec![
        chat_tool_call("c1", "mcp__web__echo", r#"{"message":"over http"}"#),
        chat_text(&["ok"]),
    ]);
    let env = Env::new();
    env.use_fake_llm(
        &llm,
        &json!({"tools": {"mcp": "allow"}, "mcp": mcp_settings(&[("web", &def)], true)}),
    );
    let (mut s, took) = ready_in(&env);
    eprintln!("server-everything over HTTP ready in {took:?}");
    let sid = session(&mut s);
    start_turn(&mut s, &sid, "go");
    let frames = until(&mut s, finished);
    assert_eq!(frames.last().unwrap()["data"]["outcome"], "completed");
    let first = llm.next(WAIT);
    let names: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str())
        .collect();
    assert!(names.contains(&"mcp__web__echo"), "{names:?}");
    let second = llm.next(WAIT);
    let last: &Value = second.body["messages"].as_array().unwrap().last().unwrap();
    assert_eq!(last["role"], "tool");
    assert!(
        last["content"].as_str().unwrap().contains("over http"),
        "{last}"
    );
    // Teardown ends the session with a DELETE within the cleanup wait.
    let t0 = Instant::now();
    s.shutdown_ok("bye");
    assert!(t0.elapsed() < std::time::Duration::from_millis(2_500));
}

#[test]
fn one_http_and_one_stdio_server_start_together_about_as_fast_as_the_slower_alone() {
    let every = Everything::start();
    let http = json!({"url": every.url});
    let stdio = real("server-everything", &["stdio"]);
    let mut alone = Vec::new();
    for (name, def) in [("web", &http), ("local", &stdio)] {
        let e = Env::new();
        e.write_global_settings(&json!({"mcp": mcp_settings(&[(name, def)], true)}));
        let (mut s, took) = ready_in(&e);
        alone.push(took);
        s.shutdown_ok("bye");
    }
    let env = Env::new();
    env.write_global_settings(
        &json!({"mcp": mcp_settings(&[("web", &http), ("local", &stdio)], true)}),
    );
    let (mut s, both) = ready_in(&env);
    eprintln!(
        "ready: HTTP alone {:?}, stdio alone {:?}, both together {both:?}",
        alone[0], alone[1]
    );
    // The overlap itself is proven by `mcp::servers_start_in_parallel` (one start path for both
    // transports); on 2 loaded cores these figures are for the docs.
    assert!(both < std::time::Duration::from_secs(10), "{both:?}");
    s.shutdown_ok("bye");
}
