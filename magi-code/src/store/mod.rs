//! Storage primitives under `MC_HOME`: paths built only from checked session IDs, safe
//! held-file reads, lease files, and durable appends and replacements.

pub mod append;
pub mod held;
pub mod lease;
pub mod paths;
pub mod replace;

pub use append::Appender;
pub use held::{read_held, stream_held, Held, HeldFile, Identity, ReadError, Streamed};
pub use lease::{Lease, LeaseError};
pub use paths::{LeaseKind, SessionId, Sessions};
pub use replace::{adopt_leftover, replace_atomically, replace_unsynced, sync_dir, Sweep};
