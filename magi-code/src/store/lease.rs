//! Lease files: an exclusive `flock` per session and kind, deleted before it is unlocked.

use super::paths::{LeaseKind, SessionId, Sessions};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::PathBuf;

/// A held lease: an exclusive `flock` on its lock file. Dropping it deletes the file, then
/// unlocks.
#[derive(Debug)]
pub struct Lease {
    path: PathBuf,
    file: File,
}

/// Why a lease was not taken.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LeaseError {
    /// Another process holds it.
    Busy,
    /// The lock file cannot be used safely.
    Unsafe,
}

impl Lease {
    /// Takes the lease without waiting. A stale file left by a crashed owner is not locked and
    /// is taken over.
    pub fn acquire(
        sessions: &Sessions,
        id: &SessionId,
        kind: LeaseKind,
    ) -> Result<Self, LeaseError> {
        let path = sessions.lease_path(id, kind);
        for _ in 0..4 {
            let file = OpenOptions::new()
                .read(true)
                .write(true)
                .create(true)
                .truncate(false)
                .mode(0o600)
                .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
                .open(&path)
                .map_err(|_| LeaseError::Unsafe)?;
            let meta = file.metadata().map_err(|_| LeaseError::Unsafe)?;
            if !meta.file_type().is_file() {
                return Err(LeaseError::Unsafe);
            }
            match file.try_lock() {
                Ok(()) => {}
                Err(fs::TryLockError::WouldBlock) => return Err(LeaseError::Busy),
                Err(fs::TryLockError::Error(_)) => return Err(LeaseError::Unsafe),
            }
            // The previous owner may have deleted the file between our open and lock: only a
            // lock on the file the name still leads to counts.
            match fs::symlink_metadata(&path) {
                Ok(named) if named.ino() == meta.ino() && named.dev() == meta.dev() => {
                    let mut lease = Self { path, file };
                    let _ = lease.file.set_len(0);
                    let _ = writeln!(lease.file, "{}", std::process::id());
                    return Ok(lease);
                }
                _ => continue,
            }
        }
        Err(LeaseError::Busy)
    }
}

impl Drop for Lease {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.path);
        let _ = self.file.unlock();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn leases_exclude_and_clean_up() {
        let d = tempfile::tempdir().unwrap();
        fs::create_dir(d.path().join("sessions")).unwrap();
        let s = Sessions::new(d.path());
        let id = SessionId::new("abc").unwrap();
        assert!(!s.lease_present(&id));
        let l = Lease::acquire(&s, &id, LeaseKind::Writer).unwrap();
        assert!(s.lease_present(&id));
        assert_eq!(
            Lease::acquire(&s, &id, LeaseKind::Writer).unwrap_err(),
            LeaseError::Busy
        );
        drop(l);
        assert!(!s.lease_present(&id));
        // A stale file (crashed owner) is taken over.
        fs::write(s.lease_path(&id, LeaseKind::Writer), b"12345\n").unwrap();
        assert!(s.lease_present(&id));
        let l = Lease::acquire(&s, &id, LeaseKind::Writer).unwrap();
        drop(l);
    }
}
