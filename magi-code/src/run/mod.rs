//! One run as a sans-IO state machine (`docs/architecture.md`, "The run machine"): inputs in
//! ([`Run::handle`], with the time they happened), outputs out ([`Run::poll_output`]), no
//! thread, clock, file, socket or process. A driver (`agent::drive`) carries the outputs out —
//! appends, model requests, tool runs, hooks, waits for answers — and feeds their outcomes
//! back; a virtual clock drives it in tests exactly as the real one does.

pub mod batch;
pub mod call;
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
    AppendKind, CellJob, CellTool, CodeConfig, CodeResult, Config, End, HookEnd, Input,
    InterruptReason, Output, Policies, State, StepRequest, Stored, ToolEnd, ToolJob, Waiting,
};
pub use machine::Run;
pub use outcome::{Finished, Persistence, RunOutcome};
