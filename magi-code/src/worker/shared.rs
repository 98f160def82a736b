//! State shared between the workers of one child.

use super::titles::Titles;
use crate::agent::{Approvals, ClientCalls};
use crate::mcp::McpHub;
use crate::runtime::Runtime;
use crate::session::SessionState;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// State shared between workers.
#[derive(Debug, Default)]
pub struct Shared {
    /// The admitted runtime, once initialization succeeded.
    pub runtime: Mutex<Option<Runtime>>,
    /// The attachment, selection and paged snapshots, owned by the session worker.
    pub sessions: Mutex<SessionState>,
    /// Approvals of the active run.
    pub approvals: Approvals,
    /// Pending `client.tools` calls of the active run.
    pub client_calls: ClientCalls,
    /// The connected MCP servers, once initialization started them.
    pub mcp: Mutex<Option<Arc<McpHub>>>,
    /// Title requests beside the session worker.
    pub titles: Titles,
}

impl Shared {
    /// The admitted runtime, if initialization succeeded.
    #[must_use]
    pub fn runtime(&self) -> Option<Runtime> {
        self.runtime
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The connected MCP servers, if any.
    #[must_use]
    pub fn mcp(&self) -> Option<Arc<McpHub>> {
        self.mcp
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// The session state, even if a panicking holder poisoned it.
    pub fn sessions(&self) -> MutexGuard<'_, SessionState> {
        self.sessions.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
