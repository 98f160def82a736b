//! Paging of immutable snapshots (history, session list, catalog): one page fits its result
//! byte bound and its entry limit; cursors are `<index>.<revision>`.

use serde_json::Value;

/// Serialized size of a result without entries, counting the widest possible cursor.
#[must_use]
pub fn base_bytes(mut result_without_entries: Value) -> usize {
    if let Some(o) = result_without_entries.as_object_mut() {
        o.insert(
            "next_cursor".into(),
            Value::String("x".repeat(protocol_core::limits::ID_BYTES)),
        );
    }
    result_without_entries.to_string().len()
}

/// The end of the page starting at `start`: as many serialized entries as fit `max_bytes`
/// (with `base` bytes of result around them) and `limit`.
#[must_use]
pub fn end<S: AsRef<str>>(
    entries: &[S],
    start: usize,
    limit: usize,
    base: usize,
    max_bytes: usize,
) -> usize {
    let mut size = base;
    let mut end = start;
    while end < entries.len() && end - start < limit {
        let add = entries[end].as_ref().len() + usize::from(end > start);
        if size + add > max_bytes {
            break;
        }
        size += add;
        end += 1;
    }
    end
}

/// The entries of one page, parsed back for the result.
#[must_use]
pub fn values<S: AsRef<str>>(entries: &[S]) -> Vec<Value> {
    entries
        .iter()
        .filter_map(|e| serde_json::from_str(e.as_ref()).ok())
        .collect()
}

/// The cursor of the page starting at `index`, or `None` when `index` ends the snapshot.
#[must_use]
pub fn cursor(index: usize, len: usize, revision: &str) -> Option<String> {
    (index < len).then(|| format!("{index}.{revision}"))
}

/// The start index a cursor names in a snapshot of `len` entries at `revision`, if it is one
/// this snapshot issued.
#[must_use]
pub fn parse_cursor(cursor: &str, revision: &str, len: usize) -> Option<usize> {
    let (idx, rev) = cursor.split_once('.')?;
    let idx: usize = idx.parse().ok()?;
    (rev == revision && idx > 0 && idx < len).then_some(idx)
}

/// One immutable paged snapshot (`session.list`, `model.catalog`): serialized entries, the
/// notices of the result, the fingerprint a continuation must match, and sticky staleness.
#[derive(Debug, Clone)]
pub struct Snapshot {
    /// Opaque revision.
    pub revision: String,
    /// Serialized entries, in order.
    pub entries: Vec<String>,
    /// Wire notice codes of every page.
    pub notices: Vec<&'static str>,
    /// What the scan saw; a continuation rescans and must see the same.
    pub fingerprint: [u8; 32],
    /// Sticky invalidation: once stale, every continuation is refused.
    pub stale: bool,
}

impl Snapshot {
    /// A fresh snapshot with a new revision.
    #[must_use]
    pub fn new(entries: Vec<String>, notices: Vec<&'static str>, fingerprint: [u8; 32]) -> Self {
        Self {
            revision: super::ids::fresh_revision(),
            entries,
            notices,
            fingerprint,
            stale: false,
        }
    }

    /// The valid snapshot a continuation names, if `slot` holds it: `(index, fingerprint)`.
    #[must_use]
    pub fn continuation(
        slot: &Option<Self>,
        revision: &str,
        cursor: &str,
    ) -> Option<(usize, [u8; 32])> {
        let s = slot
            .as_ref()
            .filter(|s| !s.stale && s.revision == revision)?;
        Some((
            parse_cursor(cursor, revision, s.entries.len())?,
            s.fingerprint,
        ))
    }

    /// The page starting at `start`, at most `limit` entries and `max_bytes` serialized:
    /// `envelope` is the result without entries (the caller's `wire` result type, serialized),
    /// and this fills in `entries_key`, `complete` and `next_cursor`.
    #[must_use]
    pub fn page(
        &self,
        start: usize,
        limit: u64,
        max_bytes: usize,
        entries_key: &str,
        envelope: Value,
    ) -> Value {
        let limit = usize::try_from(limit).unwrap_or(usize::MAX);
        let mut result = envelope;
        if let Some(o) = result.as_object_mut() {
            o.insert(entries_key.into(), Value::Array(Vec::new()));
        }
        let end = end(
            &self.entries,
            start,
            limit,
            base_bytes(result.clone()),
            max_bytes,
        );
        let next = cursor(end, self.entries.len(), &self.revision);
        if let Some(o) = result.as_object_mut() {
            o.insert(
                entries_key.into(),
                Value::Array(values(&self.entries[start..end])),
            );
            o.insert("complete".into(), Value::Bool(next.is_none()));
            o.insert(
                "next_cursor".into(),
                next.map_or(Value::Null, Value::String),
            );
        }
        result
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cursors_round_trip_only_within_their_snapshot() {
        let c = cursor(3, 10, "rev").unwrap();
        assert_eq!(parse_cursor(&c, "rev", 10), Some(3));
        assert_eq!(parse_cursor(&c, "other", 10), None);
        assert_eq!(parse_cursor(&c, "rev", 3), None);
        assert_eq!(parse_cursor("0.rev", "rev", 10), None);
        assert_eq!(cursor(10, 10, "rev"), None);
    }

    #[test]
    fn pages_fit_bytes_and_limit() {
        let entries: Vec<String> = (0..10).map(|_| "x".repeat(10_000)).collect();
        assert_eq!(end(&entries, 0, 100, 100, 32_768), 3);
        assert_eq!(end(&entries, 0, 2, 100, 32_768), 2);
        assert_eq!(end(&entries, 9, 100, 100, 32_768), 10);
        // The byte bound at its edge: base + entry fits exactly; one byte less does not.
        assert_eq!(end(&entries, 0, 100, 100, 10_099), 0);
        assert_eq!(end(&entries, 0, 100, 100, 10_100), 1);
        // A second entry costs its bytes and a comma.
        assert_eq!(end(&entries, 0, 100, 100, 20_100), 1);
        assert_eq!(end(&entries, 0, 100, 100, 20_101), 2);
    }
}
