//! Code Mode (`code-mode.md`): the `exec` tool, whose JavaScript calls the session's tools;
//! the `code-host` helper process that runs it in QuickJS, its line protocol, and the
//! backend's client of it.

mod cpu;
pub mod decl;
mod engine;
mod heap;
pub mod helper;
pub mod host;
pub mod protocol;
mod source;
mod state;
pub mod text;
