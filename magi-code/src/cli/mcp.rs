//! `magi-code mcp list | approve <name> | login <name> | logout <name>` (`backend.md` "MCP
//! servers over HTTP", `decisions.md` 41): the user's MCP servers as the settings define them,
//! for people, outside the protocol. No command prints a token. See `docs/mcp.md` "Commands".

use super::mcp_approve::{approve, Candidate};
use crate::config::settings;
use crate::mcp::oauth::login::{login, LoginConfig};
use crate::mcp::oauth::url::canonical;
use crate::mcp::tokens::{StoreError, Token, Tokens, TOKENS_FILE};
use crate::startup::{storage_root, LaunchEnv};
use clap::Subcommand;
use serde_json::{Map, Value};
use std::path::PathBuf;

/// The `mcp` subcommands.
#[derive(Debug, Subcommand)]
pub enum McpCommand {
    /// Show every configured server: approval, transport and token state (never a token).
    List,
    /// Show a server's definition and hash and, after a yes on a terminal, approve it.
    Approve {
        /// The server's name in settings.
        name: String,
    },
    /// Sign in to an HTTP server with OAuth and save its token.
    Login {
        /// The server's name in settings.
        name: String,
    },
    /// Remove a server's saved token.
    Logout {
        /// The server's name in settings.
        name: String,
    },
}

/// One configured server as the merged settings define it.
#[derive(Debug, Clone)]
struct Def {
    name: String,
    canonical: String,
    hash: String,
    enabled: bool,
    approved: bool,
    /// The definition's keys (from the canonical JSON).
    keys: Map<String, Value>,
}

impl Def {
    fn url(&self) -> Option<&str> {
        self.keys.get("url").and_then(Value::as_str)
    }
}

/// Where the command reads and writes: `MC_HOME` and the merged servers.
struct Context {
    root: PathBuf,
    defs: Vec<Def>,
}

fn fail(code: &str, what: &str) -> i32 {
    eprintln!("magi-code mcp: {what} ({code})");
    1
}

/// Reads the settings as the server does (global, then the cwd's project).
fn context() -> Result<Context, i32> {
    let env = LaunchEnv::from_process();
    let cwd = env
        .cwd
        .as_ref()
        .and_then(|c| std::fs::canonicalize(c).ok())
        .ok_or_else(|| fail("cwd_unavailable", "the working directory is unreadable"))?;
    let root = storage_root(&env, &cwd)
        .ok_or_else(|| fail("storage_unavailable", "neither MC_HOME nor HOME is set"))?;
    let invalid = |_| fail("configuration_invalid", "the settings are invalid");
    let global = settings::read_file(&root.join("settings.json")).map_err(invalid)?;
    let project = settings::read_file(&cwd.join(".magi").join("settings.json")).map_err(invalid)?;
    let s = settings::load(global, project).map_err(invalid)?;
    let defs = s
        .mcp_servers
        .iter()
        .map(|(name, m)| {
            let hash = crate::mcp::digest(&m.canonical);
            Def {
                name: name.clone(),
                approved: s.mcp_approved.contains(&hash),
                hash,
                canonical: m.canonical.clone(),
                enabled: m.enabled,
                keys: serde_json::from_str(&m.canonical).unwrap_or_default(),
            }
        })
        .collect();
    Ok(Context { root, defs })
}

/// Runs one `mcp` subcommand; the process exit code.
#[must_use]
pub fn mcp(cmd: &McpCommand) -> i32 {
    let ctx = match context() {
        Ok(c) => c,
        Err(code) => return code,
    };
    match cmd {
        McpCommand::List => list(&ctx),
        McpCommand::Approve { name } => match find(&ctx, name) {
            Ok(d) => {
                let c = Candidate {
                    name: &d.name,
                    canonical: &d.canonical,
                    hash: &d.hash,
                    approved: d.approved,
                };
                approve(&ctx.root, &c)
            }
            Err(code) => code,
        },
        McpCommand::Login { name } => match find(&ctx, name) {
            Ok(d) => login_to(&ctx, d),
            Err(code) => code,
        },
        McpCommand::Logout { name } => logout(&ctx, name),
    }
}

