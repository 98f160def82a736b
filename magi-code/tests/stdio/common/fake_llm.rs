//! A fake model server on 127.0.0.1 for the agent loop: one scripted [`Reply`] per turn
//! request, in order; every request it saw is recorded with its parsed JSON body, and a
//! stalled reply reports when the client closed the connection. Title requests (`runner.md`
//! 7, recognized by their fixed instruction) are kept apart: they take their own replies
//! (none scripted: a 500, which the runner ignores silently) and are recorded on their own,
//! so a test of turns sees exactly its turn requests.

use serde_json::Value;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::{Arc, Condvar, Mutex};
use std::thread;
use std::time::{Duration, Instant};

/// A reply held back until [`Hold::release`]: its request has arrived and is answered only
/// when the test says so.
#[derive(Debug, Clone, Default)]
pub struct Hold(Arc<(Mutex<bool>, Condvar)>);

impl Hold {
    /// Lets every reply held by this go.
    pub fn release(&self) {
        let (open, changed) = &*self.0;
        *open.lock().unwrap() = true;
        changed.notify_all();
    }

    /// Waits for the release (bounded, so a test that failed before releasing leaves no
    /// server thread behind for long).
    fn wait(&self) {
        let (open, changed) = &*self.0;
        let guard = open.lock().unwrap();
        let limit = Duration::from_secs(120);
        let _ = changed.wait_timeout_while(guard, limit, |open| !*open);
    }
}

/// What the fake server answers one request with.
#[derive(Debug, Clone)]
pub struct Reply {
    /// HTTP status.
    pub status: u16,
    /// Extra response headers.
    pub headers: Vec<(String, String)>,
    /// SSE text, sent as chunks in this order (each flushed).
    pub chunks: Vec<String>,
    /// When set, the answer waits until the test releases it: the test, not a timer, says
    /// when a slow provider answers.
    pub hold: Option<Hold>,
    /// After the chunks, send nothing more and keep the connection open until the client
    /// closes it (a silent stall).
    pub stall: bool,
    /// Close the connection after the chunks without the chunked terminator.
    pub cut: bool,
}

impl Reply {
    /// A 200 SSE reply with these events (each already framed, e.g. `data: …\n\n`).
    #[must_use]
    pub fn sse(chunks: Vec<String>) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            chunks,
            hold: None,
            stall: false,
            cut: false,
        }
    }

    /// A non-200 reply with a JSON body.
    #[must_use]
    pub fn status(status: u16, body: &Value) -> Self {
        Self {
            status,
            headers: Vec::new(),
            chunks: vec![body.to_string()],
            hold: None,
            stall: false,
            cut: false,
        }
    }

    /// Adds a response header.
    #[must_use]
    pub fn header(mut self, k: &str, v: &str) -> Self {
        self.headers.push((k.to_owned(), v.to_owned()));
        self
    }

    /// Sends the chunks, then stalls.
    #[must_use]
    pub fn stalled(mut self) -> Self {
        self.stall = true;
        self
    }
}

/// One request the server saw.
#[derive(Debug, Clone)]
pub struct Seen {
    /// Request path.
    pub path: String,
    /// Lowercased header names with their values.
    pub headers: Vec<(String, String)>,
    /// The body as JSON (`Null` if it was not).
    pub body: Value,
    /// The body's bytes as sent.
    pub raw: Vec<u8>,
    /// When it arrived.
    pub at: Instant,
}

/// Words of the runner's fixed title instruction that mark a title request.
pub const TITLE_MARK: &str = "short title for the conversation";

type Queue = Arc<Mutex<std::vec::IntoIter<Reply>>>;

/// The running fake server.
pub struct FakeLlm {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    seen: Receiver<Seen>,
    titles: Receiver<Seen>,
    closed: Receiver<Instant>,
    stalling: Receiver<()>,
}

impl FakeLlm {
    /// Serves `replies` to consecutive turn requests; later ones, and every title request,
    /// get a 500.
    #[must_use]
    pub fn start(replies: Vec<Reply>) -> Self {
        Self::with_titles(replies, Vec::new())
    }

    /// [`Self::start`], answering consecutive title requests with `titles` (then a 500).
    #[must_use]
    pub fn with_titles(replies: Vec<Reply>, titles: Vec<Reply>) -> Self {
        Self::serving(replies, titles, 64, false)
    }

