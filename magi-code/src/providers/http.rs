//! One step over HTTP: the wire API's request, streamed back over SSE with ureq on the run's
//! thread, decoded sans-IO, with retries (`runner.md` 5) and cancellation that closes the
//! connection at once.

use super::codex::{Codex, RefreshError};
use super::model::{
    DecodeError, ModelClient, ModelRequest, StepFailure, StepSink, StreamDecoder, WireApi,
};
use super::sse::SseDecoder;
use super::target::Target;
use super::{anthropic, openai_chat, openai_responses};
use crate::util::cancel::Cancel;
use crate::util::clock::{Clock, RealClock};
use serde_json::Value;
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

/// Most response bytes read from one stream.
pub const STREAM_BYTES: u64 = 64 << 20;
/// Idle guard between two reads of a stream.
pub const READ_IDLE: Duration = Duration::from_secs(60);
/// Time to connect.
pub const CONNECT: Duration = Duration::from_secs(10);
/// Time to the response head.
pub const RESPONSE_HEAD: Duration = Duration::from_secs(120);
/// Retries of one step's request at most.
pub const MAX_RETRIES: u32 = 4;
/// The first retry's base wait; each later one doubles it.
pub const BACKOFF_BASE: Duration = Duration::from_millis(500);
/// Longest `retry-after` honoured.
pub const RETRY_AFTER_MAX: Duration = Duration::from_secs(60);
/// Most bytes of an error body read to classify it.
const ERROR_BODY_BYTES: u64 = 64 << 10;

/// Statuses retried (`runner.md` 5).
const RETRY_STATUSES: [u16; 8] = [408, 409, 429, 500, 502, 503, 504, 529];

