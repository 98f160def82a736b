//! Model adapters: the offline `scripted` provider and the HTTP providers. HTTP requests block
//! the run's thread; everything they parse is bounded.

pub mod anthropic;
pub mod body;
pub mod claude;
pub mod claude_cli;
pub mod claude_proc;
pub mod claude_title;
pub mod cli_auth;
pub mod codex;
#[cfg(feature = "testing")]
pub mod fuzzing;
pub mod http;
pub mod model;
pub mod openai_chat;
pub mod openai_responses;
pub mod scripted;
pub mod sse;
pub mod target;

pub use http::HttpModel;
pub use model::{ModelClient, ModelEvent, ModelRequest, StepFailure, StepSink, WireApi};
pub use scripted::{load_script, ScriptedModel, Step};
pub use target::{api_key, provider_ready, target, Api, Target};
