//! Child processes: bounded capture of their pipes and killing their process group.

use std::collections::VecDeque;
use std::io::{self, Read};
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, MutexGuard, PoisonError};

/// Output kept from a child's pipes in arrival order, in bounded memory however much arrives:
/// the first `head_max` bytes and the last `tail_max` bytes after them, counting the rest.
#[derive(Debug)]
pub struct Capture {
    head: Vec<u8>,
    tail: VecDeque<u8>,
    dropped: u64,
    head_max: usize,
    tail_max: usize,
}

/// What a [`Capture`] kept, as lossy UTF-8: `head`, then `dropped` bytes not kept, then `tail`
/// (contiguous with `head` when nothing was dropped).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Captured {
    /// The first bytes.
    pub head: String,
    /// How many bytes between them were not kept (partial characters at the cuts included).
    pub dropped: u64,
    /// The last bytes.
    pub tail: String,
}

impl Capture {
    /// An empty capture keeping at most `head_max` leading and `tail_max` trailing bytes.
    #[must_use]
    pub fn new(head_max: usize, tail_max: usize) -> Self {
        Self {
            head: Vec::new(),
            tail: VecDeque::new(),
            dropped: 0,
            head_max,
            tail_max,
        }
    }

    /// Adds bytes that arrived.
    pub fn push(&mut self, mut bytes: &[u8]) {
        let take = bytes
            .len()
            .min(self.head_max.saturating_sub(self.head.len()));
        self.head.extend_from_slice(&bytes[..take]);
        bytes = &bytes[take..];
        if bytes.len() >= self.tail_max {
            let skip = bytes.len() - self.tail_max;
            self.dropped += (self.tail.len() + skip) as u64;
            self.tail.clear();
            bytes = &bytes[skip..];
        } else {
            let over = (self.tail.len() + bytes.len()).saturating_sub(self.tail_max);
            self.dropped += over as u64;
            self.tail.drain(..over);
        }
        self.tail.extend(bytes);
    }

    /// What was kept; a character split by a cut is dropped whole.
    #[must_use]
    pub fn parts(&self) -> Captured {
        let (tail_a, tail_b) = self.tail.as_slices();
        if self.dropped == 0 {
            let mut all = self.head.clone();
            all.extend_from_slice(tail_a);
            all.extend_from_slice(tail_b);
            return Captured {
                head: String::from_utf8_lossy(&all).into_owned(),
                dropped: 0,
                tail: String::new(),
            };
        }
        let mut tail = Vec::with_capacity(self.tail.len());
        tail.extend_from_slice(tail_a);
        tail.extend_from_slice(tail_b);
        let head_end = whole_chars_end(&self.head);
        let tail_start = tail
            .iter()
            .take(3)
            .take_while(|b| is_continuation(**b))
            .count();
        let split = (self.head.len() - head_end + tail_start) as u64;
        Captured {
            head: String::from_utf8_lossy(&self.head[..head_end]).into_owned(),
            dropped: self.dropped + split,
            tail: String::from_utf8_lossy(&tail[tail_start..]).into_owned(),
        }
    }
}

fn is_continuation(b: u8) -> bool {
    b & 0xC0 == 0x80
}

/// The length of `b` without a multi-byte character left incomplete at its end.
fn whole_chars_end(b: &[u8]) -> usize {
    let conts = b
        .iter()
        .rev()
        .take(3)
        .take_while(|x| is_continuation(**x))
        .count();
    let Some(&lead) = b.len().checked_sub(conts + 1).and_then(|i| b.get(i)) else {
        return b.len();
    };
    let want = match lead {
        0xC0..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF7 => 4,
        _ => return b.len(),
    };
    if conts + 1 < want {
        b.len() - conts - 1
    } else {
        b.len()
    }
}

fn lock(c: &Mutex<Capture>) -> MutexGuard<'_, Capture> {
    c.lock().unwrap_or_else(PoisonError::into_inner)
}

/// `/bin/sh -c command` in `cwd` in its own process group (so killing the group reaches all
/// it started), stdin null, stdout and stderr piped, in the environment of the secrets rule
/// (`util::env::children_env`: no provider key, no secret-looking name but `shell_env.keep`).
pub fn shell_command(command: &str, cwd: &Path) -> Command {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg("-c")
        .arg(command)
        .current_dir(cwd)
        .env_clear()
        .envs(crate::util::env::children_env())
        // The trace switch is not the command's business either.
        .env_remove("MAGI_CODE_TRACE")
        .env_remove("MAGI_CODE_TRACE_CHILD")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    cmd
}

