//! Ctrl-C for the terminal chat: SIGINT sets a flag that the chat's loops poll, instead of
//! killing the process, so a running turn can be cancelled and the server shut down cleanly.

use std::sync::atomic::{AtomicBool, Ordering};

/// Set by the SIGINT handler; taken by [`take`].
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_sigint(_signal: libc::c_int) {
    // An atomic store is async-signal-safe: no lock, no allocation.
    INTERRUPTED.store(true, Ordering::SeqCst);
}

/// Installs the SIGINT handler for this process; false when the system refused it (Ctrl-C
/// then keeps its default meaning).
// The chat's one unsafe call: std has no safe way to catch a signal.
#[allow(unsafe_code)]
pub fn install() -> bool {
    // SAFETY: `sigaction` is zeroed (a valid "no flags, empty mask" value on Linux), its mask
    // is then initialized by `sigemptyset`, and the handler is an `extern "C"` function that
    // only stores to a static atomic, which is async-signal-safe. Pointers passed are to live
    // locals; the old action is not requested (null).
    unsafe {
        let mut action: libc::sigaction = std::mem::zeroed();
        action.sa_sigaction = on_sigint as extern "C" fn(libc::c_int) as libc::sighandler_t;
        // SA_RESTART: reads the chat does not poll are resumed, never failed with EINTR.
        action.sa_flags = libc::SA_RESTART;
        libc::sigemptyset(&mut action.sa_mask);
        libc::sigaction(libc::SIGINT, &action, std::ptr::null_mut()) == 0
    }
}

/// Whether Ctrl-C was pressed since the last call; clears the flag.
pub fn take() -> bool {
    INTERRUPTED.swap(false, Ordering::SeqCst)
}
