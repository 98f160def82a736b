//! What the benches that drive the real binary share: a child over pipes, medians, and the
//! `/proc` readings of a process's helpers and peak memory. Each bench uses part of it.
#![allow(dead_code)]

#[path = "../../tests/support/procs.rs"]
pub mod procs;

use magi_code::client::pipe::{serve_command, Frames, Server};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader, Read};
use std::net::TcpStream;
use std::path::Path;
use std::process::{ChildStdout, Stdio};

/// The backend under test.
pub const SERVER: &str = env!("CARGO_BIN_EXE_magi-code");

/// The middle value (sorts `v`).
pub fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// The `p` quantile (sorts `v`).
pub fn pct(v: &mut [f64], p: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * p).round() as usize]
}

/// A `serve --stdio` child, initialized.
pub struct Child {
    pub server: Server,
    pub frames: Frames<ChildStdout>,
    pub n: u64,
}

impl Child {
    pub fn start(home: &Path, cwd: &Path) -> Self {
        let mut cmd = serve_command(Path::new(SERVER));
        cmd.env("MC_HOME", home)
            .current_dir(cwd)
            .stderr(Stdio::null());
        let mut server = Server::spawn(cmd).expect("spawn");
        let frames = server.frames().expect("stdout");
        let mut c = Self {
            server,
            frames,
            n: 0,
        };
        let r = c.call("initialize", &json!({"required_capabilities": []}));
        assert!(r.get("result").is_some(), "{r}");
        c
    }

    pub fn send(&mut self, method: &str, params: &Value) -> String {
        self.n += 1;
        let id = format!("q{}", self.n);
        self.server.send(&id, method, params).expect("send");
        id
    }

    pub fn next(&mut self) -> Value {
        self.frames
            .next_frame()
            .expect("child closed")
            .expect("frame")
    }

    pub fn call(&mut self, method: &str, params: &Value) -> Value {
        let id = self.send(method, params);
        loop {
            let v = self.next();
            if v["id"] == id.as_str() {
                return v;
            }
        }
    }

    pub fn session(&mut self) -> String {
        let r = self.call("session.create", &json!({}));
        r["result"]["session_id"]
            .as_str()
            .unwrap_or_else(|| panic!("{r}"))
            .to_owned()
    }

    pub fn finish(mut self) {
        self.call("shutdown", &json!({}));
        self.server.wait();
    }
}

pub fn vm_hwm_kib(pid: u32) -> f64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).expect("status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .expect("VmHWM")
}

/// Reads one HTTP request from `s`: its body (by `content-length`), `None` if the peer left.
pub fn read_body(s: &TcpStream) -> Option<Vec<u8>> {
    let mut r = BufReader::new(s.try_clone().ok()?);
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap_or(0) == 0 {
            return None;
        }
        let h = h.trim_end().to_ascii_lowercase();
        if h.is_empty() {
            break;
        }
        if let Some(v) = h.strip_prefix("content-length:") {
            len = v.trim().parse().unwrap_or(0);
        }
    }
    let mut body = vec![0u8; len];
    r.read_exact(&mut body).ok()?;
    Some(body)
}
