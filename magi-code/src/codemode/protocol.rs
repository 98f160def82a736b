//! The line protocol between the backend and its `code-host` helper (`code-mode.md` 4): one
//! JSON object per LF-terminated line, typed and strict (an unknown `type` or field is a
//! breach), decoded sans-IO by [`Decoder`] with a bounded line.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Longest line either side accepts, LF excluded: a cell's code (256 KiB, at most 1.5 MiB
/// once JSON-escaped), its tool list and overhead fit with room; a longer line is a breach.
pub const LINE_BYTES: usize = 4 * 1024 * 1024;
/// Most code a cell may carry (UTF-8 bytes, before fence removal).
pub const CODE_BYTES: usize = 256 * 1024;
/// Most text the helper keeps of a cell's console and `text()` output, and apart of its
/// returned value or error; the backend bounds the result to 64 KiB anyway.
pub const OUTPUT_BYTES: usize = 256 * 1024;
/// Longest compact JSON input of one nested call; a longer one is refused `invalid_input`
/// by the helper without being sent.
pub const INPUT_BYTES: usize = 1024 * 1024;
/// Most bytes `store` keeps per helper (keys and JSON values).
pub const STORE_BYTES: usize = 1024 * 1024;

/// One tool reachable from the cell's code.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ToolInfo {
    /// Its name, as `tools[name]` reaches it.
    pub name: String,
    /// Its one-line description (what `ALL_TOOLS` lists).
    pub description: String,
    /// Its TypeScript declaration (what `describe(name)` returns).
    pub declaration: String,
}

/// A cell to run: the code as the model sent it (the helper removes the fence) and its limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Cell {
    /// The cell's id (the `exec` call id), echoed by `done`.
    pub id: String,
    /// The code.
    pub code: String,
    /// The reachable tools (the helper sorts them by name for `ALL_TOOLS`).
    pub tools: Vec<ToolInfo>,
    /// Engine CPU budget, paused while the code awaits a tool.
    pub cpu_ms: u64,
    /// Engine heap bound.
    pub memory_mib: u64,
    /// Nested calls allowed; later ones throw `ToolError` `limit`.
    pub max_calls: u32,
}

pub use super::text::ToolErrorCode;

/// The backend's answer to a nested call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CallAnswer {
    /// The call's output text.
    Output(String),
    /// The call threw `ToolError`.
    Error {
        /// Its code.
        code: ToolErrorCode,
        /// Its message (non-empty).
        message: String,
    },
}

/// `result` on the wire: `ok` with `output`, or not with `code` and `message`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawResult {
    call: u64,
    ok: bool,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    output: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    code: Option<ToolErrorCode>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    message: Option<String>,
}

/// The answer to nested call `call`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "RawResult", into = "RawResult")]
pub struct CallResult {
    /// The call's number, as the helper sent it.
    pub call: u64,
    /// What it gave.
    pub answer: CallAnswer,
}

impl TryFrom<RawResult> for CallResult {
    type Error = &'static str;
    fn try_from(r: RawResult) -> Result<Self, Self::Error> {
        let answer = match (r.ok, r.output, r.code, r.message) {
            (true, Some(output), None, None) => CallAnswer::Output(output),
            (false, None, Some(code), Some(message)) if !message.is_empty() => {
                CallAnswer::Error { code, message }
            }
            _ => return Err("a result has output when ok, else code and a non-empty message"),
        };
        Ok(Self {
            call: r.call,
            answer,
        })
    }
}

impl From<CallResult> for RawResult {
    fn from(r: CallResult) -> Self {
        match r.answer {
            CallAnswer::Output(output) => Self {
                call: r.call,
                ok: true,
                output: Some(output),
                code: None,
                message: None,
            },
            CallAnswer::Error { code, message } => Self {
                call: r.call,
                ok: false,
                output: None,
                code: Some(code),
                message: Some(message),
            },
        }
    }
}

/// Why the backend stops a running cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptReason {
    /// Past `timeout_ms` (the backend's wall clock): the cell ends `timed_out`.
    Timeout,
    /// `turn.cancel` or `shutdown`: the cell ends `cancelled`.
    Cancel,
}

