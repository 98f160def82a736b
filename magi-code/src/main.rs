//! The `magi-code` binary.

use clap::{Parser, Subcommand};
use std::path::PathBuf;

#[derive(Parser)]
#[command(
    name = "magi-code",
    version,
    about = "A coding-agent backend for editor and desktop frontends"
)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Serve the magi-code.local-agent protocol on stdin/stdout pipes (`serve --stdio`).
    Serve {
        /// Required: serve over the inherited stdio pipes.
        #[arg(long)]
        stdio: bool,
    },
    /// Run a short real client exchange against `serve --stdio` and print the frames.
    Demo,
    /// Serve the Agent Client Protocol (v1) on stdin/stdout for editors (Zed, JetBrains,
    /// Neovim, Emacs): each session is a `serve --stdio` child (docs/acp.md).
    Acp,
    /// Chat in the terminal: each input line is a turn; replies stream as they come.
    Chat {
        /// Reopen this saved session instead of creating one.
        #[arg(long)]
        session: Option<String>,
    },
    /// Check what initialization reads (settings, keys, instructions, profiles, MCP
    /// approvals) and print each problem with its file and fix; exit 1 if any.
    Doctor {
        /// Print the findings as one JSON array of {severity, file, key, message, fix}.
        #[arg(long)]
        json: bool,
    },
    /// Print the protocol's JSON Schema (docs/schema/magi-code.local-agent.v1.json).
    Schema {
        /// Print the TypeScript declarations (docs/schema/protocol.d.ts) instead.
        #[arg(long)]
        typescript: bool,
    },
    /// Replay a captured trace through the engine and report differences.
    Replay {
        /// The trace file (JSONL, see docs/trace-format.md).
        file: PathBuf,
    },
    /// The user's MCP servers: list, approve, log in to, log out of.
    Mcp {
        #[command(subcommand)]
        action: magi_code::cli::mcp::McpCommand,
    },
    /// The Code Mode helper the backend starts itself (`code-mode.md` 4): not for people.
    #[command(hide = true)]
    CodeHost,
}

fn main() {
    let args: Vec<std::ffi::OsString> = std::env::args_os().collect();
    if args.get(1).is_some_and(|a| a == "serve") {
        // Exactly `serve --stdio`: anything else exits 2 before any runtime side effect.
        if args.len() != 3 || args[2] != "--stdio" {
            eprintln!("usage: magi-code serve --stdio");
            std::process::exit(2);
        }
        if io_driver::launch_check().is_err() {
            eprintln!("magi-code serve --stdio: stdin and stdout must be pipes");
            std::process::exit(2);
        }
        std::process::exit(magi_code::serve::serve());
    }
    let cli = Cli::parse();
    let code = match cli.command {
        Cmd::Serve { .. } => 2,
        Cmd::Demo => magi_code::cli::demo(),
        Cmd::Acp => magi_code::acp::acp(),
        Cmd::Doctor { json } => magi_code::cli::doctor(json),
        Cmd::Chat { session } => magi_code::cli::chat(session.as_deref()),
        Cmd::Schema { typescript } => magi_code::cli::schema(typescript),
        Cmd::Replay { file } => magi_code::cli::replay(&file),
        Cmd::Mcp { action } => magi_code::cli::mcp::mcp(&action),
        Cmd::CodeHost => magi_code::codemode::host::code_host(),
    };
    std::process::exit(code);
}
