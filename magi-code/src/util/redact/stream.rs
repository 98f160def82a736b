//! The streaming redactor: sans-IO, fed text in any pieces, giving back what is safe to show
//! now and holding back a tail that could still become a secret.
//!
//! Three stages, each a character-level state machine, so the output never depends on where
//! the input was cut:
//! 1. control characters other than LF and TAB are dropped, and a private-key PEM block
//!    becomes [`REDACTED`] (e);
//! 2. loaded values become [`REDACTED`] (a), leftmost and longest first;
//! 3. tokens (runs without white space) are judged whole: credential prefixes (b), the token
//!    after `Bearer`/`Basic` (c) and JWTs (d).
//!
//! `[redacted]` already in the text is opaque to every stage, which makes the whole
//! idempotent: redacting redacted text changes nothing, so a stored reply projects as sent.

use super::{loaded_secrets, REDACTED};

/// Longest token judged whole (stage 3). A longer run without white space is no credential
/// token: only the `Bearer` rule (its whole rest is redacted) and JWTs of at most this size
/// inside it (besides loaded values and PEM blocks) apply to it.
pub const TOKEN_BYTES: usize = 16 * 1024;

/// The most a [`Redactor`] holds back: a token (stage 3), the start of a loaded value's
/// piece (stage 2) and a PEM header or end line (stage 1), about 20 KiB.
pub const HELD_BYTES: usize =
    TOKEN_BYTES + 4 + super::SECRET_PIECE_BYTES + super::SECRET_MIN_BYTES + 4 + HEADER_BYTES;

/// Longest PEM label (`RSA PRIVATE KEY`, `OPENSSH PRIVATE KEY`, ...).
const LABEL_BYTES: usize = 64;
/// Longest PEM header line: `-----BEGIN `, the label, `-----`.
const HEADER_BYTES: usize = 11 + LABEL_BYTES + 5;

/// Token prefixes of (b), each followed by at least 16 of `[A-Za-z0-9_-]`.
const PREFIXES: &[&str] = &[
    "sk-",
    "sk_",
    "rk_",
    "ghp_",
    "gho_",
    "ghs_",
    "ghu_",
    "github_pat_",
    "glpat-",
    "xoxa-",
    "xoxb-",
    "xoxp-",
    "xoxs-",
];

/// Whether stage 1 drops `c`: control characters other than LF and TAB never reach a
/// frontend.
pub(super) fn dropped(c: char) -> bool {
    c.is_control() && c != '\n' && c != '\t'
}

/// A streaming redactor: [`Self::feed`] returns what may be shown now, [`Self::finish`] the
/// rest. The concatenation of everything returned equals [`super::sanitize_text`] of the
/// concatenated input, however it was cut. It holds at most [`HELD_BYTES`].
#[derive(Debug)]
pub struct Redactor {
    pem: Pem,
    keys: Keys,
    tokens: Tokens,
}

impl Default for Redactor {
    fn default() -> Self {
        Self::new()
    }
}

impl Redactor {
    /// A redactor that knows the values registered so far ([`super::register_secret`]).
    #[must_use]
    pub fn new() -> Self {
        Self::with_secrets(loaded_secrets())
    }

    /// A redactor that knows exactly `secrets` as loaded values (each at least 8 bytes).
    #[must_use]
    pub fn with_secrets(mut secrets: Vec<String>) -> Self {
        secrets.retain(|s| s.len() >= super::SECRET_MIN_BYTES);
        secrets.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        secrets.dedup();
        let mut first = [false; 256];
        first[usize::from(b'[')] = true;
        for s in &secrets {
            first[usize::from(s.as_bytes()[0])] = true;
        }
        Self {
            pem: Pem::default(),
            keys: Keys {
                secrets,
                first,
                pending: String::new(),
            },
            tokens: Tokens::default(),
        }
    }

    /// Takes the next piece of text; returns what is decided and safe to show.
    #[must_use]
    pub fn feed(&mut self, s: &str) -> String {
        let a = self.pem.feed(s);
        let b = self.keys.feed(&a, false);
        self.tokens.feed(&b)
    }