/// A line the backend sends the helper.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum ToHost {
    /// Run a cell (only while none runs).
    Cell(Cell),
    /// The answer to a nested call.
    Result(CallResult),
    /// Stop the running cell (ignored between cells).
    Interrupt {
        /// Why.
        reason: InterruptReason,
    },
}

pub use super::text::CellState;

/// The end of a cell.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Done {
    /// The cell's id.
    pub id: String,
    /// How it ended.
    pub state: CellState,
    /// The output of `code-mode.md` 8 below the two header lines: `M calls refused past
    /// max_calls` when there were any, console and `text()` lines in order, then the returned
    /// value as compact JSON or the uncaught error (name, message, stack with the model's line
    /// numbers); LF-separated, no final LF.
    pub output: String,
    /// Nested calls the code sent (within `max_calls`, refused ones included).
    pub calls: u32,
}

/// A line the helper sends the backend.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case", deny_unknown_fields)]
pub enum FromHost {
    /// A nested tool call the code issued; `input` is whatever JSON the code passed.
    Call {
        /// Its number: unique over the helper's life, from 1.
        call: u64,
        /// The tool's name, as the code wrote it (the backend refuses one not reachable).
        name: String,
        /// The input, unchecked (`null` when the helper refused it).
        input: Value,
        /// More calls of the same flush follow at once: the backend may run them together.
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        more: bool,
        /// Refused by the helper before it could be sent as it was (input not JSON, too
        /// large or deep, past `max_calls`): the backend records it and answers this error.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        refused: Option<Refusal>,
    },
    /// The running cell ended.
    Done(Done),
}

/// A call the helper refused: the `ToolError` the code gets, once the backend recorded it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Refusal {
    /// Its code.
    pub code: ToolErrorCode,
    /// Why (non-empty).
    pub message: String,
}

/// Why a line could not be read: every one breaks the protocol.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// A line (or an unfinished one) passed [`LINE_BYTES`].
    LineTooLong,
    /// A line that is not a message of this protocol (the serde reason, never the line).
    Malformed(String),
}

/// A sans-IO decoder of LF-delimited messages: feed bytes, take messages. After an error it
/// yields nothing more (the peer is dropped).
#[derive(Debug)]
pub struct Decoder {
    buf: Vec<u8>,
    start: usize,
    /// Bytes after `start` known to hold no LF, so a long line is scanned once.
    scanned: usize,
    failed: bool,
}

impl Default for Decoder {
    fn default() -> Self {
        Self::new()
    }
}

impl Decoder {
    /// An empty decoder.
    #[must_use]
    pub fn new() -> Self {
        Self {
            buf: Vec::new(),
            start: 0,
            scanned: 0,
            failed: false,
        }
    }

    /// Appends bytes read from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        if !self.failed {
            self.buf.extend_from_slice(bytes);
        }
    }

    /// Bytes held that are not yet a whole line.
    #[must_use]
    pub fn buffered(&self) -> usize {
        self.buf.len() - self.start
    }

    /// The next whole message, `None` when more bytes are needed (or after an error).
    pub fn next_message<T: for<'de> Deserialize<'de>>(&mut self) -> Option<Result<T, DecodeError>> {
        if self.failed {
            return None;
        }
        let rest = &self.buf[self.start..];
        let Some(lf) = memchr::memchr(b'\n', &rest[self.scanned..]).map(|i| i + self.scanned)
        else {
            if rest.len() > LINE_BYTES {
                return Some(self.fail(DecodeError::LineTooLong));
            }
            self.scanned = rest.len();
            self.compact();
            return None;
        };
        if lf > LINE_BYTES {
            return Some(self.fail(DecodeError::LineTooLong));
        }
        let line = &rest[..lf];
        let parsed = serde_json::from_slice::<T>(line);
        self.start += lf + 1;
        self.scanned = 0;
        match parsed {
            Ok(m) => Some(Ok(m)),
            Err(e) => Some(self.fail(DecodeError::Malformed(e.to_string()))),
        }
    }

    fn compact(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
    }

    fn fail<T>(&mut self, e: DecodeError) -> Result<T, DecodeError> {
        self.failed = true;
        self.buf = Vec::new();
        self.start = 0;
        Err(e)
    }
}

/// One message as a line, LF included.
#[must_use]
pub fn encode<T: Serialize>(message: &T) -> Vec<u8> {
    // Serializing these types cannot fail: string keys only, no non-finite floats.
    let mut line = serde_json::to_vec(message).unwrap_or_default();
    line.push(b'\n');
    line
}

