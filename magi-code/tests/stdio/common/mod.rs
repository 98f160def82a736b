//! Helpers for integration tests that spawn the real `magi-code serve --stdio` binary over
//! real pipes.
//!
//! Every read is bounded: stdout and stderr are drained by reader threads into channels that
//! are read with `recv_timeout`, stdin is fed by a writer thread (so a server that stops
//! reading cannot block the test thread), and every wait for exit polls against a deadline and
//! kills the child on expiry. Every output frame is checked against the envelope the protocol
//! promises (fields, `seq` continuity, one `instance_id`, `{"code"}`-only errors).

pub mod anthropic_sse;
mod asserts;
mod bodies;
mod client;
pub mod fake_llm;
pub mod fake_mcp;
mod fixtures;
mod frames;
#[path = "../../support/npm.rs"]
pub mod npm;
pub mod poll;
#[path = "../../support/procs.rs"]
pub mod procs;
pub mod pty;
pub mod responses_sse;
pub mod rotating;
pub mod schema;
mod server;
mod spec;
mod turn;

pub use asserts::*;
pub use bodies::*;
pub use client::*;
pub use fixtures::*;
pub use frames::*;
pub use server::*;
pub use spec::*;
pub use turn::*;