    /// The end of the text: returns the held-back rest, judged. The redactor starts afresh.
    #[must_use]
    pub fn finish(&mut self) -> String {
        let a = self.pem.finish();
        let b = self.keys.feed(&a, true);
        let mut out = self.tokens.feed(&b);
        out.push_str(&self.tokens.finish());
        out
    }

    /// Bytes held back now.
    #[must_use]
    pub fn held(&self) -> usize {
        self.pem.held() + self.keys.pending.len() + self.tokens.held()
    }
}

// ---------------------------------------------------------------------------------------------
// Stage 1: control characters and PEM blocks (e).

/// How far a held tail is into a PEM header.
enum Header {
    /// Still a prefix of a header.
    Prefix,
    /// A whole header of a private key with this label.
    Complete(String),
    /// Not a header.
    No,
}

/// A label character: printable ASCII other than `-` (RFC 7468, single hyphens aside) and
/// the brackets of a marker, so a label never holds one and redaction stays idempotent.
fn label_char(c: char) -> bool {
    c.is_ascii() && !c.is_ascii_control() && !matches!(c, '-' | '[' | ']')
}

/// Where `h` (which starts with `-`) stands against `-----BEGIN <label>PRIVATE KEY-----`.
fn header(h: &str) -> Header {
    const HEAD: &str = "-----BEGIN ";
    if h.len() <= HEAD.len() {
        return if HEAD.starts_with(h) {
            Header::Prefix
        } else {
            Header::No
        };
    }
    if !h.starts_with(HEAD) {
        return Header::No;
    }
    let rest = &h[HEAD.len()..];
    let label_len = rest.find(|c: char| !label_char(c)).unwrap_or(rest.len());
    let label = &rest[..label_len];
    if label_len > LABEL_BYTES {
        return Header::No;
    }
    let tail = &rest[label_len..];
    if tail.is_empty() {
        return Header::Prefix;
    }
    if label.is_empty() || !label.ends_with("PRIVATE KEY") || !"-----".starts_with(tail) {
        return Header::No;
    }
    if tail.len() == 5 {
        Header::Complete(label.to_owned())
    } else {
        Header::Prefix
    }
}

#[derive(Debug, Default)]
struct Pem {
    /// A tail that may be the start of a header (it starts with `-`).
    hold: String,
    /// Inside a block: its end line and the last characters seen (to find it).
    block: Option<(String, String)>,
}

impl Pem {
    fn held(&self) -> usize {
        self.hold.len() + self.block.as_ref().map_or(0, |(_, t)| t.len())
    }

    fn feed(&mut self, s: &str) -> String {
        let mut out = String::with_capacity(s.len());
        for c in s.chars().filter(|c| !dropped(*c)) {
            if let Some((end, tail)) = &mut self.block {
                tail.push(c);
                if tail.ends_with(end.as_str()) {
                    self.block = None;
                } else if tail.len() > end.len() {
                    let cut = tail.len() - end.len();
                    let cut = (cut..=tail.len())
                        .find(|i| tail.is_char_boundary(*i))
                        .unwrap_or(tail.len());
                    tail.drain(..cut);
                }
                continue;
            }
            if self.hold.is_empty() && c != '-' {
                out.push(c);
                continue;
            }
            self.hold.push(c);
            self.settle(&mut out);
        }
        out
    }

    /// Judges the held tail: emits what can no longer start a header, opens a block on a
    /// whole header.
    fn settle(&mut self, out: &mut String) {
        loop {
            match header(&self.hold) {
                Header::Prefix => return,
                Header::Complete(label) => {
                    out.push_str(REDACTED);
                    self.hold.clear();
                    self.block = Some((format!("-----END {label}-----"), String::new()));
                    return;
                }
                Header::No => {
                    // The first character starts no header; a later `-` may.
                    let next = self.hold[1..].find('-').map_or(self.hold.len(), |i| i + 1);
                    out.push_str(&self.hold[..next]);
                    self.hold.drain(..next);
                    if self.hold.is_empty() {
                        return;
                    }
                }
            }
        }
    }