/// A wire API's parts: request path, body builder, stream decoder, overflow check of an
/// error body.
struct Wire {
    path: &'static str,
    body: fn(&ModelRequest<'_>) -> Value,
    /// The body's conversation member, written last (`body::stable`).
    conversation: &'static str,
    decoder: fn() -> Box<dyn StreamDecoder>,
    overflow: fn(&[u8]) -> bool,
}

fn wire(api: WireApi) -> Wire {
    match api {
        WireApi::AnthropicMessages => Wire {
            path: anthropic::PATH,
            body: anthropic::request_body,
            conversation: "messages",
            decoder: || Box::new(anthropic::Decoder::default()),
            overflow: anthropic::error_body_is_overflow,
        },
        WireApi::OpenAiChat => Wire {
            path: openai_chat::PATH,
            body: openai_chat::request_body,
            conversation: "messages",
            decoder: || Box::new(openai_chat::Decoder::default()),
            overflow: openai_chat::error_body_is_overflow,
        },
        WireApi::OpenAiResponses => Wire {
            path: openai_responses::PATH,
            body: openai_responses::request_body,
            conversation: "input",
            decoder: || Box::new(openai_responses::Decoder::default()),
            overflow: openai_responses::error_body_is_overflow,
        },
    }
}

/// How one attempt ended, when not with a complete step.
enum Attempt {
    /// Worth retrying, after the server's `retry-after` if it gave one.
    Retry(StepFailure, Option<Duration>),
    /// Final.
    Fail(StepFailure),
    /// A `401`: final, but a `codex` sign-in refreshes once and sends the step again.
    Unauthorized,
}

/// How a failed `codex` refresh ends the attempt: a spent sign-in is final, an unreachable
/// or busy token endpoint is worth a retry.
fn refresh_failed(e: RefreshError) -> Attempt {
    let f = refresh_failure(e);
    match e {
        RefreshError::Unreachable => Attempt::Retry(f, None),
        RefreshError::Status(s) if RETRY_STATUSES.contains(&s) => Attempt::Retry(f, None),
        _ => Attempt::Fail(f),
    }
}

/// The step failure of a failed `codex` refresh.
fn refresh_failure(e: RefreshError) -> StepFailure {
    match e {
        RefreshError::Refused => StepFailure::CodexLogin,
        RefreshError::Unreachable => StepFailure::Unreachable,
        RefreshError::Status(s) => StepFailure::Status(s),
        RefreshError::Cancelled => StepFailure::Cancelled,
    }
}

/// An HTTP provider as a [`ModelClient`].
pub struct HttpModel {
    target: Target,
    /// What the retry backoff waits on: unit tests drive it on a virtual clock.
    clock: Arc<dyn Clock + Send>,
    /// The `codex` sign-in, for a `codex` target.
    codex: Option<Codex>,
    /// The session the steps belong to (the `codex` `session_id` header).
    session_id: Option<String>,
}

impl std::fmt::Debug for HttpModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpModel")
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl HttpModel {
    /// A client for `target`, on the machine's clock.
    #[must_use]
    pub fn new(target: Target) -> Self {
        Self::on(target, Arc::new(RealClock))
    }

    /// A client for `target` whose retries wait on `clock`.
    #[must_use]
    pub fn on(target: Target, clock: Arc<dyn Clock + Send>) -> Self {
        let codex = target
            .codex
            .as_ref()
            .map(|c| Codex::new(c.path.clone(), &c.auth_url));
        Self {
            target,
            clock,
            codex,
            session_id: None,
        }
    }

    /// The same client, its steps belonging to session `id`.
    #[must_use]
    pub fn in_session(mut self, id: &str) -> Self {
        self.session_id = Some(id.to_owned());
        self
    }

    fn attempt(
        &self,
        wire: &Wire,
        body: &str,
        cancel: &Cancel,
        sink: &mut dyn StepSink,
    ) -> Result<(), Attempt> {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .timeout_connect(Some(CONNECT))
            .timeout_recv_response(Some(RESPONSE_HEAD))
            .timeout_per_read(Some(READ_IDLE))
            .http_status_as_error(false)
            .build()
            .into();
        // Cancellation closes the connection: a blocked read returns at once.
        let closer = agent.clone();
        let _hook = cancel.on_cancel(move || closer.clone().shutdown());
        let cancelled = || Attempt::Fail(StepFailure::Cancelled);
        let url = format!("{}{}", self.target.base_url, wire.path);
        let req = agent
            .post(&url)
            .header("content-type", "application/json")
            .header("accept", "text/event-stream");
        let req = match &self.codex {
            Some(c) => c.authorize(req, self.session_id.as_deref()),
            None => self.target.authorize(req),
        };
        let resp = match req.send(body.as_bytes()) {
            Ok(r) => r,
            Err(_) if cancel.is_cancelled() => return Err(cancelled()),
            Err(_) => return Err(Attempt::Retry(StepFailure::Unreachable, None)),
        };
        let status = resp.status().as_u16();
        if status != 200 {
            return Err(refused(wire, status, resp));
        }
        stream(wire, resp, cancel, sink)
    }
}

/// Why a non-200 answer ends the attempt: auth, a retryable status (with its `retry-after`),
/// an overflow the wire API recognises in the error body, or the bare status.
fn refused(wire: &Wire, status: u16, resp: ureq::http::Response<ureq::Body>) -> Attempt {
    let after = resp
        .headers()
        .get("retry-after")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| retry_after(v, crate::util::time::now_ms()));
    if status == 401 {
        return Attempt::Unauthorized;
    }
    if status == 403 {
        return Attempt::Fail(StepFailure::Auth);
    }
    if RETRY_STATUSES.contains(&status) {
        return Attempt::Retry(StepFailure::Status(status), after);
    }
    let mut err = Vec::new();
    let _ = resp
        .into_body()
        .into_reader()
        .take(ERROR_BODY_BYTES)
        .read_to_end(&mut err);
    if status == 400 && (wire.overflow)(&err) {
        return Attempt::Fail(StepFailure::ContextOverflow);
    }
    Attempt::Fail(StepFailure::Status(status))
}

