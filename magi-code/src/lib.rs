//! The magi-code backend: `serve --stdio` and everything behind it, in domain folders whose
//! imports run one way only (`docs/architecture.md`).

pub mod acp;
pub mod agent;
pub mod catalog;
pub mod cli;
pub mod client;
pub mod codemode;
pub mod config;
pub mod discovery;
pub mod history;
pub mod mcp;
pub mod providers;
pub mod run;
pub mod runtime;
pub mod serve;
pub mod session;
pub mod startup;
pub mod store;
pub mod tools;
pub mod util;
pub mod wire;
pub mod worker;
