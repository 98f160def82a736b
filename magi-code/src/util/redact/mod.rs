//! Redaction (`decisions.md` 35): what `[redacted]` replaces in projected text, summaries,
//! titles, live deltas and reconciliation, and deciding whether a name is safe to show.
//!
//! Exactly these are replaced: (a) a key or token value the backend loaded (8 bytes or longer,
//! [`register_secret`]); (b) a whole token (a run without white space, surrounding punctuation
//! stripped) made of a credential prefix and at least 16 more of `[A-Za-z0-9_-]` (`AKIA`/`ASIA`
//! and exactly 16 of `[A-Z0-9]`, `AIza` and exactly 35); (c) the token after `Bearer` or
//! `Basic`, any case; (d) a JWT; (e) a private-key PEM block. [`Redactor`] does it on a stream,
//! [`sanitize_text`] on a whole text, with the same result.

mod stream;
#[cfg(test)]
mod tests;

pub use stream::{Redactor, HELD_BYTES};

use std::sync::RwLock;

/// Longest provider/model name returned on the wire.
pub const NAME_BYTES: usize = protocol_core::limits::NAME_BYTES;

/// What replaces a secret in projected text.
pub const REDACTED: &str = "[redacted]";

/// Shortest loaded value that is redacted: shorter ones would mangle ordinary words.
pub const SECRET_MIN_BYTES: usize = 8;

/// Longest piece a loaded value is registered as; a longer value is registered in pieces
/// (replaced piece by piece), so the stream holds back at most this much for it.
const SECRET_PIECE_BYTES: usize = 4_096;

/// Most pieces registered: a bound on the work per character, far above the few keys a
/// backend loads.
const SECRETS_MAX: usize = 256;

/// The key and token values this process loaded (`decisions.md` 35 (a)).
static SECRETS: RwLock<Vec<String>> = RwLock::new(Vec::new());

/// Makes a loaded key or token value known to every later redaction in this process. Each
/// white-space-free piece of 8 bytes or more is registered (pieces of at most 4 KiB); shorter
/// pieces are not (they would mangle words).
pub fn register_secret(value: &str) {
    let pieces = secret_pieces(value);
    if pieces.is_empty() {
        return;
    }
    let mut all = SECRETS
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for p in pieces {
        if all.len() < SECRETS_MAX && !all.contains(&p) {
            all.push(p);
        }
    }
}

/// The registered values.
fn loaded_secrets() -> Vec<String> {
    SECRETS
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// A value's registrable pieces: white-space-free runs of at least [`SECRET_MIN_BYTES`], cut
/// into pieces of at most [`SECRET_PIECE_BYTES`] (a short last piece joins the one before).
fn secret_pieces(value: &str) -> Vec<String> {
    let mut out = Vec::new();
    for run in value.split(char::is_whitespace) {
        if run.len() < SECRET_MIN_BYTES || run.contains(REDACTED) {
            continue;
        }
        let mut start = 0;
        while start < run.len() {
            let mut end = (start + SECRET_PIECE_BYTES).min(run.len());
            if run.len() - end < SECRET_MIN_BYTES {
                end = run.len();
            }
            while !run.is_char_boundary(end) {
                end += 1;
            }
            out.push(run[start..end].to_owned());
            start = end;
        }
    }
    out
}

/// Sanitizes text for display: exactly what `decisions.md` 35 lists becomes [`REDACTED`], and
/// control characters other than LF and TAB are dropped. Equal to feeding the text to a
/// [`Redactor`] in any pieces, and idempotent.
#[must_use]
pub fn sanitize_text(s: &str) -> String {
    let mut r = Redactor::new();
    let mut out = r.feed(s);
    out.push_str(&r.finish());
    out
}

/// Whether redaction would replace part of `s` (control characters aside).
#[must_use]
pub fn is_secret_like(s: &str) -> bool {
    let visible: String = s.chars().filter(|c| !stream::dropped(*c)).collect();
    sanitize_text(&visible) != visible
}

/// The name itself if it may be shown, else `None`: over 256 bytes, empty, control-bearing, or
/// shaped like a credential by the same rule as text (redaction would change it).
#[must_use]
pub fn safe_name(s: &str) -> Option<String> {
    let ok = !s.is_empty()
        && s.len() <= NAME_BYTES
        && !s.chars().any(char::is_control)
        && !is_secret_like(s);
    ok.then(|| s.to_owned())
}
