//! One run as a sans-IO state machine (`docs/architecture.md`, "The run machine"): inputs in
//! ([`Run::handle`], with the time they happened), outputs out ([`Run::poll_output`]), no
//! thread, clock, file, socket or process. A driver (`agent::drive`) carries the outputs out —
//! appends, model requests, tool runs, hooks, waits for answers — and feeds their outcomes
//! back; a virtual clock drives it in tests exactly as the real one does.
//!
//! # Driving rules
//!
//! [`Run::poll_output`] is the only way out of the machine. After [`Run::start`] and after
//! every [`Run::handle`] the driver drains it, in order, with one drain wherever it is (its
//! main loop, a streaming step's events, an open Code Mode cell):
//! 1. every output but the last is carried out at once, none dropped: [`Output::Append`] is
//!    answered with [`Input::Appended`], [`Output::Step`] streams (each event fed as it
//!    comes, the run drained after each), [`Output::Tools`] and [`Output::Hook`] run (cut
//!    short at their `until`, a cell's clock), [`Output::Answer`] and
//!    [`Output::Interrupt`] go to the open cell, events and deltas go to the client;
//! 2. a drain ends with [`Output::Idle`]: what the run waits for. With a
//!    [`Waiting`] the driver blocks on that answer until `until` and feeds it, or
//!    [`Input::Tick`] at `until`; while a step streams, `stop_streaming` ends the stream;
//!    with nothing to wait for, the run waits for the outcome of what the driver runs;
//! 3. [`Output::Finished`] is the run's last output; `poll_output` is `None` after it.
//!
//! ```
//! use magi_code::history::room::Room;
//! use magi_code::providers::ModelEvent;
//! use magi_code::run::{Input, Output, Run, Stored};
//! let mut run = Run::new(magi_code::run::fuzzing::config(u64::MAX, Default::default()));
//! run.start(0);
//! let mut now = 0;
//! let finished = loop {
//!     now += 1;
//!     let input = match run.poll_output().expect("unfinished") {
//!         Output::Append { .. } => Input::Appended(Ok(Stored {
//!             room: Some(Room::unbounded()),
//!             ..Stored::default()
//!         })),
//!         Output::Step(_) => {
//!             run.handle(Input::Model(ModelEvent::TextDelta("hi".into())), now);
//!             Input::StepEnded(Ok(()))
//!         }
//!         Output::Finished(f) => break f,
//!         Output::Idle(idle) => panic!("nothing to wait for: {idle:?}"),
//!         _ => continue,
//!     };
//!     run.handle(input, now);
//! };
//! assert_eq!(finished.error_code, None, "{finished:?}");
//! assert_eq!(run.poll_output(), None);
//! ```

pub mod batch;
pub mod call;
pub mod callbacks;
pub mod calls;
pub mod cell;
pub mod client;
pub mod compacting;
pub mod compaction;
pub mod content;
#[cfg(any(test, feature = "testing"))]
pub mod fuzzing;
pub mod hooks;
pub mod io;
pub mod machine;
pub mod nested;
pub mod outcome;
pub mod repeats;
pub mod segment;
pub mod shared;
pub mod step;
pub mod voice;

#[cfg(test)]
mod tests;

pub use io::{
    AppendKind, CellJob, CellTool, CodeConfig, Config, End, HookEnd, Idle, Input, InterruptReason,
    Output, Policies, Reply, State, StepRequest, Stored, ToolEnd, ToolJob, Waiting,
};
pub use machine::Run;
pub use outcome::{Finished, Persistence, RunOutcome};
