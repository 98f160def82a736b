//! Reading a stored history for attachment: one held, cancellable read of its window
//! (`decisions.md` 47) that validates every record read, checks the workspace and builds the
//! projection. Its cost is the window's, whatever the file's length.

use crate::history::trust::Items;
use crate::history::window::{first_record_end, Bounds, TailScan, Window, FIRST_RECORD_BYTES};
use crate::history::{History, HistoryError, Projection};
use crate::runtime::Runtime;
use crate::store::{HeldFile, Identity, ReadError, SessionId, Sessions};
use crate::util::cancel::Cancel;
use crate::util::notice::Notice;
use protocol_core::ErrorCode;
use std::path::Path;

/// A validated history.
pub struct Loaded {
    /// The state derived from it, to be extended by later appends.
    pub history: History,
    /// The display projection.
    pub projection: Projection,
    /// The file's identity as read.
    pub identity: Identity,
    /// Notices of the read (`cwd_unverified`).
    pub notices: Vec<Notice>,
}

fn read_err(e: ReadError) -> ErrorCode {
    match e {
        ReadError::Missing => ErrorCode::SessionMissing,
        ReadError::Unsafe => ErrorCode::SessionInvalid,
        ReadError::TooLarge => ErrorCode::HistoryLimit,
    }
}

impl From<HistoryError> for ErrorCode {
    fn from(e: HistoryError) -> Self {
        match e {
            HistoryError::Invalid | HistoryError::Evicted => Self::SessionInvalid,
            HistoryError::TooLarge => Self::HistoryLimit,
        }
    }
}

/// Why a window read stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowError {
    /// The file could not be read safely.
    Read(ReadError),
    /// A record was refused.
    History(HistoryError),
    /// Cancelled between lines.
    Cancelled,
}

impl From<WindowError> for ErrorCode {
    fn from(e: WindowError) -> Self {
        match e {
            WindowError::Read(r) => read_err(r),
            WindowError::History(h) => h.into(),
            WindowError::Cancelled => Self::OperationCancelled,
        }
    }
}

/// Finds the read window of `file` by scanning back from its end.
pub fn find_window(file: &HeldFile, bounds: Bounds) -> Result<Window, WindowError> {
    let mut scan = TailScan::new(file.len(), bounds);
    let mut buf = Vec::new();
    while let Some((at, n)) = scan.want() {
        buf.resize(n, 0);
        file.read_at(at, &mut buf).map_err(WindowError::Read)?;
        scan.feed(&buf);
    }
    match scan.outcome() {
        Some(Ok(w)) => Ok(w),
        Some(Err(e)) => Err(WindowError::History(e)),
        None => Err(WindowError::History(HistoryError::Invalid)),
    }
}

/// The window as the metadata `m` places it: from its window start (a line start at or
/// before the true window's, which the state reaches by sliding as it reads) to the last LF,
/// found in the file's last 1 MiB; `None` when that holds no LF after the cover.
fn window_after(file: &HeldFile, m: &crate::history::meta::Meta) -> Option<Window> {
    let len = file.len();
    if m.window_start > 0 {
        // The start must begin a line (metadata edited by hand is not to be followed).
        let mut before = [0u8; 1];
        file.read_at(m.window_start - 1, &mut before).ok()?;
        if before[0] != b'\n' {
            return None;
        }
    }
    let from = len.saturating_sub(1 << 20).max(m.covered);
    let mut tail = vec![0u8; usize::try_from(len - from).ok()?];
    file.read_at(from, &mut tail).ok()?;
    let end = match memchr::memrchr(b'\n', &tail) {
        Some(i) => from + i as u64 + 1,
        None if from == m.covered => m.covered,
        None => return None,
    };
    Some(Window {
        start: m.window_start,
        end,
        whole: m.window_start == 0,
        torn: end < len,
        lines: 0,
    })
}

