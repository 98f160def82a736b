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

use super::secrets::{loaded_secrets, REDACTED, SECRET_MIN_BYTES, SECRET_PIECE_BYTES};
pub(super) use pem::dropped;
use pem::Pem;
use tokens::Tokens;
pub use tokens::TOKEN_BYTES;

mod pem;
mod tokens;

/// The most a [`Redactor`] holds back: a token (stage 3), the start of a loaded value's
/// piece (stage 2) and a PEM header or end line (stage 1), about 20 KiB.
pub const HELD_BYTES: usize =
    TOKEN_BYTES + 4 + SECRET_PIECE_BYTES + SECRET_MIN_BYTES + 4 + pem::HEADER_BYTES;

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
        secrets.retain(|s| s.len() >= SECRET_MIN_BYTES);
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
