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
pub mod frames;
pub mod requests;
pub mod results;
pub mod tool_cards;
pub mod ts;

pub use diagnostics::DiagnosticCode;
pub use frames::{
    schema, Call, Event, EventFrame, RequestFrame, ResponseBody, ResponseFrame, EVENTS, METHODS,
};

/// A frame body (a result, an event's data) as JSON: its `wire` type, serialized, so the
/// compiler and the schema check its shape rather than a hand-written `json!`.
#[must_use]
pub fn body<T: serde::Serialize>(value: &T) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

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
