//! What the natives of one cell share with the engine loop: the output so far, the calls the
//! code issued, and the helper's `store`.

use super::protocol::{INPUT_BYTES, OUTPUT_BYTES, STORE_BYTES};
use crate::util::text::cut;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};

/// `store`/`load` values of one helper (so of one attachment): JSON texts by key.
#[derive(Debug, Default)]
pub struct Store {
    values: BTreeMap<String, String>,
    bytes: usize,
}

impl Store {
    /// Sets (or with `None` removes) `key`; false, changing nothing, when the store would pass
    /// [`STORE_BYTES`] of keys and values.
    pub fn put(&mut self, key: String, json: Option<String>) -> bool {
        let old = self.values.get(&key).map_or(0, |v| key.len() + v.len());
        let new = json.as_ref().map_or(0, |v| key.len() + v.len());
        let bytes = self.bytes - old + new;
        if bytes > STORE_BYTES {
            return false;
        }
        self.bytes = bytes;
        match json {
            Some(v) => self.values.insert(key, v),
            None => self.values.remove(&key),
        };
        true
    }

    /// The JSON text under `key`.
    #[must_use]
    pub fn get(&self, key: &str) -> Option<String> {
        self.values.get(key).cloned()
    }
}

/// Console and `text()` lines, bounded by [`OUTPUT_BYTES`].
#[derive(Debug, Default)]
pub struct Output {
    lines: Vec<String>,
    bytes: usize,
    dropped: usize,
}

impl Output {
    /// Adds one output call's text (its own LFs kept).
    pub fn push(&mut self, mut text: String) {
        let room = OUTPUT_BYTES.saturating_sub(self.bytes);
        if self.dropped > 0 || text.len() > room {
            let keep = if self.dropped > 0 {
                0
            } else {
                cut(&text, room).len()
            };
            self.dropped += text.len() - keep;
            text.truncate(keep);
            if text.is_empty() {
                return;
            }
        }
        self.bytes += text.len() + 1;
        self.lines.push(text);
    }

    /// The lines joined by LF, with a last line saying what was cut.
    #[must_use]
    pub fn text(&self) -> String {
        let mut s = self.lines.join("\n");
        if self.dropped > 0 {
            if !s.is_empty() {
                s.push('\n');
            }
            s.push_str(&format!(
                "[output cut: {} more bytes not kept]",
                self.dropped
            ));
        }
        s
    }
}

/// A nested call the code issued, waiting to be written to the backend.
#[derive(Debug)]
pub struct Issued {
    /// Its number.
    pub call: u64,
    /// The tool.
    pub name: String,
    /// The input as the code passed it.
    pub input: Value,
}

/// Why a call was refused before it was sent (the codes the prelude turns into `ToolError`).
pub const REFUSED_LIMIT: i64 = -1;
/// The input's JSON passed [`INPUT_BYTES`].
pub const REFUSED_TOO_LARGE: i64 = -2;
/// The input nests deeper than [`INPUT_DEPTH`] (or is not JSON serde reads).
pub const REFUSED_TOO_DEEP: i64 = -3;
/// Deepest input nesting sent: well inside serde_json's 128 levels, which the `call` line
/// around it must also fit.
pub const INPUT_DEPTH: usize = 64;

/// One cell's shared state.
#[derive(Debug)]
pub struct Shared {
    /// Console and `text()` output.
    pub out: Output,
    /// Calls issued, refused ones included.
    pub calls: u32,
    max_calls: u32,
    next_call: u64,
    /// Calls to write to the backend.
    pub queued: Vec<Issued>,
    /// Calls written and not answered.
    pub outstanding: BTreeSet<u64>,
    /// The helper's store, lent to the cell.
    pub store: Store,
}

impl Shared {
    /// The state of a cell allowing `max_calls`, numbering calls from `next_call`.
    #[must_use]
    pub fn new(max_calls: u32, next_call: u64, store: Store) -> Self {
        Self {
            out: Output::default(),
            calls: 0,
            max_calls,
            next_call,
            queued: Vec::new(),
            outstanding: BTreeSet::new(),
            store,
        }
    }

    /// The next call number (for the helper's next cell).
    #[must_use]
    pub fn next_call(&self) -> u64 {
        self.next_call
    }

    /// Counts a call refused before any check here (unknown tool, input not JSON).
    pub fn refused(&mut self) {
        self.calls = self.calls.saturating_add(1);
    }

    /// Issues a call: its number, or [`REFUSED_LIMIT`] / [`REFUSED_TOO_LARGE`].
    pub fn issue(&mut self, name: String, json: &str) -> i64 {
        self.calls = self.calls.saturating_add(1);
        if self.calls > self.max_calls {
            return REFUSED_LIMIT;
        }
        if json.len() > INPUT_BYTES {
            return REFUSED_TOO_LARGE;
        }
        let input = match serde_json::from_str::<Value>(json) {
            Ok(v) if depth(&v) <= INPUT_DEPTH => v,
            _ => return REFUSED_TOO_DEEP,
        };
        let call = self.next_call;
        self.next_call += 1;
        self.queued.push(Issued { call, name, input });
        i64::try_from(call).unwrap_or(i64::MAX)
    }
}

/// How deep `v` nests (a scalar is 0).
fn depth(v: &Value) -> usize {
    match v {
        Value::Array(a) => 1 + a.iter().map(depth).max().unwrap_or(0),
        Value::Object(o) => 1 + o.values().map(depth).max().unwrap_or(0),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_refuses_past_its_bound_and_changes_nothing() {
        let mut s = Store::default();
        assert!(s.put("k".into(), Some("x".repeat(STORE_BYTES - 1))));
        assert!(!s.put("j".into(), Some("1".into())));
        assert_eq!(s.get("j"), None);
        // Replacing a value counts the new size, not both.
        assert!(s.put("k".into(), Some("2".into())));
        assert!(s.put("j".into(), Some("y".repeat(STORE_BYTES - 3))));
        assert!(s.put("k".into(), None));
        assert_eq!(s.get("k"), None);
        assert_eq!(s.bytes, 1 + STORE_BYTES - 3);
    }

    #[test]
    fn output_keeps_its_bound_and_says_what_it_cut() {
        let mut o = Output::default();
        o.push("a\nb".into());
        o.push("x".repeat(OUTPUT_BYTES));
        o.push("late".into());
        let t = o.text();
        assert!(t.starts_with("a\nb\nxxx"));
        assert!(t.len() <= OUTPUT_BYTES + 64);
        assert!(
            t.ends_with("more bytes not kept]"),
            "{}",
            &t[t.len() - 60..]
        );
    }

    #[test]
    fn calls_past_the_limit_are_refused_and_counted() {
        let mut s = Shared::new(1, 7, Store::default());
        assert_eq!(s.issue("a".into(), "{}"), 7);
        assert_eq!(s.issue("a".into(), "{}"), REFUSED_LIMIT);
        s.refused();
        assert_eq!((s.calls, s.next_call(), s.queued.len()), (3, 8, 1));
        let mut s = Shared::new(5, 1, Store::default());
        let big = format!("\"{}\"", "x".repeat(INPUT_BYTES));
        assert_eq!(s.issue("a".into(), &big), REFUSED_TOO_LARGE);
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        assert!(s.issue("a".into(), &deep(INPUT_DEPTH)) > 0);
        assert_eq!(
            s.issue("a".into(), &deep(INPUT_DEPTH + 1)),
            REFUSED_TOO_DEEP
        );
        assert_eq!(s.issue("a".into(), &deep(200)), REFUSED_TOO_DEEP);
    }
}