/// Fuzz entry point (behind the `testing` feature): feeds `data` to a [`Decoder`] for each
/// direction in chunks its first byte sizes; it must never panic, never hold more than a line
/// past its bound, and every decoded message must encode to a line that decodes to the same
/// kind of message (equal but for floats, which serde_json's fast parser may round apart).
#[cfg(feature = "testing")]
pub fn fuzz(data: &[u8]) {
    let (chunk, body) = match data.split_first() {
        Some((c, rest)) => (usize::from(*c) * 7 + 1, rest),
        None => return,
    };
    fuzz_as::<ToHost>(body, chunk, |a, b| a == b);
    fuzz_as::<FromHost>(body, chunk, |a, b| match (a, b) {
        (
            FromHost::Call { call, name, .. },
            FromHost::Call {
                call: c, name: n, ..
            },
        ) => call == c && name == n,
        _ => a == b,
    });
}

#[cfg(feature = "testing")]
fn fuzz_as<T>(body: &[u8], chunk: usize, same: fn(&T, &T) -> bool)
where
    T: for<'de> Deserialize<'de> + Serialize + std::fmt::Debug,
{
    let mut d = Decoder::new();
    for piece in body.chunks(chunk) {
        d.push(piece);
        while let Some(m) = d.next_message::<T>() {
            let Ok(m) = m else { return };
            let line = encode(&m);
            let mut again = Decoder::new();
            again.push(&line);
            match again.next_message::<T>() {
                Some(Ok(back)) => assert!(same(&m, &back), "{m:?} came back as {back:?}"),
                other => panic!("{m:?} encoded to a line that decodes to {other:?}"),
            }
        }
        assert!(d.buffered() <= LINE_BYTES + chunk);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn one<T: for<'de> Deserialize<'de>>(line: &str) -> Result<T, DecodeError> {
        let mut d = Decoder::new();
        d.push(line.as_bytes());
        d.push(b"\n");
        d.next_message::<T>().unwrap()
    }

    #[test]
    fn messages_have_their_documented_shapes() {
        let cell = ToHost::Cell(Cell {
            id: "c1".into(),
            code: "return 1".into(),
            tools: vec![ToolInfo {
                name: "read_file".into(),
                description: "Read a file".into(),
                declaration: "read_file(input: {path: string}): Promise<string>".into(),
            }],
            cpu_ms: 200,
            memory_mib: 16,
            max_calls: 3,
        });
        let v: Value = serde_json::from_slice(&encode(&cell)).unwrap();
        assert_eq!(
            v,
            json!({"type":"cell","id":"c1","code":"return 1","tools":[{"name":"read_file",
                "description":"Read a file","declaration":"read_file(input: {path: string}): Promise<string>"}],
                "cpu_ms":200,"memory_mib":16,"max_calls":3})
        );
        let ok = ToHost::Result(CallResult {
            call: 4,
            answer: CallAnswer::Output("hi".into()),
        });
        assert_eq!(
            String::from_utf8(encode(&ok)).unwrap(),
            "{\"type\":\"result\",\"call\":4,\"ok\":true,\"output\":\"hi\"}\n"
        );
        let err = ToHost::Result(CallResult {
            call: 5,
            answer: CallAnswer::Error {
                code: ToolErrorCode::UnknownTool,
                message: "no".into(),
            },
        });
        let v: Value = serde_json::from_slice(&encode(&err)).unwrap();
        assert_eq!(
            v,
            json!({"type":"result","call":5,"ok":false,"code":"unknown_tool","message":"no"})
        );
        let done = FromHost::Done(Done {
            id: "c1".into(),
            state: CellState::TimedOut,
            output: "a\nb".into(),
            calls: 2,
        });
        let v: Value = serde_json::from_slice(&encode(&done)).unwrap();
        assert_eq!(
            v,
            json!({"type":"done","id":"c1","state":"timed_out","output":"a\nb","calls":2})
        );
        for m in [cell, ok, err] {
            assert_eq!(
                one::<ToHost>(&String::from_utf8(encode(&m)).unwrap()),
                Ok(m)
            );
        }
        assert_eq!(
            one::<ToHost>(r#"{"type":"interrupt","reason":"cancel"}"#),
            Ok(ToHost::Interrupt {
                reason: InterruptReason::Cancel
            })
        );
        assert_eq!(
            one::<FromHost>(r#"{"type":"call","call":1,"name":"x","input":[1]}"#),
            Ok(FromHost::Call {
                call: 1,
                name: "x".into(),
                input: json!([1]),
                more: false,
                refused: None,
            })
        );
        let refused = FromHost::Call {
            call: 2,
            name: "x".into(),
            input: Value::Null,
            more: true,
            refused: Some(Refusal {
                code: ToolErrorCode::Limit,
                message: "past max_calls".into(),
            }),
        };
        let v: Value = serde_json::from_slice(&encode(&refused)).unwrap();
        assert_eq!(
            v,
            json!({"type":"call","call":2,"name":"x","input":null,"more":true,
                "refused":{"code":"limit","message":"past max_calls"}})
        );
        assert_eq!(
            one::<FromHost>(&String::from_utf8(encode(&refused)).unwrap()),
            Ok(refused)
        );
    }

    #[test]
    fn unknown_types_fields_and_inconsistent_results_are_breaches() {
        for bad in [
            r#"{"type":"hello"}"#,
            r#"{"type":"interrupt","reason":"cancel","extra":1}"#,
            r#"{"type":"interrupt","reason":"later"}"#,
            r#"{"type":"result","call":1,"ok":true}"#,
            r#"{"type":"result","call":1,"ok":true,"output":"x","code":"failed"}"#,
            r#"{"type":"result","call":1,"ok":false,"code":"failed","message":""}"#,
            r#"{"type":"result","call":1,"ok":false,"code":"oops","message":"m"}"#,
            r#"{"reason":"cancel"}"#,
            "[1]",
            "not json",
        ] {
            assert!(
                matches!(one::<ToHost>(bad), Err(DecodeError::Malformed(_))),
                "{bad}"
            );
        }
        assert!(one::<FromHost>(
            r#"{"type":"done","id":"x","state":"completed","output":"","calls":0,"more":1}"#
        )
        .is_err());
    }

    #[test]
    fn lines_split_anywhere_decode_and_an_error_ends_the_stream() {
        let line = encode(&ToHost::Interrupt {
            reason: InterruptReason::Timeout,
        });
        let mut stream = line.repeat(3);
        stream.extend_from_slice(b"garbage\n");
        stream.extend_from_slice(&line);
        let mut d = Decoder::new();
        let mut got = Vec::new();
        for b in &stream {
            d.push(std::slice::from_ref(b));
            while let Some(m) = d.next_message::<ToHost>() {
                got.push(m.is_ok());
            }
        }
        assert_eq!(got, [true, true, true, false]);
        assert_eq!(d.buffered(), 0);
    }

    #[test]
    fn a_line_at_the_bound_is_read_and_one_byte_more_is_refused() {
        let head = r#"{"type":"result","call":1,"ok":true,"output":""#;
        let tail = r#""}"#;
        let mut ok = head.to_owned();
        ok.push_str(&"a".repeat(LINE_BYTES - head.len() - tail.len()));
        ok.push_str(tail);
        assert_eq!(ok.len(), LINE_BYTES);
        assert!(one::<ToHost>(&ok).is_ok());
        let mut d = Decoder::new();
        d.push(&vec![b' '; LINE_BYTES + 1]);
        assert_eq!(
            d.next_message::<ToHost>(),
            Some(Err(DecodeError::LineTooLong))
        );
        assert_eq!(d.next_message::<ToHost>(), None);
        let mut d = Decoder::new();
        let mut over = vec![b' '; LINE_BYTES + 1];
        over.push(b'\n');
        d.push(&over);
        assert_eq!(
            d.next_message::<ToHost>(),
            Some(Err(DecodeError::LineTooLong))
        );
    }

    #[test]
    fn fuzz_survives_odd_input() {
        fuzz(b"");
        fuzz(b"\x00{\"type\":\"interrupt\",\"reason\":\"cancel\"}\n\xff\n");
        fuzz(b"\x03{\"type\":\"call\",\"call\":1,\"name\":\"x\",\"input\":{\"a\":1.5e3}}\n");
    }
}
