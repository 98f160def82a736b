//! Title requests beside the session worker (`runner.md` 7 "Titles"): at most one per session
//! per child, each on its own thread with its own cancellation, so none holds a worker slot;
//! cleanup cancels and joins them before the leases go.

use crate::util::cancel::Cancel;
use crate::util::clock::{Clock, Deadline};
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the grace loop looks whether the requests have ended.
const GRACE_POLL: Duration = Duration::from_millis(2);

/// The title requests of one child.
#[derive(Debug, Default)]
pub struct Titles {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Cleanup began: no new request starts.
    closing: bool,
    /// Sessions a title was requested for in this child (one try each).
    asked: HashSet<String>,
    running: Vec<(Arc<Cancel>, JoinHandle<()>)>,
}

impl Titles {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops new title requests; returns the running ones (see [`after_grace`]).
    pub fn stop(&self) -> Vec<(Arc<Cancel>, JoinHandle<()>)> {
        let mut g = self.lock();
        g.closing = true;
        g.running.drain(..).collect()
    }
}

/// Waits up to `grace` on `clock` for the running title requests to end on their own,
/// cancels the rest (an HTTP step ends within 500 ms of that), and returns every thread to
/// join.
pub fn after_grace(
    running: Vec<(Arc<Cancel>, JoinHandle<()>)>,
    grace: Duration,
    clock: &dyn Clock,
) -> Vec<JoinHandle<()>> {
    let deadline = Deadline::after(clock.now(), grace);
    let never = Cancel::default();
    while !deadline.passed(clock.now()) && running.iter().any(|(_, h)| !h.is_finished()) {
        let _ = clock.sleep(GRACE_POLL.min(deadline.left(clock.now())), &never);
    }
    running
        .into_iter()
        .map(|(cancel, handle)| {
            cancel.cancel();
            handle
        })
        .collect()
}

impl Titles {
    /// Runs `request` (the title request of `session_id`) on its own thread with a fresh
    /// cancellation, unless this child already asked for that session or is closing. A panic
    /// inside it is a failed title: silent.
    pub fn spawn(&self, session_id: &str, request: impl FnOnce(&Cancel) + Send + 'static) {
        let mut g = self.lock();
        if g.closing || !g.asked.insert(session_id.to_owned()) {
            return;
        }
        // Finished requests need no joining later.
        g.running.retain(|(_, h)| !h.is_finished());
        let cancel = Arc::new(Cancel::default());
        let c = cancel.clone();
        let spawned = std::thread::Builder::new()
            .name("mc-title".to_owned())
            .spawn(move || {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| request(&c)));
            });
        if let Ok(handle) = spawned {
            g.running.push((cancel, handle));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::clock::FakeClock;

    /// A title request that ends only when cancelled.
    fn stuck() -> (Arc<Cancel>, JoinHandle<()>) {
        let cancel = Arc::new(Cancel::default());
        let c = cancel.clone();
        let h = std::thread::spawn(move || while c.sleep(Duration::from_secs(60)) {});
        (cancel, h)
    }

    #[test]
    fn the_grace_ends_at_its_bound_on_a_virtual_clock_then_cancels() {
        let clock = FakeClock::default();
        let (cancel, h) = stuck();
        let joins = after_grace(
            vec![(cancel.clone(), h)],
            Duration::from_millis(200),
            &clock,
        );
        assert_eq!(clock.elapsed_ms(), 200, "the whole grace, not more");
        assert!(cancel.is_cancelled(), "cancelled past the grace");
        for h in joins {
            h.join().unwrap();
        }
    }

    #[test]
    fn finished_requests_need_no_grace() {
        let clock = FakeClock::default();
        let cancel = Arc::new(Cancel::default());
        let h = std::thread::spawn(|| {});
        while !h.is_finished() {
            std::thread::yield_now();
        }
        let joins = after_grace(vec![(cancel, h)], Duration::from_millis(200), &clock);
        assert_eq!(clock.elapsed_ms(), 0);
        assert_eq!(joins.len(), 1);
    }
}
