//! Stage 3 of the [`super::Redactor`]: tokens (runs without white space) judged whole, for
//! credential prefixes (b), the token after `Bearer`/`Basic` (c) and JWTs (d).

use crate::util::redact::secrets::REDACTED;

/// Longest token judged whole. A longer run without white space is no credential token: only
/// the `Bearer` rule (its whole rest is redacted) and JWTs of at most this size inside it
/// (besides loaded values and PEM blocks) apply to it.
pub const TOKEN_BYTES: usize = 16 * 1024;

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
pub(super) struct Tokens {
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
    pub(super) fn held(&self) -> usize {
        match self.mode {
            Mode::Held => self.buf.len(),
            _ => self.run.text.len(),
        }
    }

    pub(super) fn feed(&mut self, s: &str) -> String {
        let mut out = String::with_capacity(s.len() + REDACTED.len());
        for c in s.chars() {
            // `=` and `:` also end a token (outside the token after `Bearer`), so the value of
            // an assignment or header (`GITHUB_TOKEN=ghp_…`, `x-api-key:sk-…`) is judged whole.
            if c.is_whitespace() || (matches!(c, '=' | ':') && !self.armed) {
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

    pub(super) fn finish(&mut self) -> String {
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
