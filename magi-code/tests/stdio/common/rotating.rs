//! A rotating token endpoint and a watch on a folder's writes: the kill -9 loops of token
//! refreshes (issue 25 item 8) kill a child once its answer's temp file is written.

use super::fake_mcp::read_request;
use serde_json::{json, Value};
use std::io::{BufReader, Write};
use std::net::TcpListener;
use std::sync::{Arc, Mutex};

/// A token endpoint that rotates as real ones do: it takes only the refresh token it issued
/// last (`first` at the start), answers `answer(n, refresh)` with the `n`th new one, and
/// counts the requests naming any other (each a rotation that was lost).
pub struct Rotating {
    pub url: String,
    /// Pairs issued, and the refresh token taken now.
    pub issued: Arc<Mutex<(u64, String)>>,
    /// Requests refused with a spent refresh token.
    pub refused: Arc<Mutex<u64>>,
}

impl Rotating {
    pub fn start(first: &str, answer: fn(u64, &str) -> Value) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://127.0.0.1:{}/token", l.local_addr().unwrap().port());
        let issued = Arc::new(Mutex::new((0, first.to_owned())));
        let refused = Arc::new(Mutex::new(0));
        let (i, r) = (issued.clone(), refused.clone());
        std::thread::spawn(move || {
            for conn in l.incoming().flatten() {
                let mut w = conn.try_clone().unwrap();
                let Some((_, _, form)) = read_request(&mut BufReader::new(conn)) else {
                    continue;
                };
                // A form or a JSON body: the refresh token is in it as it is.
                let body = String::from_utf8_lossy(&form).into_owned();
                let mut st = i.lock().unwrap();
                let (status, body) = if body.contains(&st.1) {
                    st.0 += 1;
                    st.1 = format!("rt-{}-Kd8Wq", st.0);
                    (200, answer(st.0, &st.1))
                } else {
                    *r.lock().unwrap() += 1;
                    (400, json!({"error": "invalid_grant"}))
                };
                drop(st);
                let text = body.to_string();
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                    text.len()
                );
                drop(
                    w.write_all(head.as_bytes())
                        .and_then(|()| w.write_all(text.as_bytes())),
                );
            }
        });
        Self {
            url,
            issued,
            refused,
        }
    }
}

/// Writes to files in one folder, seen through inotify: the kill loops' clock.
pub struct Writes(std::os::fd::OwnedFd);

impl Writes {
    #[allow(unsafe_code)]
    pub fn watch(dir: &std::path::Path) -> Self {
        use std::os::fd::FromRawFd;
        use std::os::unix::ffi::OsStrExt;
        let path = std::ffi::CString::new(dir.as_os_str().as_bytes()).unwrap();
        // SAFETY: plain syscalls on a fresh descriptor that the OwnedFd then owns alone.
        unsafe {
            let fd = libc::inotify_init1(libc::IN_NONBLOCK | libc::IN_CLOEXEC);
            assert!(fd >= 0);
            assert!(libc::inotify_add_watch(fd, path.as_ptr(), libc::IN_MODIFY) >= 0);
            Self(std::os::fd::OwnedFd::from_raw_fd(fd))
        }
    }

    /// Waits (bounded) until a file whose name starts with `prefix` is written.
    #[allow(unsafe_code)]
    pub fn until(&self, prefix: &str) -> bool {
        use std::os::fd::AsRawFd;
        let end = std::time::Instant::now() + crate::common::STEP;
        let mut buf = [0u8; 4096];
        while std::time::Instant::now() < end {
            let mut p = libc::pollfd {
                fd: self.0.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd; a read into a buffer of the length given.
            let n = unsafe {
                libc::poll(&mut p, 1, 100);
                libc::read(self.0.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len())
            };
            let Ok(n) = usize::try_from(n) else { continue };
            let mut at = 0;
            while at + 16 <= n {
                let len = u32::from_ne_bytes(buf[at + 12..at + 16].try_into().unwrap()) as usize;
                let name = &buf[at + 16..(at + 16 + len).min(n)];
                if name.starts_with(prefix.as_bytes()) {
                    return true;
                }
                at += 16 + len;
            }
        }
        false
    }
}
