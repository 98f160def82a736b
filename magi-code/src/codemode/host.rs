//! `magi-code code-host`: the helper process (`code-mode.md` 4). It reads [`ToHost`] lines on
//! stdin, runs one cell at a time in a fresh engine context and answers with [`FromHost`]
//! lines on stdout. A reader thread decodes stdin so that an `interrupt` reaches a busy cell.

use super::engine::{self, Heard, Interrupt, Keep, Link};
use super::protocol::{
    encode, Cell, CellState, Decoder, Done, FromHost, InterruptReason, ToHost, CODE_BYTES,
};
use super::state::Issued;
use crossbeam_channel::{Receiver, Sender};
use std::io::{Read, Write};

/// What the reader thread passes on.
enum Incoming {
    Cell(Box<Cell>),
    Heard(Heard),
}

/// Runs the helper until stdin ends or breaks the protocol; the exit code.
#[must_use]
pub fn code_host() -> i32 {
    close_inherited_fds();
    let interrupt = Interrupt::default();
    let (tx, rx) = crossbeam_channel::unbounded();
    let reader_interrupt = interrupt.clone();
    let spawned = std::thread::Builder::new()
        .name("code-host-stdin".into())
        .spawn(move || read_stdin(&tx, &reader_interrupt));
    if spawned.is_err() {
        return 1;
    }
    let mut keep = Keep::default();
    let mut link = StdLink {
        rx,
        out: std::io::stdout(),
    };
    loop {
        let cell = match link.rx.recv() {
            Ok(Incoming::Cell(c)) => c,
            // Answers and interrupts that come after their cell ended mean nothing now.
            Ok(Incoming::Heard(Heard::Result(_) | Heard::Interrupt(_))) => continue,
            Ok(Incoming::Heard(Heard::Gone)) | Err(_) => return 0,
        };
        let done = if cell.code.len() > CODE_BYTES {
            Some(Done {
                id: cell.id.clone(),
                state: CellState::Failed,
                output: "exec refused: code over 256 KiB".to_owned(),
                calls: 0,
            })
        } else {
            engine::run(&cell, &mut keep, &mut link, &interrupt)
        };
        let Some(done) = done else { return 0 };
        if !link.write(&FromHost::Done(done)) {
            return 0;
        }
    }
}

/// Decodes stdin; an `interrupt` is raised at once (the engine's handler reads it while the
/// code runs) and a cell clears the one before it, in stream order.
fn read_stdin(tx: &Sender<Incoming>, interrupt: &Interrupt) {
    let mut stdin = std::io::stdin().lock();
    let mut decoder = Decoder::new();
    let mut buf = vec![0u8; 64 * 1024];
    'read: loop {
        let n = match stdin.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        decoder.push(&buf[..n]);
        while let Some(m) = decoder.next_message::<ToHost>() {
            let msg = match m {
                Ok(ToHost::Cell(c)) => {
                    interrupt.clear();
                    Incoming::Cell(Box::new(c))
                }
                Ok(ToHost::Result(r)) => Incoming::Heard(Heard::Result(r)),
                Ok(ToHost::Interrupt { reason }) => {
                    interrupt.raise(reason);
                    Incoming::Heard(Heard::Interrupt(reason))
                }
                Err(_) => {
                    // A backend that breaks the protocol is gone: stop the cell and exit.
                    break 'read;
                }
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    }
    interrupt.raise(InterruptReason::Cancel);
    // The receiver may be gone already; nothing is left to tell then.
    drop(tx.send(Incoming::Heard(Heard::Gone)));
}

struct StdLink {
    rx: Receiver<Incoming>,
    out: std::io::Stdout,
}

impl StdLink {
    fn write(&mut self, m: &FromHost) -> bool {
        let mut out = self.out.lock();
        out.write_all(&encode(m)).and_then(|()| out.flush()).is_ok()
    }
}

impl Link for StdLink {
    fn send_call(&mut self, c: &Issued, more: bool) -> bool {
        self.write(&FromHost::Call {
            call: c.call,
            name: c.name.clone(),
            input: c.input.clone(),
            more,
            refused: c.refused.clone(),
        })
    }

    fn wait(&mut self) -> Heard {
        match self.rx.recv() {
            Ok(Incoming::Heard(h)) => h,
            // A cell while one runs breaks the protocol.
            Ok(Incoming::Cell(_)) | Err(_) => Heard::Gone,
        }
    }
}

/// Closes every descriptor but 0, 1 and 2: the backend's own are close-on-exec already, this
/// also drops any its parent let it inherit (`code-mode.md` 8: "it inherits no other
/// descriptor").
fn close_inherited_fds() {
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return;
    };
    let fds: Vec<i32> = dir
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .filter(|fd| *fd > 2)
        .collect();
    for fd in fds {
        close(fd);
    }
}

// The helper's one unsafe call: std cannot close a descriptor it does not own. Closing the
// (by then closed) directory descriptor again fails harmlessly with EBADF.
#[allow(unsafe_code)]
fn close(fd: i32) {
    // SAFETY: nothing in this process owns these descriptors yet (the helper has opened
    // nothing but /proc/self/fd, closed already), so no owner is left with a dangling one.
    unsafe {
        libc::close(fd);
    }
}
