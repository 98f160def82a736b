//! Configuration: the merged, validated settings of one child and its instructions.

pub mod instructions;
pub mod settings;

pub use settings::{CompatProvider, McpServer, Policy, Settings, WireApi};
