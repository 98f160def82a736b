<<<<<<< HEAD
//! Code Mode (`code-mode.md`): the `exec` tool, whose JavaScript calls the session's tools.

pub mod decl;
pub mod text;
=======
//! Code Mode (`code-mode.md`): the `code-host` helper process that runs the model's
//! JavaScript in QuickJS, its line protocol, and the backend's client of it.

mod cpu;
mod engine;
mod heap;
pub mod helper;
pub mod host;
pub mod protocol;
mod source;
mod state;
>>>>>>> h-codehost
