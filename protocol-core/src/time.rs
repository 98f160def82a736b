//! Engine time: milliseconds on a monotonic clock owned by the caller.

use serde::{Deserialize, Serialize};

/// A point in time, in milliseconds since an arbitrary epoch chosen by the driver.
///
/// The engine never reads a clock: every input carries one of these, so a test or a replay
/// can drive it with a fake clock.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Time(pub u64);

impl Time {
    /// The time `ms` milliseconds after `self`, saturating.
    #[must_use]
    pub fn plus_ms(self, ms: u64) -> Self {
        Self(self.0.saturating_add(ms))
    }

    /// Milliseconds from `self` until `later`, or zero if `later` is not after `self`.
    #[must_use]
    pub fn until(self, later: Self) -> u64 {
        later.0.saturating_sub(self.0)
    }
}
