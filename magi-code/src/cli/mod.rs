//! People's clients of `serve --stdio`: the terminal chat (with its Ctrl-C handling), the demo
//! and trace replay, all on [`crate::client`]. Never on the serve path.

pub mod chat;
mod chat_view;
pub mod demo;
pub mod doctor;
mod interrupt;
pub mod mcp;
mod mcp_approve;
pub mod replay;
mod retention;
pub mod schema;
pub mod tui;

pub use chat::chat;
pub use demo::demo;
pub use doctor::doctor;
pub use replay::replay;
pub use schema::schema;
