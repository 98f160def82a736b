//! What can go wrong on the client's side of the pipe, as one value a caller matches on.

use crate::wire::results::ErrorObject;
use std::fmt;

/// Why a typed call, a send or an event read did not give what was asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ClientError {
    /// The backend answered the request with this error code.
    Rejected(ErrorObject),
    /// Nothing arrived within the wait.
    Timeout,
    /// The child closed stdout, or stdin could not be written: the connection is over.
    Closed,
    /// An output frame broke the protocol (not a frame, an unknown frame type or event, a
    /// `seq` gap, a second `instance_id`, an uncorrelated response …); the client fails
    /// closed and refuses everything after it.
    Protocol(&'static str),
    /// A response to a request the client never sent, or with a null `id`, carrying this code.
    Uncorrelated(ErrorObject),
    /// The result did not decode as the method's result type.
    BadResult(&'static str),
    /// The result type asked for is not the result of this method.
    WrongResultType(&'static str),
    /// This request ID was already used in this child (IDs are never reused).
    IdReused,
    /// The ID is not 1–64 bytes of `[A-Za-z0-9._-]`.
    IdInvalid,
    /// This child has had `request_ids` IDs; the next would close it (`request_limit`).
    IdsExhausted,
    /// More events waiting unread than the client buffers.
    Backlog,
    /// A turn's events broke the run rules (see [`super::turn::TurnError`]).
    Turn(super::turn::TurnError),
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Rejected(e) => write!(f, "rejected: {}", e.code),
            Self::Timeout => f.write_str("no answer within the wait"),
            Self::Closed => f.write_str("the connection is closed"),
            Self::Protocol(why) => write!(f, "protocol violation: {why}"),
            Self::Uncorrelated(e) => write!(f, "uncorrelated response: {}", e.code),
            Self::BadResult(m) => write!(f, "{m}: the result does not decode"),
            Self::WrongResultType(m) => write!(f, "{m}: not this method's result type"),
            Self::IdReused => f.write_str("request ID already used in this child"),
            Self::IdInvalid => f.write_str("request ID outside the ID grammar"),
            Self::IdsExhausted => f.write_str("request IDs of this child exhausted"),
            Self::Backlog => f.write_str("too many unread events"),
            Self::Turn(e) => write!(f, "turn: {e}"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<super::turn::TurnError> for ClientError {
    fn from(e: super::turn::TurnError) -> Self {
        Self::Turn(e)
    }
}

impl ClientError {
    /// The backend's error code when it rejected the request.
    #[must_use]
    pub fn code(&self) -> Option<&str> {
        match self {
            Self::Rejected(e) | Self::Uncorrelated(e) => Some(&e.code),
            _ => None,
        }
    }
}
