//! A cancellation flag that sleeping workers can wait on, and that can interrupt blocking I/O
//! through hooks (closing a connection, killing a process group).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

type Hook = Arc<dyn Fn() + Send + Sync>;

#[derive(Default)]
struct State {
    set: bool,
    hooks: Vec<(u64, Hook)>,
    next: u64,
}

/// Set once; waits wake early when it is set, and registered hooks run.
#[derive(Default)]
pub struct Cancel {
    state: Mutex<State>,
    cv: Condvar,
}

impl std::fmt::Debug for Cancel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cancel")
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// Removes its hook when dropped.
#[must_use = "the hook is removed when this guard is dropped"]
pub struct HookGuard<'a> {
    cancel: &'a Cancel,
    id: u64,
}

impl Drop for HookGuard<'_> {
    fn drop(&mut self) {
        self.cancel.lock().hooks.retain(|(id, _)| *id != self.id);
    }
}

impl Cancel {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Requests cancellation and runs every registered hook once.
    pub fn cancel(&self) {
        let hooks: Vec<Hook> = {
            let mut g = self.lock();
            g.set = true;
            self.cv.notify_all();
            g.hooks.drain(..).map(|(_, h)| h).collect()
        };
        // Outside the lock: a hook may block briefly (a socket shutdown) or re-enter.
        for h in hooks {
            h();
        }
    }

    /// Whether cancellation was requested.
    #[must_use]
    pub fn is_cancelled(&self) -> bool {
        self.lock().set
    }

    /// Runs `hook` when cancellation is requested (at once if it already was), unless the
    /// guard is dropped first.
    pub fn on_cancel(&self, hook: impl Fn() + Send + Sync + 'static) -> HookGuard<'_> {
        let hook: Hook = Arc::new(hook);
        let mut g = self.lock();
        let id = g.next;
        g.next += 1;
        if g.set {
            drop(g);
            hook();
        } else {
            g.hooks.push((id, hook));
        }
        HookGuard { cancel: self, id }
    }

    /// Sleeps up to `d`; returns false if cancelled first.
    pub fn sleep(&self, d: Duration) -> bool {
        let end = Instant::now() + d;
        let mut g = self.lock();
        loop {
            if g.set {
                return false;
            }
            let now = Instant::now();
            if now >= end {
                return true;
            }
            g = self
                .cv
                .wait_timeout(g, end - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[test]
    fn hooks_run_once_on_cancel_unless_dropped() {
        let c = Cancel::default();
        let n = Arc::new(AtomicUsize::new(0));
        let (a, b) = (n.clone(), n.clone());
        let kept = c.on_cancel(move || {
            a.fetch_add(1, Ordering::SeqCst);
        });
        drop(c.on_cancel(move || {
            b.fetch_add(10, Ordering::SeqCst);
        }));
        c.cancel();
        c.cancel();
        assert_eq!(n.load(Ordering::SeqCst), 1);
        drop(kept);
        let m = n.clone();
        let _late = c.on_cancel(move || {
            m.fetch_add(100, Ordering::SeqCst);
        });
        assert_eq!(n.load(Ordering::SeqCst), 101, "a late hook runs at once");
        assert!(!c.sleep(Duration::from_secs(5)));
    }
}
