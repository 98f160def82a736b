//! Configuration: the merged, validated settings of one child.

pub mod settings;

pub use settings::{CompatProvider, McpServer, Policy, Settings};
