//! Time as an input: each timer decides from a `now` it is given ([`Deadline`]), and the
//! loops that wait on one take a [`Clock`], so unit tests drive the bounds (hook run, title
//! grace) in milliseconds on a `FakeClock` (tests only) instead of waiting for them.

use super::cancel::Cancel;
#[cfg(test)]
use std::sync::atomic::{AtomicU64, Ordering};
#[cfg(test)]
use std::sync::mpsc::TryRecvError;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// A point in time a timer fires at, computed from the `now` it was armed at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadline(Instant);

impl Deadline {
    /// The deadline `bound` after `now`.
    #[must_use]
    pub fn after(now: Instant, bound: Duration) -> Self {
        Self(now + bound)
    }

    /// Whether it has passed at `now`: the bound itself is the first instant past it.
    #[must_use]
    pub fn passed(self, now: Instant) -> bool {
        now >= self.0
    }

    /// The time left at `now` (zero once passed).
    #[must_use]
    pub fn left(self, now: Instant) -> Duration {
        self.0.saturating_duration_since(now)
    }
}

/// Where a waiting loop reads the time and lets it pass.
pub trait Clock: Sync {
    /// The current instant.
    fn now(&self) -> Instant;
    /// Lets up to `d` pass, ending early on `cancel`; false if cancelled.
    fn sleep(&self, d: Duration, cancel: &Cancel) -> bool;
    /// Waits up to `d` for a message on `rx`.
    ///
    /// # Errors
    /// `Timeout` when none came in `d`, `Disconnected` when every sender is gone.
    fn recv(&self, rx: &Receiver<()>, d: Duration) -> Result<(), RecvTimeoutError>;
}

/// The machine's monotonic clock: what the binary runs on.
#[derive(Debug, Clone, Copy, Default)]
pub struct RealClock;

impl Clock for RealClock {
    fn now(&self) -> Instant {
        Instant::now()
    }

    fn sleep(&self, d: Duration, cancel: &Cancel) -> bool {
        cancel.sleep(d)
    }

    fn recv(&self, rx: &Receiver<()>, d: Duration) -> Result<(), RecvTimeoutError> {
        rx.recv_timeout(d)
    }
}

/// A virtual clock for tests: time moves only when a wait lets it pass (at once, by the
/// whole wait) or [`FakeClock::advance`] moves it.
#[cfg(test)]
#[derive(Debug)]
pub struct FakeClock {
    start: Instant,
    ms: AtomicU64,
}

#[cfg(test)]
impl Default for FakeClock {
    fn default() -> Self {
        Self {
            start: Instant::now(),
            ms: AtomicU64::new(0),
        }
    }
}

#[cfg(test)]
impl FakeClock {
    /// Moves the clock `ms` milliseconds on.
    pub fn advance(&self, ms: u64) {
        self.ms.fetch_add(ms, Ordering::SeqCst);
    }

    /// Virtual milliseconds since the clock was made.
    #[must_use]
    pub fn elapsed_ms(&self) -> u64 {
        self.ms.load(Ordering::SeqCst)
    }

    fn pass(&self, d: Duration) {
        self.advance(u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        // Real threads (a child process, a pipe reader) still get the CPU.
        std::thread::yield_now();
    }
}

#[cfg(test)]
impl Clock for FakeClock {
    fn now(&self) -> Instant {
        self.start + Duration::from_millis(self.elapsed_ms())
    }

    fn sleep(&self, d: Duration, cancel: &Cancel) -> bool {
        if cancel.is_cancelled() {
            return false;
        }
        self.pass(d);
        !cancel.is_cancelled()
    }

    fn recv(&self, rx: &Receiver<()>, d: Duration) -> Result<(), RecvTimeoutError> {
        match rx.try_recv() {
            Ok(()) => Ok(()),
            Err(TryRecvError::Disconnected) => Err(RecvTimeoutError::Disconnected),
            Err(TryRecvError::Empty) => {
                self.pass(d);
                Err(RecvTimeoutError::Timeout)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_deadline_passes_at_its_bound_not_before() {
        let t0 = Instant::now();
        let d = Deadline::after(t0, Duration::from_millis(60_000));
        assert!(
            !d.passed(t0 + Duration::from_millis(59_999)),
            "last instant inside"
        );
        assert!(
            d.passed(t0 + Duration::from_millis(60_000)),
            "first instant past"
        );
        assert_eq!(
            d.left(t0 + Duration::from_millis(59_999)),
            Duration::from_millis(1)
        );
        assert_eq!(d.left(t0 + Duration::from_millis(70_000)), Duration::ZERO);
    }

    #[test]
    fn the_fake_clock_moves_only_when_a_wait_lets_time_pass() {
        let c = FakeClock::default();
        let t0 = c.now();
        assert_eq!(c.now(), t0);
        assert!(c.sleep(Duration::from_millis(10_000), &Cancel::default()));
        assert_eq!(c.now() - t0, Duration::from_millis(10_000));
        let cancel = Cancel::default();
        cancel.cancel();
        assert!(!c.sleep(Duration::from_millis(5), &cancel));
        assert_eq!(c.elapsed_ms(), 10_000, "a cancelled wait lets no time pass");
        let (tx, rx) = std::sync::mpsc::channel();
        assert_eq!(
            c.recv(&rx, Duration::from_millis(10)),
            Err(RecvTimeoutError::Timeout)
        );
        assert_eq!(c.elapsed_ms(), 10_010);
        tx.send(()).unwrap();
        assert_eq!(c.recv(&rx, Duration::from_millis(10)), Ok(()));
        drop(tx);
        assert_eq!(
            c.recv(&rx, Duration::from_millis(10)),
            Err(RecvTimeoutError::Disconnected)
        );
        assert_eq!(c.elapsed_ms(), 10_010);
    }
}
