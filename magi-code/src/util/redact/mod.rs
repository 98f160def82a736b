//! Redaction (`decisions.md` 35): what `[redacted]` replaces in projected text, summaries,
//! titles, live deltas and reconciliation, and deciding whether a name is safe to show.
//!
//! Exactly these are replaced: (a) a key or token value the backend loaded (8 bytes or longer,
//! [`register_secret`]); (b) a whole token (a run without white space, surrounding punctuation
//! stripped) made of a credential prefix and at least 16 more of `[A-Za-z0-9_-]` (`AKIA`/`ASIA`
//! and exactly 16 of `[A-Z0-9]`, `AIza` and exactly 35); (c) the token after `Bearer` or
//! `Basic`, any case; (d) a JWT; (e) a private-key PEM block. [`Redactor`] does it on a stream,
//! [`sanitize_text`] on a whole text, with the same result.

mod secrets;
mod stream;
#[cfg(test)]
mod tests;

pub use secrets::{register_secret, REDACTED, SECRET_MIN_BYTES};
pub use stream::{Redactor, HELD_BYTES};

/// Longest provider/model name returned on the wire.
pub const NAME_BYTES: usize = protocol_core::limits::NAME_BYTES;

/// Sanitizes text for display: exactly what `decisions.md` 35 lists becomes [`REDACTED`], and
/// control characters other than LF and TAB are dropped. Equal to feeding the text to a
/// [`Redactor`] in any pieces, and idempotent.
#[must_use]
pub fn sanitize_text(s: &str) -> String {
    if plain(s) {
        return s.to_owned();
    }
    redact_whole(s)
}

/// Substrings without which no rule of (b)–(e) can match: each prefix, `eyJ` and the PEM
/// header's start (case-sensitive); `bearer`/`basic` are looked for in any case.
const TRIGGERS: &[&str] = &[
    "sk-",
    "sk_",
    "rk_",
    "gh",
    "glpat-",
    "xox",
    "AKIA",
    "ASIA",
    "AIza",
    "eyJ",
    "-----BEGIN",
];

/// Whether no rule can change `s`: no dropped character, no trigger, no loaded value. Most
/// projected text is plain, and this scan is far cheaper than the [`Redactor`]'s per-word
/// judging (`tests::the_fast_path_never_skips_a_change` holds it to the same result).
fn plain(s: &str) -> bool {
    if s.chars().any(stream::dropped) || TRIGGERS.iter().any(|t| s.contains(t)) {
        return false;
    }
    let lower = s.to_ascii_lowercase();
    if lower.contains("bearer") || lower.contains("basic") {
        return false;
    }
    !secrets::loaded_secrets()
        .iter()
        .any(|v| s.contains(v.as_str()))
}

/// [`sanitize_text`] without its fast path: the whole text through one [`Redactor`].
fn redact_whole(s: &str) -> String {
    let mut r = Redactor::new();
    let mut out = r.feed(s);
    out.push_str(&r.finish());
    out
}

/// `s` with every loaded key or token value (`decisions.md` 35 (a)) replaced by
/// [`REDACTED`]: what a tool output becomes before it is stored or sent to a model
/// (`backend.md` "Tools and approvals"). Only loaded values: a credential-shaped word in a
/// file the model reads is its material, not the backend's secret.
#[must_use]
pub fn redact_loaded(s: String) -> String {
    let mut loaded = secrets::loaded_secrets();
    // Longest first, so a value that extends another is replaced whole.
    loaded.sort_by_key(|v| std::cmp::Reverse(v.len()));
    let mut out = s;
    for v in &loaded {
        if out.contains(v.as_str()) {
            out = out.replace(v.as_str(), REDACTED);
        }
    }
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
