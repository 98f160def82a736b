//! A cancellation flag that sleeping workers can wait on.

use std::sync::{Condvar, Mutex};
use std::time::{Duration, Instant};

/// Set once; waits wake early when it is set.
#[derive(Debug, Default)]
pub struct Cancel {
    set: Mutex<bool>,
    cv: Condvar,
}

impl Cancel {
    /// Requests cancellation.
    pub fn cancel(&self) {
        let mut g = self
            .set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        *g = true;
        self.cv.notify_all();
    }

    /// Whether cancellation was requested.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        *self
            .set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Sleeps up to `d`; returns false if cancelled first.
    pub fn sleep(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        let mut g = self
            .set
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        loop {
            if *g {
                return false;
            }
            let now = Instant::now();
            if now >= end {
                return true;
            }
            g = self
                .cv
                .wait_timeout(g, end - now)
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .0;
        }
    }
}
