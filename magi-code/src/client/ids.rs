//! Request IDs: allocated by the client, never reused within a child (protocol "Request IDs
//! … must never be reused within a child, even after response"), at most `request_ids` of
//! them, after which the backend would close the child.

use super::error::ClientError;
use protocol_core::limits;
use std::collections::HashSet;

/// The IDs of one child: fresh ones from a counter, chosen ones checked, none twice.
#[derive(Debug)]
pub struct Ids {
    used: HashSet<String>,
    next: u64,
    limit: usize,
}

impl Default for Ids {
    fn default() -> Self {
        Self::with_limit(limits::REQUEST_IDS)
    }
}

/// Whether `id` is 1–64 bytes of `[A-Za-z0-9._-]` (the protocol's ID grammar).
#[must_use]
pub fn valid(id: &str) -> bool {
    (1..=limits::ID_BYTES).contains(&id.len())
        && id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

impl Ids {
    /// At most `limit` IDs (the backend's `request_ids`; the default is the protocol's).
    #[must_use]
    pub fn with_limit(limit: usize) -> Self {
        Self {
            used: HashSet::new(),
            next: 0,
            limit,
        }
    }

    /// A fresh ID, never handed out or claimed before in this child.
    pub fn fresh(&mut self) -> Result<String, ClientError> {
        loop {
            self.next += 1;
            let id = format!("c{}", self.next);
            if !self.used.contains(&id) {
                self.claim(&id)?;
                return Ok(id);
            }
        }
    }

    /// Claims an ID of the caller's choosing: refused when used before, outside the grammar,
    /// or past the limit.
    pub fn claim(&mut self, id: &str) -> Result<(), ClientError> {
        if !valid(id) {
            return Err(ClientError::IdInvalid);
        }
        if self.used.contains(id) {
            return Err(ClientError::IdReused);
        }
        if self.used.len() >= self.limit {
            return Err(ClientError::IdsExhausted);
        }
        self.used.insert(id.to_owned());
        Ok(())
    }

    /// How many IDs this child has had.
    #[must_use]
    pub fn used(&self) -> usize {
        self.used.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_ids_never_repeat_and_skip_claimed_ones() {
        let mut ids = Ids::default();
        ids.claim("c2").unwrap();
        let a = ids.fresh().unwrap();
        let b = ids.fresh().unwrap();
        assert_eq!((a.as_str(), b.as_str()), ("c1", "c3"), "c2 was taken");
        assert_eq!(ids.claim("c1"), Err(ClientError::IdReused));
        assert_eq!(ids.claim("c3"), Err(ClientError::IdReused));
        assert_eq!(ids.claim("init"), Ok(()));
        assert_eq!(
            ids.claim("init"),
            Err(ClientError::IdReused),
            "even after use"
        );
    }

    #[test]
    fn ids_follow_the_grammar_at_its_edges() {
        let mut ids = Ids::default();
        assert_eq!(ids.claim(&"a".repeat(limits::ID_BYTES)), Ok(()));
        assert_eq!(
            ids.claim(&"b".repeat(limits::ID_BYTES + 1)),
            Err(ClientError::IdInvalid)
        );
        assert_eq!(ids.claim(""), Err(ClientError::IdInvalid));
        assert_eq!(ids.claim("a b"), Err(ClientError::IdInvalid));
        assert_eq!(ids.claim("A.z_0-9"), Ok(()));
    }

    #[test]
    fn the_request_ids_bound_holds_at_its_edge() {
        let mut ids = Ids::default();
        for _ in 0..limits::REQUEST_IDS {
            ids.fresh().unwrap();
        }
        assert_eq!(ids.used(), limits::REQUEST_IDS, "the 4,096th is accepted");
        assert_eq!(
            ids.fresh(),
            Err(ClientError::IdsExhausted),
            "the 4,097th is not"
        );
        assert_eq!(ids.claim("other"), Err(ClientError::IdsExhausted));
    }
}
