//! Reading a stored history for attachment: one bounded, cancellable, held read that validates
//! every record, checks the workspace and builds the projection.

use crate::history::{History, HistoryError, Projection, Reader};
use crate::runtime::Runtime;
use crate::store::{self, Identity, ReadError, SessionId, Sessions};
use crate::util::cancel::Cancel;
use crate::util::notice::Notice;
use protocol_core::limits::{HISTORY_READ_BYTES, HISTORY_READ_LINES};
use protocol_core::ErrorCode;

/// Longest single stored line buffered while reading a history.
pub const MAX_LINE_BYTES: usize = 16 << 20;

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
            HistoryError::Invalid => Self::SessionInvalid,
            HistoryError::TooLarge => Self::HistoryLimit,
        }
    }
}

/// Reads, validates and projects the history of `id`.
pub fn load(rt: &Runtime, id: &SessionId, cancel: &Cancel) -> Result<Loaded, ErrorCode> {
    let sessions = Sessions::new(&rt.root);
    let mut reader = Reader::new(id, true).show_cards(rt.tool_cards);
    let mut cancelled = false;
    let mut n = 0usize;
    let streamed = store::stream_held(
        &sessions.history_path(id),
        HISTORY_READ_BYTES,
        HISTORY_READ_LINES,
        MAX_LINE_BYTES,
        &mut |line| {
            n += 1;
            if n.is_multiple_of(4096) && cancel.is_cancelled() {
                cancelled = true;
                return false;
            }
            reader.line(line)
        },
    )
    .map_err(read_err)?;
    if cancelled || cancel.is_cancelled() {
        return Err(ErrorCode::OperationCancelled);
    }
    let torn = streamed.is_some_and(|s| s.torn);
    let (history, projection) = reader.finish_state(torn)?;
    let summary = history.summary();
    let Some(streamed) = streamed else {
        return Err(ErrorCode::SessionInvalid);
    };
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
        identity: streamed.identity,
        notices,
    })
}