/// Reads a 200 answer's SSE stream into `sink` until the decoder finishes, the sink stops it,
/// or the stream breaks (before its first event a break is worth a retry, after it final).
fn stream(
    wire: &Wire,
    resp: ureq::http::Response<ureq::Body>,
    cancel: &Cancel,
    sink: &mut dyn StepSink,
) -> Result<(), Attempt> {
    let mut reader = resp.into_body().into_reader().take(STREAM_BYTES + 1);
    let mut sse = SseDecoder::new();
    let mut decoder = (wire.decoder)();
    let mut buf = vec![0u8; 16 << 10];
    let mut seen_event = false;
    let mut total = 0u64;
    loop {
        let n = match reader.read(&mut buf) {
            _ if cancel.is_cancelled() => return Err(Attempt::Fail(StepFailure::Cancelled)),
            Ok(n) => n,
            // Before any event a broken connection is worth another try.
            Err(_) if !seen_event => return Err(Attempt::Retry(StepFailure::Unreachable, None)),
            // After it, the idle guard is the provider going quiet; anything else (a
            // reset, a body cut off mid-chunk) is a broken stream.
            Err(e) if e.kind() == std::io::ErrorKind::TimedOut => {
                return Err(Attempt::Fail(StepFailure::Unreachable))
            }
            Err(_) => return Err(Attempt::Fail(StepFailure::StreamInvalid)),
        };
        if n == 0 {
            return Err(if seen_event && decoder.said_nothing() {
                // Events that said nothing, then the end: an empty answer (a Chat stream cut
                // short before its first content).
                Attempt::Retry(StepFailure::EmptyReply, None)
            } else if seen_event {
                Attempt::Fail(StepFailure::StreamInvalid)
            } else if total == 0 {
                // Not a byte: how local servers answer an overflowing streamed request.
                Attempt::Retry(StepFailure::EmptyReply, None)
            } else {
                Attempt::Retry(StepFailure::StreamInvalid, None)
            });
        }
        total += n as u64;
        if total > STREAM_BYTES {
            return Err(Attempt::Fail(StepFailure::StreamInvalid));
        }
        let events = sse
            .feed(&buf[..n])
            .map_err(|_| Attempt::Fail(StepFailure::StreamInvalid))?;
        for ev in events {
            seen_event = true;
            let decoded = decoder.event(&ev).map_err(|e| match e {
                DecodeError::Invalid => Attempt::Fail(StepFailure::StreamInvalid),
                DecodeError::Remote => Attempt::Fail(StepFailure::Remote),
                DecodeError::ContextOverflow => Attempt::Fail(StepFailure::ContextOverflow),
                DecodeError::Empty => Attempt::Retry(StepFailure::EmptyReply, None),
            })?;
            for m in decoded {
                if !sink.event(m) {
                    return Ok(());
                }
            }
            if decoder.finished() {
                sink.flush();
                return Ok(());
            }
        }
        // One read's deltas travel as one: a burst costs one frame, a trickle one each.
        sink.flush();
    }
}

