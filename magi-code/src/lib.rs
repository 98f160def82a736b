//! The magi-code backend: `serve --stdio` and everything behind it.

pub mod backend;
pub mod cancel;
pub mod catalog;
pub mod cli;
pub mod discovery;
pub mod history;
pub mod ops;
pub mod paging;
pub mod providers;
pub mod redact;
pub mod runner;
pub mod serve;
pub mod sessions;
pub mod settings;
pub mod startup;
pub mod store;
pub mod toolcall;
pub mod tools;
