//! Black-box tests of the real `magi-code` binary: every test here spawns it (or a stand-in
//! script, for the harness self-tests) over real pipes, a pty or the command line. One test
//! binary, so `common` is compiled once.

mod common;

mod agent_anthropic;
mod agent_loop;
mod agent_responses;
mod atomic_writes;
mod catalog;
mod chat_cli;
mod client_tools;
mod code_mode;
mod code_mode_nested;
mod code_mode_text;
mod code_mode_wire;
mod codex;
mod compaction;
mod content_limit;
mod doctor;
mod effort;
mod grep;
mod guide;
mod harness;
mod hooks;
mod http;
mod launch;
mod mcp;
mod mcp_cli;
mod mcp_faults;
mod mcp_http;
mod mcp_http_real;
mod mcp_login;
mod mcp_login_real;
mod mcp_offer;
mod mcp_tokens;
mod profiles;
mod redaction;
mod refresh;
mod replay_cli;
mod retention;
mod schema_cli;
mod secrets;
mod selection;
mod sessions;
mod small_window;
mod startup;
mod subagents;
mod titles;
mod tool_cards;
mod tool_input;
mod tool_schema;
mod tools;
mod transport;
mod tty;
mod turns;
mod typed_client;