/// Feeds `h` the window of the held file: its first record beside a window that does not
/// reach it, then every line of the window. Checks `cancel` every 4,096 lines.
pub fn feed_window(
    file: &HeldFile,
    w: &Window,
    h: &mut History,
    cancel: &Cancel,
) -> Result<(), WindowError> {
    if !w.whole {
        let mut head = vec![0u8; usize::try_from(FIRST_RECORD_BYTES.min(w.start)).unwrap_or(0)];
        file.read_at(0, &mut head).map_err(WindowError::Read)?;
        let end = first_record_end(&head).ok_or(WindowError::History(HistoryError::Invalid))?;
        let end = usize::try_from(end).unwrap_or(usize::MAX);
        h.line(&head[..end - 1]).map_err(WindowError::History)?;
        h.skip_to(w.start);
    }
    let mut trust = h.trust();
    let (mut refused, mut cancelled, mut n) = (None, false, 0usize);
    let read = file.lines(w.start, w.end, &mut |line| {
        n += 1;
        if n.is_multiple_of(4096) && cancel.is_cancelled() {
            cancelled = true;
            return false;
        }
        match h.line_trusted(line, &mut trust) {
            Ok(()) => true,
            Err(e) => {
                refused = Some(e);
                false
            }
        }
    });
    if cancelled || cancel.is_cancelled() {
        return Err(WindowError::Cancelled);
    }
    if let Some(e) = refused {
        return Err(WindowError::History(e));
    }
    if !read.map_err(WindowError::Read)? {
        return Err(WindowError::History(HistoryError::Invalid));
    }
    h.finish_read(w.torn);
    Ok(())
}

/// Reads the window of the history at `path` into `h` (fresh): the state, the file's
/// identity and where the window lay.
pub fn read_window(
    path: &Path,
    h: &mut History,
    bounds: Bounds,
    cancel: &Cancel,
) -> Result<(Identity, Window), WindowError> {
    let file = HeldFile::open(path).map_err(WindowError::Read)?;
    let w = find_window(&file, bounds)?;
    feed_window(&file, &w, h, cancel)?;
    let identity = file.finish().map_err(WindowError::Read)?;
    Ok((identity, w))
}

/// Reads, validates and projects the history of `id`, keeping the replay `items` say.
pub fn load_with(
    rt: &Runtime,
    id: &SessionId,
    items: Items,
    cancel: &Cancel,
) -> Result<Loaded, ErrorCode> {
    let sessions = Sessions::new(&rt.root);
    let mut history = History::new(id, true);
    history.show_cards(rt.tool_cards);
    history.keep_items(items);
    let file = HeldFile::open(&sessions.history_path(id)).map_err(read_err)?;
    // The owner's derived metadata, when it still describes this file, tells what lies before
    // the window (its record count, title, preferences), where the window starts at the
    // earliest, and which covered lines need no parse.
    let meta = super::meta::read_verified(&sessions, id, &file).0;
    let w = match meta.as_ref().and_then(|m| window_after(&file, m)) {
        Some(w) => w,
        None => find_window(&file, Bounds::READ)?,
    };
    if let Some(m) = meta {
        history.seed(m);
    }
    feed_window(&file, &w, &mut history, cancel)?;
    let identity = file.finish().map_err(read_err)?;
    let projection = history.project()?;
    let summary = history.summary();
    if !rt.is_workspace(&summary.cwds) {
        return Err(ErrorCode::CwdMismatch);
    }
    let mut notices = Vec::new();
    if summary.cwds.is_empty() {
        notices.push(Notice::CwdUnverified);
    }
    Ok(Loaded {
        history,
        projection,
        identity,
        notices,
    })
}

/// [`load_with`], freeing replay items a compaction made unneeded.
pub fn load(rt: &Runtime, id: &SessionId, cancel: &Cancel) -> Result<Loaded, ErrorCode> {
    load_with(rt, id, Items::Needed, cancel)
}
