//! Identifier grammars and the request-ID ledger.

use crate::limits::{ID_BYTES, REQUEST_IDS, SESSION_ID_BYTES};
use serde::{Deserialize, Serialize};
use std::collections::HashSet;

/// Whether `s` is 1–64 ASCII bytes of `[A-Za-z0-9._-]` (request IDs, methods, capabilities,
/// revisions, cursors, run and approval IDs).
#[must_use]
pub fn is_id_grammar(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= ID_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// Whether `s` is a session ID: 1–64 ASCII bytes of `[A-Za-z0-9_-]`.
#[must_use]
pub fn is_session_id(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= SESSION_ID_BYTES
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-'))
}

/// A request ID that passed the grammar.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct RequestId(String);

impl RequestId {
    /// Checks the grammar.
    #[must_use]
    pub fn new(s: &str) -> Option<Self> {
        is_id_grammar(s).then(|| Self(s.to_owned()))
    }

    /// The ID text.
    #[must_use]
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for RequestId {
    type Error = &'static str;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        if is_id_grammar(&s) {
            Ok(Self(s))
        } else {
            Err("request id grammar")
        }
    }
}

impl From<RequestId> for String {
    fn from(id: RequestId) -> Self {
        id.0
    }
}

/// What the ledger says about a request's ID.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Admit {
    /// Never seen: now retained.
    New,
    /// Seen before in this child: never execute again.
    Duplicate,
    /// New, but 4,096 IDs are already retained: answer `request_limit` and close.
    LimitReached,
}

/// Every request ID this child has seen, bounded at 4,096.
#[derive(Debug, Default)]
pub struct IdLedger {
    seen: HashSet<String>,
}

impl IdLedger {
    /// An empty ledger.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Checks and, when new and within the bound, retains `id`.
    pub fn admit(&mut self, id: &RequestId) -> Admit {
        if self.seen.contains(id.as_str()) {
            Admit::Duplicate
        } else if self.seen.len() >= REQUEST_IDS {
            Admit::LimitReached
        } else {
            self.seen.insert(id.0.clone());
            Admit::New
        }
    }

    /// Retains `id` if it is new and the bound allows (for requests rejected before the
    /// ledger step whose ID was still echoed).
    pub fn record(&mut self, id: &RequestId) {
        if self.seen.len() < REQUEST_IDS && !self.seen.contains(id.as_str()) {
            self.seen.insert(id.0.clone());
        }
    }

    /// Number of retained IDs.
    #[must_use]
    pub fn len(&self) -> usize {
        self.seen.len()
    }

    /// Whether no ID is retained.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grammar_edges() {
        assert!(is_id_grammar(&"a".repeat(64)));
        assert!(!is_id_grammar(&"a".repeat(65)));
        assert!(!is_id_grammar(""));
        assert!(is_id_grammar("A.z_0-9"));
        assert!(!is_id_grammar("a b"));
        assert!(!is_id_grammar("é"));
        assert!(is_session_id(&"a".repeat(64)));
        assert!(!is_session_id(&"a".repeat(65)));
        assert!(!is_session_id("a.b"));
    }

    #[test]
    fn ledger_bound() {
        let mut l = IdLedger::new();
        for i in 0..REQUEST_IDS {
            assert_eq!(
                l.admit(&RequestId::new(&format!("r{i}")).unwrap()),
                Admit::New
            );
        }
        assert_eq!(l.admit(&RequestId::new("r0").unwrap()), Admit::Duplicate);
        assert_eq!(
            l.admit(&RequestId::new("new").unwrap()),
            Admit::LimitReached
        );
        assert_eq!(l.len(), REQUEST_IDS);
    }
}