    /// Serves `replies` to the first `replies.len()` connections, then closes its port: a
    /// later connect is refused (a provider gone unreachable).
    #[must_use]
    pub fn then_refusing(replies: Vec<Reply>) -> Self {
        let n = replies.len();
        Self::serving(replies, Vec::new(), n, true)
    }

    /// Serves at most `connections`; with `close`, the port is closed once the last one is
    /// accepted, before it is answered, so that no later connect can reach it.
    fn serving(replies: Vec<Reply>, titles: Vec<Reply>, connections: usize, close: bool) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        let (tx, seen) = mpsc::channel();
        let (ttx, title_seen) = mpsc::channel();
        let (ctx, closed) = mpsc::channel();
        let (stx, stalling) = mpsc::channel();
        let turns: Queue = Arc::new(Mutex::new(replies.into_iter()));
        let titled: Queue = Arc::new(Mutex::new(titles.into_iter()));
        thread::spawn(move || {
            // Bounded: the test ends the process; at most this many connections are served.
            for n in 1..=connections {
                let Ok((stream, _)) = listener.accept() else {
                    return;
                };
                if close && n == connections {
                    drop(listener);
                    serve(stream, [&turns, &titled], [&tx, &ttx], (&stx, &ctx));
                    return;
                }
                let (tx, ttx, ctx, stx) = (tx.clone(), ttx.clone(), ctx.clone(), stx.clone());
                let (turns, titled) = (turns.clone(), titled.clone());
                thread::spawn(move || {
                    serve(stream, [&turns, &titled], [&tx, &ttx], (&stx, &ctx));
                });
            }
        });
        Self {
            base,
            seen,
            titles: title_seen,
            closed,
            stalling,
        }
    }

    /// The next title request seen, within `timeout`.
    pub fn next_title(&self, timeout: Duration) -> Option<Seen> {
        self.titles.recv_timeout(timeout).ok()
    }

    /// The next request seen, within `timeout`.
    #[track_caller]
    pub fn next(&self, timeout: Duration) -> Seen {
        self.seen
            .recv_timeout(timeout)
            .expect("the fake model server saw no request in time")
    }

    /// Every request seen so far, without waiting.
    pub fn drain(&self) -> Vec<Seen> {
        self.seen.try_iter().collect()
    }

    /// Whether a stalled reply has sent its head and chunks and gone silent, within
    /// `timeout`: the client is then reading a silent stream.
    pub fn stalled_within(&self, timeout: Duration) -> bool {
        self.stalling.recv_timeout(timeout).is_ok()
    }

    /// When a stalled connection was closed by the client, within `timeout`.
    pub fn closed_within(&self, timeout: Duration) -> Option<Instant> {
        self.closed.recv_timeout(timeout).ok()
    }
}

