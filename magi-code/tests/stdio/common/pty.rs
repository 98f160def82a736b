//! Pseudo-terminals for the tests that need a terminal on a child's stdin or stdout.

use std::os::fd::{FromRawFd, OwnedFd};

/// A new pty's (master, slave), sized `rows` × `cols` when given.
pub fn openpty(size: Option<(u16, u16)>) -> (OwnedFd, OwnedFd) {
    let (mut master, mut slave) = (0, 0);
    let size = size.map(|(ws_row, ws_col)| libc::winsize {
        ws_row,
        ws_col,
        ws_xpixel: 0,
        ws_ypixel: 0,
    });
    let size_ptr = size.as_ref().map_or(std::ptr::null(), std::ptr::from_ref);
    // SAFETY: openpty writes two new descriptors into the ints (and reads the size if one is
    // given, alive for the call); we take ownership of both descriptors.
    #[allow(unsafe_code)]
    unsafe {
        let rc = libc::openpty(
            &mut master,
            &mut slave,
            std::ptr::null_mut(),
            std::ptr::null(),
            size_ptr,
        );
        assert_eq!(rc, 0, "openpty");
        (OwnedFd::from_raw_fd(master), OwnedFd::from_raw_fd(slave))
    }
}
