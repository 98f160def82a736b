//! The HTTP client of one bounded request: a `ureq` agent with a connect and a whole-request
//! time bound, every status returned as an answer (the caller maps it), for the requests that
//! are one exchange (a model list, a token refresh).

use std::time::Duration;

/// An agent whose requests connect within `connect` and end within `whole`.
#[must_use]
pub fn bounded_agent(connect: Duration, whole: Duration) -> ureq::Agent {
    ureq::Agent::config_builder()
        .timeout_connect(Some(connect))
        .timeout_global(Some(whole))
        .http_status_as_error(false)
        .build()
        .into()
}