/// Serves one connection: a title request takes the next title reply, any other the next
/// turn reply; each is recorded on its own channel. A stalled reply says when it goes silent
/// and when the client closed it.
fn serve(
    stream: TcpStream,
    queues: [&Queue; 2],
    txs: [&Sender<Seen>; 2],
    (stalling, closed): (&Sender<()>, &Sender<Instant>),
) {
    let mut r = BufReader::new(stream.try_clone().unwrap());
    let mut line = String::new();
    if r.read_line(&mut line).unwrap_or(0) == 0 {
        return;
    }
    let path = line
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .to_owned();
    let mut headers = Vec::new();
    let mut len = 0usize;
    loop {
        let mut h = String::new();
        if r.read_line(&mut h).unwrap_or(0) == 0 {
            return;
        }
        let h = h.trim_end().to_owned();
        if h.is_empty() {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let (k, v) = (k.trim().to_ascii_lowercase(), v.trim().to_owned());
            if k == "content-length" {
                len = v.parse().unwrap_or(0);
            }
            headers.push((k, v));
        }
    }
    let mut body = vec![0u8; len];
    if r.read_exact(&mut body).is_err() {
        return;
    }
    let raw = body;
    let body: Value = serde_json::from_slice(&raw).unwrap_or(Value::Null);
    let k = usize::from(body.to_string().contains(TITLE_MARK));
    let reply = queues[k]
        .lock()
        .unwrap()
        .next()
        .unwrap_or_else(|| Reply::status(500, &serde_json::json!({})));
    let reply = &reply;
    let _ = txs[k].send(Seen {
        path,
        headers,
        body,
        raw,
        at: Instant::now(),
    });
    let mut w = stream;
    let ctype = if reply.status == 200 {
        "text/event-stream"
    } else {
        "application/json"
    };
    let mut head = format!(
        "HTTP/1.1 {} X\r\ncontent-type: {ctype}\r\ntransfer-encoding: chunked\r\nconnection: close\r\n",
        reply.status
    );
    for (k, v) in &reply.headers {
        head.push_str(&format!("{k}: {v}\r\n"));
    }
    head.push_str("\r\n");
    if w.write_all(head.as_bytes()).is_err() {
        return;
    }
    if let Some(hold) = &reply.hold {
        hold.wait();
    }
    for c in &reply.chunks {
        let b = c.as_bytes();
        if write!(w, "{:x}\r\n", b.len()).is_err()
            || w.write_all(b).is_err()
            || w.write_all(b"\r\n").is_err()
            || w.flush().is_err()
        {
            return;
        }
    }
    if reply.stall {
        let _ = stalling.send(());
        // Wait for the client to close: a read returns 0 (or fails) when it does.
        let mut buf = [0u8; 64];
        let mut rest = r;
        let _ = rest
            .get_mut()
            .set_read_timeout(Some(Duration::from_secs(30)));
        loop {
            match rest.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(_) => {}
            }
        }
        let _ = closed.send(Instant::now());
        return;
    }
    if !reply.cut {
        let _ = w.write_all(b"0\r\n\r\n");
        let _ = w.flush();
    }
}

/// One SSE event whose `event:` is the data's `type` (the Anthropic and Responses streams).
#[must_use]
pub fn typed_event(data: &Value) -> String {
    format!(
        "event: {}\ndata: {data}\n\n",
        data["type"].as_str().unwrap()
    )
}

/// A Chat Completions chunk with `delta`.
#[must_use]
pub fn chat_delta(delta: &Value) -> String {
    format!(
        "data: {}\n\n",
        serde_json::json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": delta, "finish_reason": null}]})
    )
}

/// The Chat Completions chunk ending a choice.
#[must_use]
pub fn chat_finish(reason: &str) -> String {
    format!(
        "data: {}\n\n",
        serde_json::json!({"id": "c1", "object": "chat.completion.chunk", "choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})
    )
}

/// A whole Chat reply: text deltas, then `stop` and `[DONE]`.
#[must_use]
pub fn chat_text(parts: &[&str]) -> Reply {
    let mut chunks: Vec<String> = parts
        .iter()
        .map(|t| chat_delta(&serde_json::json!({"content": t})))
        .collect();
    chunks.push(chat_finish("stop"));
    chunks.push("data: [DONE]\n\n".to_owned());
    Reply::sse(chunks)
}

/// A Chat reply calling one tool, its arguments split in two fragments.
#[must_use]
pub fn chat_tool_call(id: &str, name: &str, arguments: &str) -> Reply {
    let cut = arguments.len() / 2;
    Reply::sse(vec![
        chat_delta(
            &serde_json::json!({"tool_calls": [{"index": 0, "id": id, "type": "function", "function": {"name": name, "arguments": &arguments[..cut]}}]}),
        ),
        chat_delta(
            &serde_json::json!({"tool_calls": [{"index": 0, "function": {"arguments": &arguments[cut..]}}]}),
        ),
        chat_finish("tool_calls"),
        "data: [DONE]\n\n".to_owned(),
    ])
}

/// `reply` (a Chat SSE reply ending in `[DONE]`) with a usage chunk reporting `prompt_tokens`
/// input tokens before its terminator.
#[must_use]
pub fn chat_with_usage(mut reply: Reply, prompt_tokens: u64) -> Reply {
    let usage = format!(
        "data: {}\n\n",
        serde_json::json!({"id": "c1", "object": "chat.completion.chunk", "choices": [], "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": 5}})
    );
    let at = reply.chunks.len().saturating_sub(1);
    reply.chunks.insert(at, usage);
    reply
}