fn find<'a>(ctx: &'a Context, name: &str) -> Result<&'a Def, i32> {
    ctx.defs.iter().find(|d| d.name == name).ok_or_else(|| {
        fail(
            "mcp_server_unknown",
            "no MCP server of that name is configured",
        )
    })
}

fn store_failed(e: StoreError) -> i32 {
    fail(e.code(), "the token file mcp-tokens.json cannot be used")
}

/// How long until `ms` from now, in words.
fn expires(token: &Token, now_ms: u64) -> String {
    match token.expires_at_ms {
        None => "saved".to_owned(),
        Some(at) if at <= now_ms => "saved, expired".to_owned(),
        Some(at) => {
            let s = (at - now_ms) / 1000;
            let left = match s {
                0..=59 => format!("{s} s"),
                60..=7199 => format!("{} min", s / 60),
                _ => format!("{} h", s / 3600),
            };
            format!("saved, expires in {left}")
        }
    }
}

fn list(ctx: &Context) -> i32 {
    if ctx.defs.is_empty() {
        println!("No MCP servers are configured.");
        return 0;
    }
    // Listing creates nothing: without a token file there is no lock to take.
    let exists = ctx.root.join(TOKENS_FILE).exists();
    let store = match exists.then(|| Tokens::lock(&ctx.root)).transpose() {
        Ok(s) => s,
        Err(e) => return store_failed(e),
    };
    let now = u64::try_from(crate::util::time::now_ms()).unwrap_or(0);
    let width = ctx.defs.iter().map(|d| d.name.len()).max().unwrap_or(0);
    for d in &ctx.defs {
        let approval = match (d.enabled, d.approved) {
            (false, _) => "disabled",
            (true, true) => "approved",
            (true, false) => "not approved",
        };
        let (transport, token) = match d.url() {
            None => ("stdio", "-".to_owned()),
            Some(url) => (
                "http",
                canonical(url)
                    .and_then(|u| store.as_ref()?.get(&d.name, &u).map(|t| expires(t, now)))
                    .unwrap_or_else(|| "none".to_owned()),
            ),
        };
        println!("{:width$}  {approval:12}  {transport:5}  {token}", d.name);
    }
    0
}

fn login_config(d: &Def, url: &str) -> Result<LoginConfig, i32> {
    let Some(oauth) = d.keys.get("oauth").and_then(Value::as_object) else {
        return Err(fail(
            "mcp_oauth_not_configured",
            "the server's definition has no \"oauth\"",
        ));
    };
    let scopes = oauth
        .get("scopes")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|s| s.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    Ok(LoginConfig {
        name: d.name.clone(),
        url: url.to_owned(),
        client_id: oauth
            .get("client_id")
            .and_then(Value::as_str)
            .map(str::to_owned),
        scopes,
        callback_port: oauth
            .get("callback_port")
            .and_then(Value::as_u64)
            .and_then(|p| u16::try_from(p).ok()),
    })
}

fn login_to(ctx: &Context, d: &Def) -> i32 {
    let Some(url) = d.url() else {
        return fail("mcp_not_http", "login is for servers defined by a url");
    };
    let cfg = match login_config(d, url) {
        Ok(c) => c,
        Err(code) => return code,
    };
    let (mut out, mut err) = (std::io::stdout(), std::io::stderr());
    match login(
        &ctx.root,
        &cfg,
        Box::new(std::io::stdin()),
        &mut out,
        &mut err,
    ) {
        Ok(()) => {
            println!("Saved the token for {}.", d.name);
            0
        }
        Err(e) => {
            let (code, what) = e.describe();
            fail(code, what)
        }
    }
}

fn logout(ctx: &Context, name: &str) -> i32 {
    let removed = Tokens::lock(&ctx.root).and_then(|mut s| s.remove(name));
    match removed {
        Ok(true) => {
            println!("Removed the saved token for {name}.");
            0
        }
        Ok(false) => {
            println!("No token is saved for {name}.");
            0
        }
        Err(e) => store_failed(e),
    }
}
