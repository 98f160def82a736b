//! Child processes: bounded capture of their pipes and killing their process group.

use std::io::{self, Read};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Output kept from a child's pipes, in arrival order, at most `max` bytes.
#[derive(Debug)]
pub struct Capture {
    kept: Vec<u8>,
    cut: bool,
    max: usize,
}

impl Capture {
    /// An empty capture keeping at most `max` bytes.
    #[must_use]
    pub fn new(max: usize) -> Self {
        Self {
            kept: Vec::new(),
            cut: false,
            max,
        }
    }
}

fn lock(c: &Mutex<Capture>) -> MutexGuard<'_, Capture> {
    c.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads a pipe to its end so the child never blocks, keeping what fits.
pub fn drain(mut r: impl Read, cap: &Mutex<Capture>) {
    let mut chunk = vec![0u8; 8192];
    loop {
        match r.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => {
                let mut c = lock(cap);
                let take = n.min(c.max.saturating_sub(c.kept.len()));
                c.kept.extend_from_slice(&chunk[..take]);
                if take < n {
                    c.cut = true;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// What was captured (lossy UTF-8) and whether anything was cut.
#[must_use]
pub fn captured(cap: &Mutex<Capture>) -> (String, bool) {
    let c = lock(cap);
    (String::from_utf8_lossy(&c.kept).into_owned(), c.cut)
}

/// SIGKILLs the process group that `process_group(0)` made for the child (pgid = its pid).
// The one unsafe call of the crate: libc::kill has no safe std equivalent for a group.
#[allow(unsafe_code)]
pub fn kill_group(pid: u32) {
    let Ok(pid) = libc::pid_t::try_from(pid) else {
        return;
    };
    // Never 0 (own group) or 1 (kill(-1) signals every process).
    if pid <= 1 {
        return;
    }
    // SAFETY: kill(2) takes two integers and touches no memory of this process; the negative
    // pid names only the child's own process group.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}