    /// The end of the text: a held header start is text; an open block stays redacted to
    /// the end.
    fn finish(&mut self) -> String {
        self.block = None;
        std::mem::take(&mut self.hold)
    }
}

// ---------------------------------------------------------------------------------------------
// Stage 2: loaded values (a).

#[derive(Debug)]
struct Keys {
    /// Longest first.
    secrets: Vec<String>,
    /// First bytes worth a look: the secrets' and `[` (a marker).
    first: [bool; 256],
    /// Text not yet decided: a possible start of a secret or marker.
    pending: String,
}

impl Keys {
    fn feed(&mut self, s: &str, last: bool) -> String {
        self.pending.push_str(s);
        let p = std::mem::take(&mut self.pending);
        let mut out = String::with_capacity(p.len());
        let mut i = 0;
        while i < p.len() {
            let rest = &p[i..];
            if !self.first[usize::from(rest.as_bytes()[0])] {
                let n = rest.chars().next().map_or(1, char::len_utf8);
                out.push_str(&rest[..n]);
                i += n;
                continue;
            }
            if rest.starts_with(REDACTED) {
                // Opaque: no value is found across a marker.
                out.push_str(REDACTED);
                i += REDACTED.len();
                continue;
            }
            let longer = |k: &str| k.len() > rest.len() && k.starts_with(rest);
            if !last && (longer(REDACTED) || self.secrets.iter().any(|k| longer(k))) {
                break;
            }
            if let Some(k) = self.secrets.iter().find(|k| rest.starts_with(k.as_str())) {
                out.push_str(REDACTED);
                i += k.len();
            } else {
                let n = rest.chars().next().map_or(1, char::len_utf8);
                out.push_str(&rest[..n]);
                i += n;
            }
        }
        self.pending = p[i..].to_owned();
        out
    }
}

// ---------------------------------------------------------------------------------------------
// Stage 3: tokens (b), (c), (d).

/// Surrounding punctuation stripped before a token is judged: ASCII punctuation except the
/// characters credentials are made of, and typographic quotes and brackets.
fn strip_char(c: char) -> bool {
    (c.is_ascii_punctuation() && !matches!(c, '_' | '-' | '+' | '/' | '=' | '~'))
        || matches!(c, '‘' | '’' | '“' | '”' | '«' | '»' | '‹' | '›')
}

/// `tok` as leading punctuation, core, trailing punctuation; a marker is never split.
fn split_punct(tok: &str) -> (&str, &str, &str) {
    let mut s = 0;
    while let Some(c) = tok[s..].chars().next() {
        if tok[s..].starts_with(REDACTED) || !strip_char(c) {
            break;
        }
        s += c.len_utf8();
    }
    let mut e = tok.len();
    while let Some(c) = tok[s..e].chars().next_back() {
        if tok[s..e].ends_with(REDACTED) || !strip_char(c) {
            break;
        }
        e -= c.len_utf8();
    }
    (&tok[..s], &tok[s..e], &tok[e..])
}

/// A character of `[A-Za-z0-9_-]`.
fn cred_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// Rule (b) on a token's core.
fn is_credential(core: &str) -> bool {
    let all = |rest: &str, f: fn(u8) -> bool| rest.bytes().all(f);
    for p in PREFIXES {
        if let Some(rest) = core.strip_prefix(p) {
            if rest.len() >= 16 && all(rest, cred_char) {
                return true;
            }
        }
    }
    for p in ["AKIA", "ASIA"] {
        if let Some(rest) = core.strip_prefix(p) {
            if rest.len() == 16 && all(rest, |b| b.is_ascii_uppercase() || b.is_ascii_digit()) {
                return true;
            }
        }
    }
    core.strip_prefix("AIza")
        .is_some_and(|rest| rest.len() == 35 && all(rest, cred_char))
}

