//! What the natives of one cell share with the engine loop: the output so far, the calls the
//! code issued, and the helper's `store`.

use super::protocol::{Refusal, ToolErrorCode, INPUT_BYTES, OUTPUT_BYTES, STORE_BYTES};
use crate::util::text::cut;
use serde_json::Value;
use std::cell::Cell as Flag;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

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
    /// The input as the code passed it (`null` when refused).
    pub input: Value,
    /// Refused here: the backend records it and answers this error.
    pub refused: Option<Refusal>,
}

/// Returned to the prelude instead of a call number for a call past `max_calls`: it throws
/// `ToolError` `limit` at once, with no record and no activity (`decisions.md` 52).
pub const REFUSED_LIMIT: i64 = -2;
/// Returned instead of [`REFUSED_LIMIT`] for the last call past `max_calls` allowed: the cell
/// is stopped after it.
pub const REFUSED_RUNAWAY: i64 = -1;
/// Calls past `max_calls` refused before the cell is stopped (`decisions.md` 52).
pub const CALLS_PAST_LIMIT: u32 = 1_000;
/// The uncaught text of a cell stopped past [`CALLS_PAST_LIMIT`].
pub const RUNAWAY_TEXT: &str = "Error: stopped: too many calls past max_calls";
/// Deepest input nesting sent: well inside serde_json's 128 levels, which the `call` line
/// around it must also fit.
pub const INPUT_DEPTH: usize = 64;

/// One cell's shared state.
#[derive(Debug)]
pub struct Shared {
    /// Console and `text()` output.
    pub out: Output,
    /// Calls sent to the backend (within `max_calls`, refused ones included).
    pub calls: u32,
    /// Calls refused past `max_calls`, never sent.
    pub refused_past: u32,
    max_calls: u32,
    next_call: u64,
    /// Calls to write to the backend.
    pub queued: Vec<Issued>,
    /// Calls written and not answered.
    pub outstanding: BTreeSet<u64>,
    /// The helper's store, lent to the cell.
    pub store: Store,
    /// Raised past [`CALLS_PAST_LIMIT`]; the engine's interrupt handler reads it.
    pub runaway: Rc<Flag<bool>>,
}

impl Shared {
    /// The state of a cell allowing `max_calls`, numbering calls from `next_call`.
    #[must_use]
    pub fn new(max_calls: u32, next_call: u64, store: Store) -> Self {
        Self {
            out: Output::default(),
            calls: 0,
            refused_past: 0,
            max_calls,
            next_call,
            queued: Vec::new(),
            outstanding: BTreeSet::new(),
            store,
            runaway: Rc::new(Flag::new(false)),
        }
    }

    /// The next call number (for the helper's next cell).
    #[must_use]
    pub fn next_call(&self) -> u64 {
        self.next_call
    }

    /// Issues a call whose input is `json` (`None`: the code passed a value JSON cannot
    /// hold): its number, or past `max_calls` [`REFUSED_LIMIT`] (the 1,000th such call
    /// [`REFUSED_RUNAWAY`], and the cell is stopped). Every call within `max_calls` goes to
    /// the backend, which records it; one this side cannot send as it is goes with its
    /// refusal and input `null`.
    pub fn issue(&mut self, name: String, json: Option<&str>) -> i64 {
        if self.calls >= self.max_calls {
            // Counted up to the bound: the cell is being stopped past it.
            self.refused_past = self.refused_past.saturating_add(1).min(CALLS_PAST_LIMIT);
            if self.refused_past >= CALLS_PAST_LIMIT {
                self.runaway.set(true);
                return REFUSED_RUNAWAY;
            }
            return REFUSED_LIMIT;
        }
        self.calls += 1;
        let (input, refused) = read_input(json);
        let call = self.next_call;
        self.next_call += 1;
        self.queued.push(Issued {
            call,
            name,
            input,
            refused: refused.map(|(code, message)| Refusal { code, message }),
        });
        i64::try_from(call).unwrap_or(i64::MAX)
    }

    /// The line that says how many calls were refused past `max_calls`, if any were.
    #[must_use]
    pub fn refused_line(&self) -> Option<String> {
        (self.refused_past > 0)
            .then(|| format!("{} calls refused past max_calls", self.refused_past))
    }
}

/// The input to send, or `null` with why it cannot be.
fn read_input(json: Option<&str>) -> (Value, Option<(ToolErrorCode, String)>) {
    let refuse = |why: &str| {
        (
            Value::Null,
            Some((ToolErrorCode::InvalidInput, why.to_owned())),
        )
    };
    let Some(json) = json else {
        return refuse("invalid input: the value is not JSON");
    };
    if json.len() > INPUT_BYTES {
        return refuse("invalid input: over 1 MiB of JSON");
    }
    match serde_json::from_str::<Value>(json) {
        Ok(v) if depth(&v) <= INPUT_DEPTH => (v, None),
        _ => refuse("invalid input: nests deeper than 64 levels"),
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
    fn calls_past_max_calls_are_refused_here_until_the_runaway_bound() {
        let refusal = |s: &Shared, i: usize| s.queued[i].refused.as_ref().map(|r| r.code);
        let mut s = Shared::new(1, 7, Store::default());
        assert_eq!(s.refused_line(), None);
        assert_eq!(s.issue("a".into(), Some("{}")), 7);
        assert_eq!(refusal(&s, 0), None);
        // Past `max_calls`: refused here, never queued, never numbered.
        for _ in 1..CALLS_PAST_LIMIT {
            assert_eq!(s.issue("a".into(), Some("{}")), REFUSED_LIMIT);
        }
        assert!(!s.runaway.get());
        assert_eq!(s.issue("a".into(), Some("{}")), REFUSED_RUNAWAY);
        assert!(s.runaway.get());
        assert_eq!(s.issue("a".into(), Some("{}")), REFUSED_RUNAWAY);
        assert_eq!((s.calls, s.queued.len(), s.next_call()), (1, 1, 8));
        assert_eq!(
            s.refused_line().as_deref(),
            Some("1000 calls refused past max_calls")
        );

        let mut s = Shared::new(9, 1, Store::default());
        s.issue("a".into(), None);
        let at = format!("\"{}\"", "x".repeat(INPUT_BYTES - 2));
        s.issue("a".into(), Some(&at));
        s.issue(
            "a".into(),
            Some(&format!("\"{}\"", "x".repeat(INPUT_BYTES - 1))),
        );
        let deep = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
        s.issue("a".into(), Some(&deep(INPUT_DEPTH)));
        s.issue("a".into(), Some(&deep(INPUT_DEPTH + 1)));
        let codes: Vec<_> = (0..5).map(|i| refusal(&s, i)).collect();
        let bad = Some(ToolErrorCode::InvalidInput);
        assert_eq!(codes, [bad, None, bad, None, bad]);
        assert_eq!(s.calls, 5);
    }
}
