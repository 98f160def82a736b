//! `magi-code serve --stdio`.

use crate::startup::LaunchEnv;
use crate::worker::Workers;
use protocol_core::{Capability, Config, Engine, Time};

/// Environment variable naming a file to capture a replayable trace into.
pub const TRACE_ENV: &str = "MAGI_CODE_TRACE";
/// Environment variable labelling this child in a captured trace.
pub const TRACE_CHILD_ENV: &str = "MAGI_CODE_TRACE_CHILD";

/// Serves the protocol on fds 0 and 1 (already checked to be pipes); returns the exit code.
#[must_use]
pub fn serve() -> i32 {
    // stderr stays silent while serving: a panic message could block on a full stderr pipe.
    std::panic::set_hook(Box::new(|_| {}));
    let env = LaunchEnv::from_process();
    let instance_id = uuid::Uuid::new_v4().hyphenated().to_string();
    let mut config = Config::default();
    config.supported = config
        .supported
        .with(Capability::ClientTools)
        .with(Capability::ToolDetails);
    let engine = Engine::new(config, &instance_id, Time(0));
    let mut workers = Workers::new(env);
    let recorder = std::env::var_os(TRACE_ENV).and_then(|path| {
        let file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .ok()?;
        let child = std::env::var(TRACE_CHILD_ENV).unwrap_or_else(|_| "a".into());
        let provenance = serde_json::json!({
            "source": "magi-code serve --stdio",
            "version": env!("CARGO_PKG_VERSION"),
        });
        Some(io_driver::Recorder::new(
            Box::new(std::io::BufWriter::new(file)),
            &child,
            provenance,
        ))
    });
    io_driver::run(engine, &mut workers, recorder).unwrap_or(1)
}
