//! Title requests beside the session worker (`runner.md` 7 "Titles"): at most one per session
//! per child, each on its own thread with its own cancellation, so none holds a worker slot;
//! cleanup cancels and joins them before the leases go.

use super::shared::Shared;
use crate::agent::{title, TitleJob};
use crate::runtime::Runtime;
use crate::util::cancel::Cancel;
use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;

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

    /// Cancels every title request and stops new ones; returns the threads to join.
    pub fn stop(&self) -> Vec<JoinHandle<()>> {
        let mut g = self.lock();
        g.closing = true;
        g.running
            .drain(..)
            .map(|(cancel, handle)| {
                cancel.cancel();
                handle
            })
            .collect()
    }
}

/// Starts the title request of `job` on its own thread, unless this child already asked for
/// that session or is closing.
pub fn spawn(shared: &Arc<Shared>, rt: Runtime, job: TitleJob) {
    let mut g = shared.titles.lock();
    if g.closing || !g.asked.insert(job.session_id.clone()) {
        return;
    }
    // Finished requests need no joining later.
    g.running.retain(|(_, h)| !h.is_finished());
    let cancel = Arc::new(Cancel::default());
    let (c, sh) = (cancel.clone(), shared.clone());
    let spawned = std::thread::Builder::new()
        .name("mc-title".to_owned())
        .spawn(move || {
            // A panic is a failed title: silent.
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                title::run(&job, &rt, &sh.sessions, &c);
            }));
        });
    if let Ok(handle) = spawned {
        g.running.push((cancel, handle));
    }
}
