//! The sans-IO half of the MCP Streamable HTTP transport (`backend.md` "MCP servers over
//! HTTP"): what a status means, which revisions an HTTP server may answer, the headers of a
//! request, and an answer's body (one JSON message or an SSE stream of them) fed through the
//! JSON-RPC [`Session`] with the same message bound and garbage rules as stdio.

use super::jsonrpc::{Incoming, RpcError, Session, SessionError};
use crate::util::sse::SseDecoder;
use serde_json::Value;

/// Revisions accepted in an HTTP server's `initialize` answer (the Streamable HTTP ones).
pub const HTTP_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];
/// The `Accept` of every POST.
pub const ACCEPT: &str = "application/json, text/event-stream";
/// Longest `Mcp-Session-Id` kept; a longer or non-visible-ASCII one fails the handshake.
pub const SESSION_ID_BYTES: usize = 1024;
/// Most bytes read from one answer's SSE stream (each message is bounded by the session).
pub const STREAM_BYTES: usize = 64 << 20;

/// The negotiated revision of an HTTP server's `initialize` answer.
#[must_use]
pub fn accepted_version(result: &Value) -> Option<&'static str> {
    let v = result.get("protocolVersion")?.as_str()?;
    HTTP_VERSIONS.iter().copied().find(|s| *s == v)
}

/// A usable `Mcp-Session-Id`: visible ASCII (0x21–0x7E), not empty, bounded.
#[must_use]
pub fn valid_session_id(id: &str) -> bool {
    !id.is_empty() && id.len() <= SESSION_ID_BYTES && id.bytes().all(|b| (0x21..=0x7e).contains(&b))
}

/// What an answer's status means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// 2xx: read the body.
    Ok,
    /// `401`: refresh once and retry once.
    Unauthorized,
    /// `404` to a request that carried a session id: the session is gone.
    SessionGone,
    /// Anything else: the request failed.
    Refused,
}

/// Classifies `status` of a request that did (or did not) carry a session id.
#[must_use]
pub fn classify(status: u16, had_session: bool) -> Status {
    match status {
        200..=299 => Status::Ok,
        401 => Status::Unauthorized,
        404 if had_session => Status::SessionGone,
        _ => Status::Refused,
    }
}

/// The transport headers of a POST (the definition's and the authorization come on top).
#[must_use]
pub fn post_headers(
    session_id: Option<&str>,
    version: Option<&str>,
) -> Vec<(&'static str, String)> {
    let mut h = vec![
        ("accept", ACCEPT.to_owned()),
        ("content-type", "application/json".to_owned()),
    ];
    if let Some(id) = session_id {
        h.push(("mcp-session-id", id.to_owned()));
    }
    if let Some(v) = version {
        h.push(("mcp-protocol-version", v.to_owned()));
    }
    h
}

/// Why an answer's body cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Broken {
    /// Not the server's fault alone: a body or stream cut short, a content type that is
    /// neither JSON nor SSE, or a stream past [`STREAM_BYTES`]. The call fails, the server
    /// stays.
    Cut,
    /// A protocol breach (a message over the bound, more garbage than tolerated, SSE that is
    /// not UTF-8 or has a line over the bound): the server is given up on.
    Breach,
}

/// One answer's body being read: bytes in, the response to `id` out.
#[derive(Debug)]
pub struct Answer {
    id: u64,
    sse: Option<SseDecoder>,
    body: Vec<u8>,
    read: usize,
}

/// What feeding an answer gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fed {
    /// Not yet the response.
    More,
    /// The response to the request.
    Done(Result<Value, RpcError>),
}

impl Answer {
    /// Reads the answer to request `id` whose `Content-Type` is `content_type`; Err when it
    /// is neither JSON nor SSE.
    pub fn new(id: u64, content_type: &str) -> Result<Self, Broken> {
        let media = content_type
            .split(';')
            .next()
            .unwrap_or("")
            .trim()
            .to_ascii_lowercase();
        let sse = match media.as_str() {
            "application/json" => None,
            "text/event-stream" => Some(SseDecoder::new()),
            _ => return Err(Broken::Cut),
        };
        Ok(Self {
            id,
            sse,
            body: Vec::new(),
            read: 0,
        })
    }

    /// Takes the next bytes of the body. Server requests met on a stream are answered in
    /// `session`'s output queue; notifications and other messages before the response are
    /// ignored (`decisions.md` 42).
    pub fn feed(&mut self, bytes: &[u8], session: &mut Session) -> Result<Fed, Broken> {
        self.read += bytes.len();
        let Some(sse) = self.sse.as_mut() else {
            // A JSON body is one message: over the bound (with a line end) it is a breach.
            if self.read > super::jsonrpc::LINE_BYTES + 2 {
                return Err(Broken::Breach);
            }
            self.body.extend_from_slice(bytes);
            return Ok(Fed::More);
        };
        if self.read > STREAM_BYTES {
            return Err(Broken::Cut);
        }
        let events = sse.feed(bytes).map_err(|_| Broken::Breach)?;
        for ev in events {
            // Empty data events (a priming event, a keep-alive) are skipped.
            if ev.data.trim().is_empty() {
                continue;
            }
            if let Fed::Done(r) = self.message(ev.data.as_bytes(), session)? {
                return Ok(Fed::Done(r));
            }
        }
        Ok(Fed::More)
    }

    /// The body ended: a JSON body is the response; a stream that ends before it was cut.
    pub fn finish(&mut self, session: &mut Session) -> Result<Fed, Broken> {
        if self.sse.is_some() {
            return Err(Broken::Cut);
        }
        let body = std::mem::take(&mut self.body);
        match self.message(&body, session)? {
            Fed::More => Err(Broken::Cut),
            done => Ok(done),
        }
    }

    fn message(&mut self, msg: &[u8], session: &mut Session) -> Result<Fed, Broken> {
        match session.handle_line(msg) {
            Ok(Incoming::Response { id, result }) if id == self.id => Ok(Fed::Done(result)),
            Ok(_) => Ok(Fed::More),
            Err(SessionError::TooManyOutstanding) => Ok(Fed::More),
            Err(_) => Err(Broken::Breach),
        }
    }
}

/// Fuzz entry point (behind the `testing` feature): the first byte picks a JSON body or an
/// SSE stream, the rest is fed in pieces cut at each `0xff`; it must never panic, never give
/// an answer to another id, and never hold more than the session's bounds.
#[cfg(feature = "testing")]
pub fn fuzz(data: &[u8]) {
    let Some((&kind, rest)) = data.split_first() else {
        return;
    };
    let mut s = Session::new();
    let Ok(id) = s.send_request("tools/call", Value::Null, None) else {
        return;
    };
    let media = if kind % 2 == 0 {
        "application/json"
    } else {
        "text/event-stream"
    };
    let Ok(mut a) = Answer::new(id, media) else {
        return;
    };
    for piece in rest.split(|b| *b == 0xff) {
        match a.feed(piece, &mut s) {
            Ok(Fed::More) => {}
            Ok(Fed::Done(_)) | Err(_) => return,
        }
        while s.poll_write().is_some() {}
        assert!(s.outstanding() <= 1);
    }
    let _ = a.finish(&mut s);
}

#[cfg(test)]
mod tests;
