//! Title requests beside the session worker (`runner.md` 7 "Titles"): one at a time per
//! session, at most [`TITLE_TRIES`] per session per child (a failed one is asked again after
//! the session's next completed turn), each on its own thread with its own cancellation, so
//! none holds a worker slot; cleanup cancels and joins them before the leases go.

use crate::util::cancel::Cancel;
use crate::util::clock::{Clock, Deadline};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::Duration;

/// Title requests per session per child (`runner.md` 7).
pub const TITLE_TRIES: u32 = 3;

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
    /// Title requests made for each session in this child.
    asked: HashMap<String, u32>,
    /// The requests that may still run, by session.
    running: Vec<(String, Arc<Cancel>, JoinHandle<()>)>,
}

impl Titles {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Stops new title requests; returns the running ones (see [`after_grace`]).
    pub fn stop(&self) -> Vec<(Arc<Cancel>, JoinHandle<()>)> {
        let mut g = self.lock();
        g.closing = true;
        g.running.drain(..).map(|(_, c, h)| (c, h)).collect()
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
    /// cancellation, unless one for that session still runs, this child already asked
    /// [`TITLE_TRIES`] times for it, or it is closing. The caller asks only while the session
    /// has no title, so a try that failed is asked again after the next completed turn. A
    /// panic inside it is a failed title: silent.
    pub fn spawn(&self, session_id: &str, request: impl FnOnce(&Cancel) + Send + 'static) {
        let mut g = self.lock();
        // Finished requests need no joining later.
        g.running.retain(|(_, _, h)| !h.is_finished());
        let busy = g.running.iter().any(|(s, _, _)| s == session_id);
        let tries = g.asked.get(session_id).copied().unwrap_or(0);
        if g.closing || busy || tries >= TITLE_TRIES {
            return;
        }
        g.asked.insert(session_id.to_owned(), tries + 1);
        let cancel = Arc::new(Cancel::default());
        let c = cancel.clone();
        let spawned = std::thread::Builder::new()
            .name("mc-title".to_owned())
            .spawn(move || {
                let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| request(&c)));
            });
        if let Ok(handle) = spawned {
            g.running.push((session_id.to_owned(), cancel, handle));
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

    /// Joins the running requests of `titles`.
    fn join(titles: &Titles) {
        let running: Vec<_> = titles.lock().running.drain(..).collect();
        for (_, _, h) in running {
            h.join().unwrap();
        }
    }

    #[test]
    fn a_session_is_asked_at_most_three_times_and_never_twice_at_once() {
        let titles = Titles::default();
        let (tx, rx) = std::sync::mpsc::channel();
        let gate = Arc::new(Cancel::default());
        let (g, t) = (gate.clone(), tx.clone());
        titles.spawn("s", move |_| {
            t.send(1).unwrap();
            while g.sleep(Duration::from_secs(60)) {}
        });
        assert_eq!(rx.recv().unwrap(), 1);
        // While the first runs, the session is not asked again.
        let t = tx.clone();
        titles.spawn("s", move |_| t.send(0).unwrap());
        gate.cancel();
        join(&titles);
        for n in 2..=4 {
            let t = tx.clone();
            titles.spawn("s", move |_| t.send(n).unwrap());
            join(&titles);
        }
        drop(tx);
        assert_eq!(rx.iter().collect::<Vec<_>>(), [2, 3], "three in all");
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