/// The child's stdout and stderr pipes (those that were piped and not yet taken).
pub fn take_output(child: &mut Child) -> Vec<Box<dyn Read + Send>> {
    let out = child
        .stdout
        .take()
        .map(|p| Box::new(p) as Box<dyn Read + Send>);
    let err = child
        .stderr
        .take()
        .map(|p| Box::new(p) as Box<dyn Read + Send>);
    out.into_iter().chain(err).collect()
}

/// Reads a pipe to its end so the child never blocks, keeping what the capture keeps.
pub fn drain(mut r: impl Read, cap: &Mutex<Capture>) {
    let mut chunk = vec![0u8; 8192];
    loop {
        match r.read(&mut chunk) {
            Ok(0) => return,
            Ok(n) => lock(cap).push(&chunk[..n]),
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// What was captured so far.
#[must_use]
pub fn captured(cap: &Mutex<Capture>) -> Captured {
    lock(cap).parts()
}

/// SIGKILLs the process group that `process_group(0)` made for the child (pgid = its pid).
pub fn kill_group(pid: u32) {
    signal_group(pid, libc::SIGKILL);
}

/// SIGTERMs that process group: a polite stop before [`kill_group`].
pub fn term_group(pid: u32) {
    signal_group(pid, libc::SIGTERM);
}

/// Makes the child `cmd` starts die with the thread that starts it (Linux's parent-death
/// signal): an adapter killed outright leaves no backend behind.
#[allow(unsafe_code)]
pub fn die_with_parent(cmd: &mut Command) {
    // SAFETY: between fork and exec only prctl(2), which is async-signal-safe and touches no
    // memory of this process.
    unsafe {
        cmd.pre_exec(|| {
            if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// SIGINTs that process group: what a terminal's Ctrl-C would send, before [`term_group`].
pub fn int_group(pid: u32) {
    signal_group(pid, libc::SIGINT);
}

// libc::kill has no safe std equivalent for a process group.
#[allow(unsafe_code)]
fn signal_group(pid: u32, sig: libc::c_int) {
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
        libc::kill(-pid, sig);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capture_keeps_both_ends_in_bounded_memory() {
        let mut c = Capture::new(4, 3);
        c.push(b"abcdefg");
        assert_eq!(
            c.parts(),
            Captured {
                head: "abcdefg".into(),
                dropped: 0,
                tail: String::new()
            }
        );
        c.push(b"h");
        let p = c.parts();
        assert_eq!(
            (p.head.as_str(), p.dropped, p.tail.as_str()),
            ("abcd", 1, "fgh")
        );
        c.push(&[b'x'; 100]);
        c.push(b"yz");
        let p = c.parts();
        assert_eq!(
            (p.head.as_str(), p.dropped, p.tail.as_str()),
            ("abcd", 103, "xyz")
        );
        assert!(c.tail.len() <= 3 && c.head.len() <= 4);
    }

    #[test]
    fn capture_drops_characters_split_by_a_cut() {
        // "€" is E2 82 AC: the head ends inside one, the tail starts inside another.
        let mut c = Capture::new(5, 4);
        c.push("ab€".as_bytes()); // 5 bytes: whole
        c.push("€".as_bytes());
        c.push(b"-");
        c.push("€z".as_bytes());
        let p = c.parts();
        // The head "ab€" is whole; the tail keeps the last 4 bytes, "€z".
        assert_eq!((p.head.as_str(), p.tail.as_str()), ("ab€", "€z"));
        assert_eq!(p.dropped, 4);
        let mut c = Capture::new(4, 2);
        c.push("ab€€".as_bytes());
        let p = c.parts();
        // Kept E2 82 | AC E2 | 82 AC: both kept ends are partial characters.
        assert_eq!((p.head.as_str(), p.tail.as_str()), ("ab", ""));
        assert_eq!(p.dropped, 6);
        // Invalid bytes stay lossy, never a panic.
        let mut c = Capture::new(2, 2);
        c.push(&[0xFF, 0xE2, 0x82, 0xFE, 0x80, 0x80]);
        let p = c.parts();
        assert_eq!((p.head.as_str(), p.tail.as_str()), ("\u{fffd}", ""));
        assert_eq!(p.dropped, 5);
    }
}
