//! What a model may call: the built-in tools, their policy classes and bounded outcomes.

pub mod builtin;
pub mod outcome;

pub use builtin::{class, describe, run};
pub use outcome::{ToolClass, ToolOutcome, OUTPUT_BYTES};