/// A character of a JWT run: base64url and the dots joining its segments.
fn run_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.')
}

/// Rule (d) on a maximal run of [`run_char`]: three non-empty segments, the first starting
/// `eyJ`, dots at its ends aside.
fn judge_run(run: &str, out: &mut String) {
    let t = run.trim_matches('.');
    let mut parts = t.split('.');
    let jwt = t.starts_with("eyJ")
        && parts.clone().count() == 3
        && parts.all(|p| !p.is_empty())
        && run.len() <= TOKEN_BYTES;
    if jwt {
        let lead = run.len() - run.trim_start_matches('.').len();
        out.push_str(&run[..lead]);
        out.push_str(REDACTED);
        out.push_str(&run[lead + t.len()..]);
    } else {
        out.push_str(run);
    }
}

/// Rule (d) over a whole token.
fn redact_jwts(tok: &str, out: &mut String) {
    let mut i = 0;
    while i < tok.len() {
        let rest = &tok[i..];
        let n = rest.find(|c: char| !run_char(c)).unwrap_or(rest.len());
        if n > 0 {
            judge_run(&rest[..n], out);
            i += n;
        } else {
            let c = rest.chars().next().map_or(1, char::len_utf8);
            out.push_str(&rest[..c]);
            i += c;
        }
    }
}

/// A whole token judged: its redacted form and whether it arms rule (c) for the next one.
fn judge(tok: &str, armed: bool, out: &mut String) -> bool {
    let (lead, core, trail) = split_punct(tok);
    if armed {
        if core.is_empty() {
            // Punctuation alone is no credential; the next token still is one.
            out.push_str(tok);
            return true;
        }
        out.push_str(lead);
        out.push_str(REDACTED);
        out.push_str(trail);
        return false;
    }
    if is_credential(core) {
        out.push_str(lead);
        out.push_str(REDACTED);
        out.push_str(trail);
        return false;
    }
    redact_jwts(tok, out);
    arms(tok)
}

/// Whether some continuation of the token `buf` could make it a credential of rule (b): until
/// it cannot, the token is held whole.
fn may_be_credential(buf: &str) -> bool {
    fn upper(b: u8) -> bool {
        b.is_ascii_uppercase() || b.is_ascii_digit()
    }
    let rest = buf.trim_start_matches(strip_char);
    if rest.is_empty() {
        return true;
    }
    let rules = PREFIXES
        .iter()
        .map(|p| (*p, cred_char as fn(u8) -> bool, usize::MAX))
        .chain([
            ("AKIA", upper as fn(u8) -> bool, 16),
            ("ASIA", upper, 16),
            ("AIza", cred_char, 35),
        ]);
    for (p, class, max) in rules {
        if rest.len() < p.len() {
            if p.starts_with(rest) {
                return true;
            }
            continue;
        }
        if let Some(y) = rest.strip_prefix(p) {
            let n = y.bytes().take_while(|b| class(*b)).count();
            if n <= max && y[n..].chars().all(strip_char) {
                return true;
            }
        }
    }
    false
}

/// Whether a whole token arms rule (c) for the next one.
fn arms(tok: &str) -> bool {
    let core = split_punct(tok).1;
    core.eq_ignore_ascii_case("bearer") || core.eq_ignore_ascii_case("basic")
}

/// How the current token is taken.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Held whole: it follows `Bearer`, or it may still become a credential.
    #[default]
    Held,
    /// Shown as it comes, JWT runs aside; `long` once it passed [`TOKEN_BYTES`] (it then
    /// arms nothing).
    Streaming { long: bool },
    /// The rest of a token over [`TOKEN_BYTES`] after `Bearer`: redacted.
    Swallow,
}

/// The current run of [`run_char`] of a streaming token, held while it may be a JWT.
#[derive(Debug, Default)]
struct Run {
    text: String,
    in_run: bool,
    candidate: bool,
    /// Leading dots of `text` (counted, so a long run of dots costs no rescans).
    dots: usize,
}

