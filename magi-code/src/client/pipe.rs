//! The pipe level under [`super`]'s typed client, also used as is by the demo, the benchmark
//! and tests that write their own (or deliberately wrong) frames: spawn the child over pipes,
//! build request frames, read bounded frame lines.

use crate::wire::common::{Protocol, Version};
use crate::wire::{Call, RequestFrame};
use serde_json::{json, Value};
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::Path;
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};

/// The protocol name every request carries.
pub const PROTOCOL: &str = "magi-code.local-agent";
/// The protocol version every request carries.
pub const VERSION: u64 = 1;
/// Longest frame line a reader accepts, LF included (the advertised output bound).
pub const FRAME_BYTES: usize = protocol_core::limits::OUTPUT_FRAME_BYTES;

/// One request frame, without its LF.
#[must_use]
pub fn request(id: &str, method: &str, params: &Value) -> String {
    json!({"protocol": PROTOCOL, "version": VERSION, "id": id, "method": method, "params": params})
        .to_string()
}

/// One typed request frame, without its LF: exactly the five request members.
#[must_use]
pub fn typed_request(id: &str, call: &Call) -> String {
    let frame = RequestFrame {
        protocol: Protocol,
        version: Version,
        id: id.to_owned(),
        call: call.clone(),
    };
    // A `Call` is plain data (strings, numbers, maps), which always serializes.
    serde_json::to_string(&frame).unwrap_or_default()
}

/// The command that runs `exe serve --stdio` with stdin and stdout piped; callers add
/// environment, cwd and stderr before [`Server::spawn`].
#[must_use]
pub fn serve_command(exe: &Path) -> Command {
    let mut c = Command::new(exe);
    c.args(["serve", "--stdio"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped());
    c
}

/// A spawned `serve --stdio` child and its two pipes.
#[derive(Debug)]
pub struct Server {
    /// The child process.
    pub child: Child,
    /// Its stdin: requests go here; dropping it is EOF.
    pub stdin: Option<ChildStdin>,
    /// Its stdout, until a reader takes it.
    pub stdout: Option<ChildStdout>,
}

impl Server {
    /// Spawns `cmd` (from [`serve_command`]).
    pub fn spawn(mut cmd: Command) -> io::Result<Self> {
        let mut child = cmd.spawn()?;
        let stdin = child.stdin.take();
        let stdout = child.stdout.take();
        Ok(Self {
            child,
            stdin,
            stdout,
        })
    }

    /// Spawns this very binary as `serve --stdio`.
    pub fn spawn_self() -> io::Result<Self> {
        Self::spawn(serve_command(&std::env::current_exe()?))
    }

    /// Writes one request frame and its LF.
    pub fn send(&mut self, id: &str, method: &str, params: &Value) -> io::Result<()> {
        let stdin = self.stdin.as_mut().ok_or(io::ErrorKind::BrokenPipe)?;
        writeln!(stdin, "{}", request(id, method, params))
    }

    /// Closes stdin (EOF to the child).
    pub fn close(&mut self) {
        self.stdin = None;
    }

    /// Closes stdin and waits for the exit code (1 when there is none).
    pub fn wait(&mut self) -> i32 {
        self.close();
        self.child.wait().ok().and_then(|s| s.code()).unwrap_or(1)
    }

    /// Takes stdout as a frame reader.
    pub fn frames(&mut self) -> Option<Frames<ChildStdout>> {
        self.stdout.take().map(Frames::new)
    }
}

/// Reads frames line by line, each at most [`FRAME_BYTES`].
#[derive(Debug)]
pub struct Frames<R> {
    lines: BufReader<R>,
    buf: Vec<u8>,
}

impl<R: Read> Frames<R> {
    /// A reader over `r`.
    pub fn new(r: R) -> Self {
        Self {
            lines: BufReader::new(r),
            buf: Vec::new(),
        }
    }

    /// The next frame line without its LF: `None` at EOF; an error for a line over the bound,
    /// a line cut by EOF, or invalid UTF-8.
    pub fn next_line(&mut self) -> Option<io::Result<String>> {
        self.buf.clear();
        let read = (&mut self.lines)
            .take(FRAME_BYTES as u64)
            .read_until(b'\n', &mut self.buf);
        match read {
            Ok(0) => None,
            Err(e) => Some(Err(e)),
            Ok(_) if self.buf.last() != Some(&b'\n') => {
                Some(Err(io::Error::from(io::ErrorKind::InvalidData)))
            }
            Ok(_) => {
                self.buf.pop();
                Some(
                    String::from_utf8(std::mem::take(&mut self.buf))
                        .map_err(|_| io::Error::from(io::ErrorKind::InvalidData)),
                )
            }
        }
    }

    /// The next frame parsed (`Value::Null` for a line that is not JSON).
    pub fn next_frame(&mut self) -> Option<io::Result<Value>> {
        self.next_line()
            .map(|l| l.map(|l| serde_json::from_str(&l).unwrap_or(Value::Null)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_bounded_and_whole() {
        let f = request("r1", "status", &json!({}));
        let v: Value = serde_json::from_str(&f).unwrap();
        assert_eq!(v["protocol"], PROTOCOL);
        assert_eq!(v["version"], 1);
        let mut ok = format!("{f}\n").into_bytes();
        ok.extend(b"{\"a\":1}\npartial");
        let mut r = Frames::new(&ok[..]);
        assert_eq!(r.next_frame().unwrap().unwrap()["id"], "r1");
        assert_eq!(r.next_frame().unwrap().unwrap()["a"], 1);
        assert!(r.next_line().unwrap().is_err(), "a line cut by EOF");
        let edge = format!("{}\n", "x".repeat(FRAME_BYTES - 1));
        assert!(Frames::new(edge.as_bytes()).next_line().unwrap().is_ok());
        let over = format!("{}\n", "x".repeat(FRAME_BYTES));
        assert!(Frames::new(over.as_bytes()).next_line().unwrap().is_err());
    }

    #[test]
    fn a_typed_request_is_the_raw_request_of_the_same_call() {
        use crate::wire::requests::TurnStartParams;
        let call = Call::TurnStart(TurnStartParams {
            session_id: "s1".into(),
            prompt: "hi".into(),
        });
        let typed: Value = serde_json::from_str(&typed_request("r9", &call)).unwrap();
        let raw: Value = serde_json::from_str(&request(
            "r9",
            "turn.start",
            &json!({"session_id": "s1", "prompt": "hi"}),
        ))
        .unwrap();
        assert_eq!(typed, raw);
        let empty: Value =
            serde_json::from_str(&typed_request("r1", &Call::Status(Default::default()))).unwrap();
        assert_eq!(empty["params"], json!({}), "{empty}");
    }
}
