//! Paging of immutable snapshots (history, session list, catalog): one page fits 32,768
//! serialized result bytes and its entry limit; cursors are `<index>.<revision>`.

use serde_json::Value;

/// Largest serialized page result (`history_page_bytes`, `discovery_page_bytes`,
/// `catalog_page_bytes`).
pub const PAGE_BYTES: usize = 32_768;

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

/// The end of the page starting at `start`: as many serialized entries as fit `PAGE_BYTES`
/// (with `base` bytes of result around them) and `limit`.
#[must_use]
pub fn end(entries: &[String], start: usize, limit: usize, base: usize) -> usize {
    let mut size = base;
    let mut end = start;
    while end < entries.len() && end - start < limit {
        let add = entries[end].len() + usize::from(end > start);
        if size + add > PAGE_BYTES {
            break;
        }
        size += add;
        end += 1;
    }
    end
}

/// The entries of one page, parsed back for the result.
#[must_use]
pub fn values(entries: &[String]) -> Vec<Value> {
    entries
        .iter()
        .filter_map(|e| serde_json::from_str(e).ok())
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
        assert_eq!(end(&entries, 0, 100, 100), 3);
        assert_eq!(end(&entries, 0, 2, 100), 2);
        assert_eq!(end(&entries, 9, 100, 100), 10);
    }
}
