//! A cancellation flag that sleeping workers can wait on, and that can interrupt blocking I/O
//! through hooks (closing a connection, killing a process group).

use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
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

/// What an [`Alarm`]'s thread watches: the armed deadline, and whether the alarm is dropped.
#[derive(Default)]
struct Armed {
    at: Option<Instant>,
    closed: bool,
}

/// Cancels its target once an armed deadline passes: one thread serves every wait it is
/// armed for (a cell's nested calls), so a blocking tool is cut at its cell's clock.
pub struct Alarm {
    armed: Arc<(Mutex<Armed>, Condvar)>,
    thread: Option<JoinHandle<()>>,
}

impl Alarm {
    /// An alarm that cancels `target`; disarmed.
    ///
    /// # Errors
    /// When its thread cannot be started.
    pub fn start(target: Arc<Cancel>) -> std::io::Result<Self> {
        let armed = Arc::new((Mutex::new(Armed::default()), Condvar::new()));
        let watched = Arc::clone(&armed);
        let thread = std::thread::Builder::new()
            .name("alarm".into())
            .spawn(move || ring(&watched, &target))?;
        Ok(Self {
            armed,
            thread: Some(thread),
        })
    }

    /// Arms the alarm for `at`, or disarms it with `None`.
    pub fn arm(&self, at: Option<Instant>) {
        let (m, cv) = &*self.armed;
        m.lock().unwrap_or_else(PoisonError::into_inner).at = at;
        cv.notify_all();
    }
}

impl Drop for Alarm {
    fn drop(&mut self) {
        let (m, cv) = &*self.armed;
        m.lock().unwrap_or_else(PoisonError::into_inner).closed = true;
        cv.notify_all();
        if let Some(t) = self.thread.take() {
            // A panic in the alarm thread has nothing left to report.
            drop(t.join());
        }
    }
}

/// The alarm thread: waits for the armed deadline and cancels `target` once it passes.
fn ring(armed: &(Mutex<Armed>, Condvar), target: &Cancel) {
    let (m, cv) = armed;
    let mut g = m.lock().unwrap_or_else(PoisonError::into_inner);
    loop {
        if g.closed {
            return;
        }
        let now = Instant::now();
        g = match g.at {
            Some(at) if now >= at => {
                drop(g);
                target.cancel();
                return;
            }
            Some(at) => {
                cv.wait_timeout(g, at - now)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0
            }
            None => cv.wait(g).unwrap_or_else(PoisonError::into_inner),
        };
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

    #[test]
    fn an_alarm_cancels_only_once_armed_and_past() {
        let target = Arc::new(Cancel::default());
        let alarm = Alarm::start(Arc::clone(&target)).unwrap();
        alarm.arm(Some(Instant::now() + Duration::from_secs(3600)));
        alarm.arm(None);
        assert!(!target.is_cancelled());
        alarm.arm(Some(Instant::now()));
        // The thread rings for a deadline already past; a wait on the target ends with it.
        assert!(!target.sleep(Duration::from_secs(60)));
        drop(alarm);
        let quiet = Arc::new(Cancel::default());
        drop(Alarm::start(Arc::clone(&quiet)).unwrap());
        assert!(!quiet.is_cancelled(), "a dropped alarm never rings");
    }
}
