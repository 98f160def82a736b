//! Runaway loops (`runner.md` 7): within one turn, the third and every further consecutive
//! call of one tool with an equal input is not run.

use serde_json::Value;

/// From which place in a row of equal calls a call is refused.
pub const REPEAT_LIMIT: usize = 3;
/// What the model gets for a refused repeat.
pub const REPEATED: &str =
    "refused: you repeated the same tool call with the same input; it was not run. Try something different.";

/// The current row of equal consecutive calls of one turn, across its steps.
#[derive(Debug, Default)]
pub struct Repeats {
    last: Option<(String, Value)>,
    row: usize,
}

impl Repeats {
    /// Counts the turn's next call (every call counts, refused and denied ones too) and says
    /// whether it must not run.
    pub fn see(&mut self, name: &str, input: &Value) -> bool {
        match &self.last {
            // JSON value equality: key order never matters.
            Some((n, i)) if n == name && i == input => self.row += 1,
            _ => {
                self.last = Some((name.to_owned(), input.clone()));
                self.row = 1;
            }
        }
        self.row >= REPEAT_LIMIT
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_third_equal_call_in_a_row_and_later_ones_are_refused() {
        let mut r = Repeats::default();
        let a = json!({"path": "a", "n": 1});
        let same = serde_json::from_str::<Value>(r#"{"n": 1, "path": "a"}"#).unwrap();
        assert!(!r.see("read_file", &a));
        assert!(!r.see("read_file", &same));
        assert!(r.see("read_file", &a));
        assert!(r.see("read_file", &a));
        // Another input, or another tool with the same input, resets the row.
        assert!(!r.see("read_file", &json!({"path": "b"})));
        assert!(!r.see("read_file", &a));
        assert!(!r.see("read_file", &a));
        assert!(!r.see("list_dir", &a));
        assert!(!r.see("read_file", &a));
        assert!(!r.see("read_file", &a));
        assert!(r.see("read_file", &a));
    }
}