impl Run {
    fn push(&mut self, c: char, out: &mut String) {
        if !run_char(c) {
            self.end(out);
            out.push(c);
            return;
        }
        if !self.in_run {
            self.in_run = true;
            self.candidate = true;
            self.dots = 0;
        }
        if !self.candidate {
            out.push(c);
            return;
        }
        if c == '.' && self.dots == self.text.len() {
            self.dots += 1;
        }
        self.text.push(c);
        // Once past `eyJ` a run stays a candidate until it ends: only its start is checked.
        let t = &self.text[self.dots..];
        let may_be = t.len() > 3 || "eyJ".starts_with(t) || t.starts_with("eyJ");
        if !may_be || self.text.len() > TOKEN_BYTES {
            out.push_str(&self.text);
            self.text.clear();
            self.candidate = false;
        }
    }

    fn end(&mut self, out: &mut String) {
        if self.in_run && self.candidate {
            judge_run(&self.text, out);
        }
        self.text.clear();
        self.in_run = false;
        self.candidate = false;
    }
}

#[derive(Debug, Default)]
struct Tokens {
    /// The current token, at most [`TOKEN_BYTES`] (for judging it, or whether it arms).
    buf: String,
    armed: bool,
    mode: Mode,
    run: Run,
    /// The held token's length at which [`may_be_credential`] is asked next: every byte up
    /// to 64, then every KiB, so a long held token costs no quadratic rescans. When it is
    /// asked changes only when text is shown, never what.
    next_check: usize,
}

impl Tokens {
    fn held(&self) -> usize {
        match self.mode {
            Mode::Held => self.buf.len(),
            _ => self.run.text.len(),
        }
    }

    fn feed(&mut self, s: &str) -> String {
        let mut out = String::with_capacity(s.len() + REDACTED.len());
        for c in s.chars() {
            if c.is_whitespace() {
                self.end_token(&mut out);
                out.push(c);
                continue;
            }
            match self.mode {
                Mode::Held => {
                    self.buf.push(c);
                    if self.buf.len() > TOKEN_BYTES {
                        self.go_long(&mut out);
                    } else if !self.armed && self.buf.len() >= self.next_check {
                        if may_be_credential(&self.buf) {
                            self.next_check = if self.buf.len() < 64 {
                                self.buf.len() + 1
                            } else {
                                self.buf.len() + 1024
                            };
                        } else {
                            self.mode = Mode::Streaming { long: false };
                            for c in self.buf.chars() {
                                self.run.push(c, &mut out);
                            }
                        }
                    }
                }
                Mode::Streaming { long } => {
                    if !long {
                        self.buf.push(c);
                        if self.buf.len() > TOKEN_BYTES {
                            self.buf.clear();
                            self.mode = Mode::Streaming { long: true };
                        }
                    }
                    self.run.push(c, &mut out);
                }
                Mode::Swallow => {}
            }
        }
        out
    }

    fn finish(&mut self) -> String {
        let mut out = String::new();
        self.end_token(&mut out);
        self.armed = false;
        out
    }

    fn end_token(&mut self, out: &mut String) {
        match std::mem::take(&mut self.mode) {
            Mode::Held => {
                if !self.buf.is_empty() {
                    self.armed = judge(&self.buf, self.armed, out);
                }
            }
            Mode::Streaming { long } => {
                self.run.end(out);
                self.armed = !long && arms(&self.buf);
            }
            Mode::Swallow => self.armed = false,
        }
        self.buf.clear();
        self.next_check = 0;
    }

    /// A held token passed [`TOKEN_BYTES`]: no credential token; after `Bearer` its rest is
    /// redacted, else it streams.
    fn go_long(&mut self, out: &mut String) {
        let buf = std::mem::take(&mut self.buf);
        if self.armed {
            out.push_str(split_punct(&buf).0);
            out.push_str(REDACTED);
            self.mode = Mode::Swallow;
            return;
        }
        self.mode = Mode::Streaming { long: true };
        for c in buf.chars() {
            self.run.push(c, out);
        }
    }
}
