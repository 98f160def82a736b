//! What a model may call: the built-in tools, their definitions and policy classes, the
//! one tool table a run offers, and bounded outcomes.

pub mod builtin;
pub mod card;
pub mod outcome;
pub mod registry;

pub use builtin::{class, describe, run, specs, Builtin};
pub use card::{Card, CardStatus};
pub use outcome::{ToolClass, ToolDetails, ToolOutcome, OUTPUT_BYTES};
pub use registry::{AddError, ToolKind, ToolRegistry, TOOL_NAME_BYTES};
