//! Which result type answers which method, so a typed call decodes its result as exactly its
//! method's type (and asking for another type is refused before anything is sent).

use crate::wire::results::{
    CancelResult, HistoryPageResult, InitializeResult, ModelCatalogResult,
    ModelCatalogStatusResult, ModelRefreshResult, RecordedResult, SelectionSetResult,
    SessionDiscoverResult, SessionListResult, SessionResult, ShutdownResult, Status,
    TurnStartResult,
};
use crate::wire::{Call, METHODS};
use serde::de::DeserializeOwned;
use serde_json::Value;

/// A method's result type: [`fits`](MethodResult::fits) names the methods it answers.
pub trait MethodResult: DeserializeOwned {
    /// Whether this type is the result of `method`.
    fn fits(method: &str) -> bool;
}

macro_rules! results {
    ($($ty:ty => $($m:literal)|+;)*) => {
        $(impl MethodResult for $ty {
            fn fits(method: &str) -> bool {
                matches!(method, $($m)|+)
            }
        })*

        /// How many typed result types answer `method` (exactly one for every method).
        #[cfg(test)]
        fn typed_fits(method: &str) -> usize {
            0 $(+ usize::from(<$ty as MethodResult>::fits(method)))*
        }
    };
}

results! {
    InitializeResult => "initialize";
    Status => "status";
    ShutdownResult => "shutdown";
    SessionResult => "session.create" | "session.open";
    SessionListResult => "session.list";
    SessionDiscoverResult => "session.discover";
    ModelCatalogResult => "model.catalog";
    ModelCatalogStatusResult => "model.catalog.status";
    ModelRefreshResult => "model.refresh";
    CancelResult => "operation.cancel" | "turn.cancel";
    SelectionSetResult => "selection.set";
    HistoryPageResult => "history.page";
    TurnStartResult => "turn.start";
    RecordedResult => "approval.answer" | "client.tool.result";
}

/// The raw result, for a caller that reads it as JSON.
impl MethodResult for Value {
    fn fits(_: &str) -> bool {
        true
    }
}

/// The method name of `call`, from the protocol's method table.
#[must_use]
pub fn method_of(call: &Call) -> &'static str {
    let v = serde_json::to_value(call).unwrap_or_default();
    let name = v.get("method").and_then(Value::as_str).unwrap_or_default();
    METHODS.iter().find(|m| **m == name).copied().unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::requests::EmptyParams;

    #[test]
    fn every_method_has_exactly_one_result_type() {
        for m in METHODS {
            assert_eq!(typed_fits(m), 1, "{m}");
        }
        assert_eq!(typed_fits("session.forget"), 0);
    }

    #[test]
    fn a_call_names_its_method() {
        assert_eq!(
            method_of(&Call::SessionCreate(EmptyParams {})),
            "session.create"
        );
        assert_eq!(method_of(&Call::Shutdown(EmptyParams {})), "shutdown");
    }
}