impl ModelClient for HttpModel {
    fn step(
        &mut self,
        req: &ModelRequest<'_>,
        cancel: &Cancel,
        sink: &mut dyn StepSink,
    ) -> Result<(), StepFailure> {
        let wire = wire(self.target.wire);
        let mut body = (wire.body)(req);
        // Every Responses request is keyed by its session (`decisions.md` 44).
        if let (WireApi::OpenAiResponses, Some(id), true) = (
            self.target.wire,
            &self.session_id,
            self.target.prompt_caching,
        ) {
            body["prompt_cache_key"] = Value::String(id.clone());
        }
        if !self.target.prompt_caching {
            body = super::body::uncached(&body);
        }
        let body = super::body::stable(&body, wire.conversation);
        let mut retries = 0;
        // Whether every attempt so far was an empty `200`.
        let mut all_empty = true;
        // Whether a `401` was already answered with a refresh (`decisions.md` 43).
        let mut reauthorized = false;
        loop {
            if cancel.is_cancelled() {
                return Err(StepFailure::Cancelled);
            }
            let attempt = match self.codex.as_mut().map(|c| c.fresh(cancel)) {
                Some(Err(e)) => Err(refresh_failed(e)),
                _ => self.attempt(&wire, &body, cancel, sink),
            };
            all_empty &= matches!(attempt, Err(Attempt::Retry(StepFailure::EmptyReply, _)));
            match attempt {
                Ok(()) => return Ok(()),
                Err(Attempt::Unauthorized) if self.codex.is_none() => {
                    return Err(StepFailure::Auth)
                }
                Err(Attempt::Unauthorized) if reauthorized => return Err(StepFailure::CodexLogin),
                Err(Attempt::Unauthorized) => {
                    reauthorized = true;
                    let refreshed = self.codex.as_mut().map(|c| c.after_unauthorized(cancel));
                    if let Some(Err(e)) = refreshed {
                        return Err(if cancel.is_cancelled() {
                            StepFailure::Cancelled
                        } else {
                            refresh_failure(e)
                        });
                    }
                }
                Err(Attempt::Retry(_, after)) if retries < MAX_RETRIES => {
                    let wait = retry_wait(retries, after, jitter());
                    retries += 1;
                    sink.retry(retries, MAX_RETRIES, wait);
                    if !self.clock.sleep(wait, cancel) {
                        return Err(StepFailure::Cancelled);
                    }
                }
                Err(Attempt::Retry(f, _) | Attempt::Fail(f)) => {
                    return Err(if cancel.is_cancelled() {
                        StepFailure::Cancelled
                    } else if f == StepFailure::EmptyReply && !all_empty {
                        StepFailure::StreamInvalid
                    } else {
                        f
                    });
                }
            }
        }
    }
}

/// A random factor in [-1, 1] for the backoff's ±20%.
fn jitter() -> f64 {
    let r = uuid::Uuid::new_v4().as_u128() as u64 % 2_001;
    (r as f64 - 1_000.0) / 1_000.0
}

/// The wait before retry `n` (from 0): 500 ms × 2^n, moved by up to ±20% (`jitter` in
/// [-1, 1]).
#[must_use]
pub fn backoff(n: u32, jitter: f64) -> Duration {
    let base = BACKOFF_BASE.as_secs_f64() * f64::from(1u32 << n.min(16));
    Duration::from_secs_f64(base * (1.0 + 0.2 * jitter.clamp(-1.0, 1.0)))
}

/// The wait before retry `n` (from 0): the server's `retry-after` if it sent one (already
/// capped by [`retry_after`]), else the [`backoff`].
#[must_use]
pub fn retry_wait(n: u32, after: Option<Duration>, jitter: f64) -> Duration {
    after.unwrap_or_else(|| backoff(n, jitter))
}

/// A `retry-after` value (delay seconds or an HTTP date) as a wait from `now_ms`, at most
/// [`RETRY_AFTER_MAX`]; `None` if it is neither.
#[must_use]
pub fn retry_after(value: &str, now_ms: i64) -> Option<Duration> {
    let v = value.trim();
    let wait = if let Ok(secs) = v.parse::<u64>() {
        Duration::from_secs(secs)
    } else {
        let at = crate::util::time::parse_http_date(v)?;
        Duration::from_millis(u64::try_from(at - now_ms).unwrap_or(0))
    };
    Some(wait.min(RETRY_AFTER_MAX))
}

#[cfg(test)]
mod tests {
    use super::super::model::{ModelEvent, Thinking};
    use super::super::target::local_chat;
    use super::*;
    use crate::util::clock::FakeClock;
    use std::io::{BufRead, BufReader, Write};
    use std::net::TcpListener;

    /// Records the announced retries.
    #[derive(Default)]
    struct Retries(Vec<(u32, Duration)>);

    impl StepSink for Retries {
        fn event(&mut self, _: ModelEvent) -> bool {
            true
        }
        fn retry(&mut self, attempt: u32, _: u32, wait: Duration) {
            self.0.push((attempt, wait));
        }
    }

