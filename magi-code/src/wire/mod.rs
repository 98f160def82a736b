//! The wire contract of `magi-code.local-agent` version 1 as Rust types: every request's
//! params, every result, the error object, every event's data and the frames around them.
//!
//! `magi-code schema` prints the JSON Schema built from these types ([`schema_text`]) and
//! `magi-code schema --typescript` the declarations built from that schema ([`typescript`]);
//! both are committed under `docs/schema/` (`docs/schema/README.md`). Imports only
//! `protocol_core` and serde/schemars: a client can build on this module alone.

pub mod common;
pub mod diagnostics;
pub mod events;
pub mod extensions;
pub mod frames;
pub mod requests;
pub mod results;
pub mod tool_cards;
pub mod ts;

pub use common::body;
pub use diagnostics::DiagnosticCode;
pub use frames::{
    schema, Call, Event, EventFrame, RequestFrame, ResponseBody, ResponseFrame, EVENTS, METHODS,
};

/// The schema as committed: pretty JSON, keys in byte order, one final LF.
#[must_use]
pub fn schema_text() -> String {
    let mut s = serde_json::to_string_pretty(&schema()).unwrap_or_default();
    s.push('\n');
    s
}

/// The TypeScript declarations as committed, generated from [`schema`].
#[must_use]
pub fn typescript() -> String {
    ts::emit(&schema())
}
