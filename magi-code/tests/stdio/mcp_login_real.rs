//! `magi-code mcp login` against a real authorization server: the official TypeScript SDK's
//! `simpleStreamableHttp` example with `--oauth-strict` (its demo authorization server on a
//! second port, which approves at once and accepts only tokens whose RFC 8707 `resource` is
//! the MCP server), pinned in `tests/fixtures/mcp`. The saved token then opens an MCP session.

use super::mcp::fixtures;
use super::mcp_login::{agent, authorize, begin, finish};
use crate::common::npm::ensure_npm;
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// The example server and its authorization server; killed on drop.
struct Demo {
    child: Child,
    url: String,
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn free_port() -> u16 {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    l.local_addr().unwrap().port()
}

impl Demo {
    /// Starts it and waits (bounded) until both servers listen.
    fn start() -> Self {
        let entry = ensure_npm(
            &fixtures(),
            "node_modules/@modelcontextprotocol/sdk/dist/esm/examples/server/simpleStreamableHttp.js",
        );
        let (mcp, auth) = (free_port(), free_port());
        let mut child = Command::new("node")
            .arg(entry)
            .args(["--oauth", "--oauth-strict"])
            .env("MCP_PORT", mcp.to_string())
            .env("MCP_AUTH_PORT", auth.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        let out = child.stdout.take().unwrap();
        std::thread::spawn(move || {
            let mut listening = 0;
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                if line.contains("listening on port") {
                    listening += 1;
                    if listening == 2 {
                        let _ = tx.send(());
                    }
                }
            }
        });
        let me = Self {
            child,
            url: format!("http://localhost:{mcp}/mcp"),
        };
        rx.recv_timeout(Duration::from_secs(30))
            .expect("the SDK example did not listen");
        me
    }
}

#[test]
fn login_against_the_sdk_demo_authorization_server_saves_a_token_the_server_accepts() {
    let demo = Demo::start();
    let (home, cwd) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let s = serde_json::json!({"mcp": {"servers": {
        "demo": {"url": demo.url, "oauth": {}, "enabled": true}}}});
    std::fs::write(home.path().join("settings.json"), s.to_string()).unwrap();
    let (login, open) = begin(home.path(), cwd.path(), "demo");
    let callback = authorize(&open);
    assert_eq!(agent().get(&callback).call().unwrap().status(), 200);
    let (code, out, err) = finish(login);
    assert_eq!(code, 0, "{out}{err}");
    let file = std::fs::read_to_string(home.path().join("mcp-tokens.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&file).unwrap();
    let entry = v["servers"]["demo"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap();
    assert_eq!(entry["resource"], demo.url);
    let token = entry["access_token"].as_str().unwrap();
    assert!(!format!("{open}{out}{err}").contains(token));
    // The strict server accepts it: an initialize with the bearer opens a session.
    let init = serde_json::json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "t", "version": "0"}}});
    let send = |auth: Option<&str>| {
        let mut r = agent()
            .post(&demo.url)
            .header("Accept", "application/json, text/event-stream")
            .header("Content-Type", "application/json");
        if let Some(a) = auth {
            r = r.header("Authorization", a);
        }
        r.send(init.to_string().as_bytes())
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(send(None), 401);
    assert_eq!(send(Some(&format!("Bearer {token}"))), 200);
}

#[test]
fn the_backend_opens_the_strict_server_with_the_saved_token_and_without_it_is_unavailable() {
    let demo = Demo::start();
    let env = crate::common::Env::new();
    let def = serde_json::json!({"url": demo.url, "oauth": {}});
    let settings = serde_json::json!({"mcp": super::mcp::mcp_settings(&[("demo", &def)], true)});
    env.write_global_settings(&settings);
    // Approved but never logged in: no token, so no request is answered; never a prompt.
    let init = |env: &crate::common::Env| {
        let mut s = env.spawn();
        let f = s.call(
            "init",
            "initialize",
            &crate::common::init_params(&["status"]),
        );
        s.shutdown_ok("bye");
        f
    };
    let f = init(&env);
    assert_eq!(f["error"]["code"], "mcp_unavailable", "{f}");
    let (login, open) = begin(&env.home(), &env.cwd, "demo");
    let callback = authorize(&open);
    assert_eq!(agent().get(&callback).call().unwrap().status(), 200);
    let (code, out, err) = finish(login);
    assert_eq!(code, 0, "{out}{err}");
    let f = init(&env);
    assert!(
        f.get("result").is_some(),
        "the saved token opens the server: {f}"
    );
    let file = std::fs::read_to_string(env.home().join("mcp-tokens.json")).unwrap();
    let v: serde_json::Value = serde_json::from_str(&file).unwrap();
    let token = v["servers"]["demo"]
        .as_object()
        .unwrap()
        .values()
        .next()
        .unwrap()["access_token"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!f.to_string().contains(&token));
}
