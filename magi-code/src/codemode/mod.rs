//! Code Mode (`code-mode.md`): the `exec` tool, whose JavaScript calls the session's tools.

pub mod decl;
pub mod text;
