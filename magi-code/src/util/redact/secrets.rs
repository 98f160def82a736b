//! The loaded key and token values redaction replaces (`decisions.md` 35 (a)), and the marker
//! that replaces them: shared by the streaming redactor and the whole-text checks.

use std::sync::RwLock;

/// What replaces a secret in projected text.
pub const REDACTED: &str = "[redacted]";

/// Shortest loaded value that is redacted: shorter ones would mangle ordinary words.
pub const SECRET_MIN_BYTES: usize = 8;

/// Longest piece a loaded value is registered as; a longer value is registered in pieces
/// (replaced piece by piece), so the stream holds back at most this much for it.
pub(super) const SECRET_PIECE_BYTES: usize = 4_096;

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
pub(super) fn loaded_secrets() -> Vec<String> {
    SECRETS
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// A value's registrable pieces: white-space-free runs of at least [`SECRET_MIN_BYTES`], cut
/// into pieces of at most [`SECRET_PIECE_BYTES`] (a short last piece joins the one before).
pub(super) fn secret_pieces(value: &str) -> Vec<String> {
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
