//! People's clients of `serve --stdio`: the terminal chat (with its Ctrl-C handling), the demo
//! and trace replay, and the client module they (and the benchmark and tests) share. Never on
//! the serve path.

pub mod chat;
pub mod client;
pub mod demo;
mod interrupt;
pub mod replay;
mod retention;
pub mod schema;

pub use chat::chat;
pub use demo::demo;
pub use replay::replay;
pub use schema::schema;
