//! Configuration: the merged, validated settings of one child, its instructions, profiles,
//! skills and hook definitions.

pub mod code_mode;
mod codex;
mod files;
pub mod front_matter;
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod hooks;
pub mod instructions;
pub mod invalid;
mod mcp_servers;
pub mod policy;
pub mod profiles;
pub mod providers;
pub mod settings;
pub mod shell_env;
pub mod skills;

pub use code_mode::CodeMode;
pub use hooks::{Hook, Hooks};
pub use policy::Policy;
pub use profiles::Profile;
pub use settings::{CompatProvider, McpServer, Settings, WireApi};
pub use skills::Skill;
