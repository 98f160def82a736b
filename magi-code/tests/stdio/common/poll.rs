//! Bounded waits for a condition that a real process, pipe or file brings about: the one
//! poll loop of the integration tests. What they wait for has no clock of ours to advance (a
//! child's exit, a file another process writes, a screen), so they look again every
//! [`EVERY`] until a generous limit passes; a loaded machine makes a wait longer, never red.

use std::time::{Duration, Instant};

/// How often a condition is looked at again.
pub const EVERY: Duration = Duration::from_millis(10);

/// The first `Some` of `probe` within `limit`, else `None` (looked at once more at the end).
pub fn within<T>(limit: Duration, mut probe: impl FnMut() -> Option<T>) -> Option<T> {
    let end = Instant::now() + limit;
    loop {
        if let Some(v) = probe() {
            return Some(v);
        }
        if Instant::now() >= end {
            return None;
        }
        std::thread::sleep(EVERY);
    }
}

/// Waits until `done` holds, failing with `what` after `limit`.
#[track_caller]
pub fn until(limit: Duration, what: &str, mut done: impl FnMut() -> bool) {
    if within(limit, || done().then_some(())).is_none() {
        panic!("{what} (waited {limit:?})");
    }
}
