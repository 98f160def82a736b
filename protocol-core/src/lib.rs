//! Sans-IO engine of the `magi-code.local-agent` protocol, version 1.
//!
//! The engine owns framing, the strict envelope, request identity, capability negotiation,
//! the state machine (`Uninitialized / Starting / Ready / Failed / Stopping`), the bounded
//! output queue with its deadlines, and the stopping sequence. It reads no clock, spawns no
//! thread and touches no file descriptor: bytes and timestamps go in, frames and worker
//! commands come out.
//!
//! # Run-loop contract
//!
//! After every `handle_*` call the driver:
//! 1. drains [`Engine::poll_output`] until `None`, handing [`Output::Worker`] commands to the
//!    backend and exiting on [`Output::Exit`];
//! 2. writes [`Engine::pending_write`] while the pipe accepts bytes, reporting each accepted
//!    count with [`Engine::handle_written`] (or [`Engine::handle_output_error`] on failure);
//! 3. reads one batch of at most [`limits::READ_BATCH_BYTES`] bytes into
//!    [`Engine::handle_input`] only while [`Engine::wants_input`] is true (flow control,
//!    `decisions.md` 27), and reports EOF with [`Engine::handle_eof`];
//! 4. feeds worker events with [`Engine::handle_worker_event`];
//! 5. sleeps until input, output readiness, a worker wake-up or [`Engine::poll_timeout`], and
//!    calls [`Engine::handle_timeout`] with the current time when that passes.
//!
//! ```
//! use protocol_core::{Config, Engine, Time};
//! let mut e = Engine::new(Config::default(), "00000000-0000-4000-8000-000000000000", Time(0));
//! e.handle_input(b"{\"protocol\":\"magi-code.local-agent\",\"version\":1,\"id\":\"s\",\"method\":\"shutdown\",\"params\":{}}\n", Time(1));
//! let frame = e.pending_write().unwrap().to_vec();
//! assert!(frame.ends_with(b"\"result\":{\"state\":\"stopping\"}}\n"));
//! e.handle_written(frame.len(), Time(2));
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod caps;
pub mod client_tools;
pub mod encode;
pub mod engine;
pub mod envelope;
pub mod error;
pub mod framing;
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod ids;
pub mod json;
pub mod limits;
pub mod methods;
pub mod outq;
#[cfg(feature = "testing")]
pub mod sim;
pub mod time;
pub mod trace;
pub mod worker;

pub use caps::{Capability, CapabilitySet};
pub use client_tools::ClientToolDef;
pub use engine::{Config, Engine, Output, State, StopPhase, Stopping};
pub use error::{ErrorCode, StopReason};
pub use ids::RequestId;
pub use methods::Request;
pub use time::Time;
pub use worker::{OpOutcome, ReadyView, WorkerCommand, WorkerEvent};