    /// Answers one connection each with the raw HTTP `answers`, in order, then closes its
    /// port: a later connect is refused. Its base URL.
    fn serve(answers: Vec<&'static str>) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let base = format!("http://{}", listener.local_addr().unwrap());
        std::thread::spawn(move || {
            for a in answers {
                let (stream, _) = listener.accept().unwrap();
                let mut r = BufReader::new(stream.try_clone().unwrap());
                let mut len = 0;
                loop {
                    let mut h = String::new();
                    r.read_line(&mut h).unwrap();
                    if h.trim().is_empty() {
                        break;
                    }
                    if let Some(v) = h.to_ascii_lowercase().strip_prefix("content-length:") {
                        len = v.trim().parse().unwrap();
                    }
                }
                r.read_exact(&mut vec![0; len]).unwrap();
                (&stream).write_all(a.as_bytes()).unwrap();
            }
        });
        base
    }

    /// A step's request with no items and no tools.
    fn request() -> ModelRequest<'static> {
        ModelRequest {
            model: "tiny",
            provider: "local",
            instructions: "",
            items: &[],
            tools: &[],
            effort: None,
            thinking: Thinking::default(),
            max_output_tokens: 64,
        }
    }

    /// One step against `base` on a virtual clock: how it ended, the announced retries and
    /// the virtual milliseconds that passed.
    fn step_on_virtual_clock(base: &str) -> (Result<(), StepFailure>, Vec<(u32, Duration)>, u64) {
        let clock = Arc::new(FakeClock::default());
        let mut model = HttpModel::on(local_chat(&format!("{base}/v1")), clock.clone());
        let req = request();
        let mut sink = Retries::default();
        let r = model.step(&req, &Cancel::default(), &mut sink);
        (r, sink.0, clock.elapsed_ms())
    }

    const EMPTY_200: &str =
        "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: 0\r\n\r\n";
    const BUSY_503: &str = "HTTP/1.1 503 Busy\r\ncontent-length: 0\r\n\r\n";

    /// The retries announced match the backoff schedule: retry n waits 500 ms × 2^(n-1)
    /// within ±20%, and the virtual clock moved by exactly their sum.
    fn assert_backoff(retries: &[(u32, Duration)], elapsed_ms: u64) {
        let attempts: Vec<u32> = retries.iter().map(|r| r.0).collect();
        assert_eq!(attempts, [1, 2, 3, 4]);
        for (n, wait) in retries {
            let base = 500u128 << (n - 1);
            let ms = wait.as_millis();
            assert!(
                ms >= base * 8 / 10 && ms <= base * 12 / 10,
                "retry {n}: {ms} ms"
            );
        }
        let sum: u128 = retries.iter().map(|r| r.1.as_millis()).sum();
        assert_eq!(u128::from(elapsed_ms), sum);
        assert!((6_000..=9_000).contains(&elapsed_ms), "{elapsed_ms}");
    }

    /// Ends the request at its first retry, as a title request does (`agent::title`).
    struct EndOnRetry<'c>(&'c Cancel, u32);

    impl StepSink for EndOnRetry<'_> {
        fn event(&mut self, _: ModelEvent) -> bool {
            true
        }
        fn retry(&mut self, _: u32, _: u32, _: Duration) {
            self.1 += 1;
            self.0.cancel();
        }
    }

    #[test]
    fn a_sink_that_ends_on_retry_gets_one_attempt_and_no_wait_on_a_virtual_clock() {
        let clock = Arc::new(FakeClock::default());
        let base = serve(vec![BUSY_503, EMPTY_200]);
        let mut model = HttpModel::on(local_chat(&format!("{base}/v1")), clock.clone());
        let req = request();
        let cancel = Cancel::default();
        let mut sink = EndOnRetry(&cancel, 0);
        assert_eq!(
            model.step(&req, &cancel, &mut sink),
            Err(StepFailure::Cancelled)
        );
        assert_eq!(sink.1, 1, "one retry announced, none made");
        assert_eq!(clock.elapsed_ms(), 0, "its backoff was not waited");
    }

    #[test]
    fn a_refused_connect_is_retried_then_unreachable_on_a_virtual_clock() {
        // A port nothing listens on any more: every connect is refused at once.
        let port_closed = {
            let l = TcpListener::bind("127.0.0.1:0").unwrap();
            format!("http://{}", l.local_addr().unwrap())
        };
        let (r, retries, elapsed) = step_on_virtual_clock(&port_closed);
        assert_eq!(r, Err(StepFailure::Unreachable));
        assert_backoff(&retries, elapsed);
    }

    #[test]
    fn empty_200s_on_every_attempt_are_an_empty_reply_else_a_broken_stream() {
        let (r, retries, elapsed) = step_on_virtual_clock(&serve(vec![EMPTY_200; 5]));
        assert_eq!(r, Err(StepFailure::EmptyReply));
        assert_backoff(&retries, elapsed);
        // One attempt that was not an empty `200` makes the last one a broken stream.
        let mut answers = vec![BUSY_503];
        answers.extend([EMPTY_200; 4]);
        let (r, retries, elapsed) = step_on_virtual_clock(&serve(answers));
        assert_eq!(r, Err(StepFailure::StreamInvalid));
        assert_backoff(&retries, elapsed);
    }

    #[test]
    fn backoff_doubles_within_twenty_percent() {
        assert_eq!(backoff(0, 0.0), Duration::from_millis(500));
        assert_eq!(backoff(3, 0.0), Duration::from_millis(4_000));
        assert_eq!(backoff(1, 1.0), Duration::from_millis(1_200));
        assert_eq!(backoff(1, -1.0), Duration::from_millis(800));
        for _ in 0..100 {
            let j = jitter();
            assert!((-1.0..=1.0).contains(&j));
        }
    }

    #[test]
    fn retry_after_seconds_and_dates() {
        assert_eq!(retry_after("3", 0), Some(Duration::from_secs(3)));
        assert_eq!(retry_after("60", 0), Some(Duration::from_secs(60)));
        assert_eq!(
            retry_after("61", 0),
            Some(Duration::from_secs(60)),
            "capped"
        );
        let now = crate::util::time::parse_rfc3339("2026-12-01T08:00:00Z").unwrap();
        assert_eq!(
            retry_after("Tue, 01 Dec 2026 08:00:05 GMT", now),
            Some(Duration::from_secs(5))
        );
        assert_eq!(
            retry_after("Tue, 01 Dec 2026 07:59:00 GMT", now),
            Some(Duration::ZERO),
            "a date in the past means now"
        );
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn the_retry_schedule_on_a_virtual_clock() {
        // Without `retry-after`: 0.5 + 1 + 2 + 4 s between the five attempts.
        let mut at_ms = 0u128;
        let mut waits = Vec::new();
        for n in 0..MAX_RETRIES {
            let w = retry_wait(n, None, 0.0);
            at_ms += w.as_millis();
            waits.push(w.as_millis());
        }
        assert_eq!(waits, [500, 1_000, 2_000, 4_000]);
        assert_eq!(
            at_ms, 7_500,
            "the last attempt starts 7.5 s after the first"
        );
        // The jitter moves each wait by at most 20% either way.
        assert_eq!(retry_wait(3, None, 1.0), Duration::from_millis(4_800));
        assert_eq!(retry_wait(3, None, -1.0), Duration::from_millis(3_200));
        // A `retry-after` replaces the backoff, capped at 60 s (decisions.md 39), whether
        // seconds or a date measured from the virtual `now`.
        let now = crate::util::time::parse_rfc3339("2026-12-01T08:00:00Z").unwrap();
        let date = |secs: u32| format!("Tue, 01 Dec 2026 08:{:02}:{:02} GMT", secs / 60, secs % 60);
        for (value, want) in [
            ("0".to_owned(), 0),
            ("60".to_owned(), 60_000),
            ("61".to_owned(), 60_000),
            (date(59), 59_000),
            (date(60), 60_000),
            (date(61), 60_000),
        ] {
            let after = retry_after(&value, now);
            assert_eq!(
                retry_wait(0, after, 1.0),
                Duration::from_millis(want),
                "{value}"
            );
        }
    }
}
