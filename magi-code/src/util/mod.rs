//! Helpers that know nothing of the rest of the crate: the tool output bound, cancellation,
//! clocks, redaction, paging, a server-sent events decoder, text cutting, time, child processes
//! and their environment, a bounded HTTP agent, base64url, IDs and notice codes.

pub mod b64;
pub mod bound;
pub mod cancel;
pub mod clock;
pub mod env;
pub mod http;
pub mod ids;
pub mod notice;
pub mod paging;
pub mod proc;
pub mod redact;
pub mod schema;
pub mod sse;
pub mod text;
pub mod time;
