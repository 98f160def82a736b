//! Capability names, sets and `initialize` negotiation.

use crate::error::ErrorCode;
use crate::ids::is_id_grammar;
use crate::limits::{REQUIRED_CAPABILITIES, REQUIRED_CAPABILITIES_WITH_CLIENT_TOOLS};
use serde::{Deserialize, Serialize};

macro_rules! caps {
    ($($(#[$m:meta])* $v:ident => $s:literal,)*) => {
        /// Every capability this protocol names: the sixteen base names, then the extensions.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        pub enum Capability { $($(#[$m])* #[serde(rename = $s)] $v,)* }
        impl Capability {
            /// Every capability, base names first in the protocol's order.
            pub const ALL: &'static [Self] = &[$(Self::$v,)*];
            /// The wire name.
            #[must_use]
            pub const fn as_str(self) -> &'static str { match self { $(Self::$v => $s,)* } }
            /// Parses a wire name.
            #[must_use]
            pub fn parse(s: &str) -> Option<Self> { match s { $($s => Some(Self::$v),)* _ => None } }
        }
    };
}

caps! {
    /// `initialize`.
    Initialize => "initialize",
    /// `status`.
    Status => "status",
    /// `shutdown`.
    Shutdown => "shutdown",
    /// `session.create`.
    SessionCreate => "session.create",
    /// `session.open`.
    SessionOpen => "session.open",
    /// `session.list`.
    SessionList => "session.list",
    /// `session.discover` (must be required to be used).
    SessionDiscover => "session.discover",
    /// `model.catalog`.
    ModelCatalog => "model.catalog",
    /// `model.catalog.status` (must be required to be used).
    ModelCatalogStatus => "model.catalog.status",
    /// `model.refresh` (must be required to be used).
    ModelRefresh => "model.refresh",
    /// `operation.cancel` (must be required to be used).
    OperationCancel => "operation.cancel",
    /// `selection.set`.
    SelectionSet => "selection.set",
    /// `history.page`.
    HistoryPage => "history.page",
    /// `turn.start`.
    TurnStart => "turn.start",
    /// `turn.cancel`.
    TurnCancel => "turn.cancel",
    /// `approval.answer`.
    ApprovalAnswer => "approval.answer",
    /// Extension: tool display cards.
    ToolCards => "tool.cards",
    /// Extension: client-provided tools.
    ClientTools => "client.tools",
    /// Extension: tool output tails and proposed file changes, for people (`docs/`).
    ToolDetails => "tool.details",
}

/// Every `tool.cards` card kind, in the order `extensions.md` lists them.
pub const TOOL_CARD_KINDS: [&str; 8] = [
    "command",
    "file_read",
    "file_edit",
    "search",
    "mcp",
    "client",
    "subagent",
    "generic",
];

impl Capability {
    /// The sixteen base capabilities, always advertised.
    pub const BASE: &'static [Self] = {
        let (base, _) = Self::ALL.split_at(16);
        base
    };

    /// Whether a client must require this capability at `initialize` before using it.
    #[must_use]
    pub const fn needs_negotiation(self) -> bool {
        matches!(
            self,
            Self::SessionDiscover
                | Self::ModelCatalogStatus
                | Self::ModelRefresh
                | Self::OperationCancel
                | Self::ToolCards
                | Self::ClientTools
                | Self::ToolDetails
        )
    }

    /// Whether this is an extension that is advertised only once negotiated.
    #[must_use]
    pub const fn is_extension(self) -> bool {
        matches!(
            self,
            Self::ToolCards | Self::ClientTools | Self::ToolDetails
        )
    }

    const fn bit(self) -> u32 {
        1 << (self as u32)
    }
}

/// A set of capabilities.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CapabilitySet(u32);

impl CapabilitySet {
    /// The empty set.
    pub const EMPTY: Self = Self(0);

    /// The sixteen base capabilities.
    #[must_use]
    pub fn base() -> Self {
        Capability::BASE.iter().fold(Self::EMPTY, |s, c| s.with(*c))
    }

    /// This set plus `c`.
    #[must_use]
    pub const fn with(self, c: Capability) -> Self {
        Self(self.0 | c.bit())
    }

    /// Whether `c` is in the set.
    #[must_use]
    pub const fn contains(self, c: Capability) -> bool {
        self.0 & c.bit() != 0
    }

    /// Members in protocol order.
    pub fn iter(self) -> impl Iterator<Item = Capability> {
        Capability::ALL
            .iter()
            .copied()
            .filter(move |c| self.contains(*c))
    }
}

/// Checks `required_capabilities` against what this build supports.
///
/// Order (`decisions.md` 6): count bound, then name grammar (both `invalid_params`), then
/// support (`unsupported_capability`).
pub fn negotiate(names: &[&str], supported: CapabilitySet) -> Result<CapabilitySet, ErrorCode> {
    let bound = if names.contains(&Capability::ClientTools.as_str()) {
        REQUIRED_CAPABILITIES_WITH_CLIENT_TOOLS
    } else {
        REQUIRED_CAPABILITIES
    };
    if names.len() > bound {
        return Err(ErrorCode::InvalidParams);
    }
    if !names.iter().all(|n| is_id_grammar(n)) {
        return Err(ErrorCode::InvalidParams);
    }
    let mut set = CapabilitySet::EMPTY;
    for n in names {
        match Capability::parse(n) {
            Some(c) if supported.contains(c) => set = set.with(c),
            _ => return Err(ErrorCode::UnsupportedCapability),
        }
    }
    Ok(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base_has_sixteen_in_order() {
        assert_eq!(Capability::BASE.len(), 16);
        assert_eq!(Capability::BASE[0], Capability::Initialize);
        assert_eq!(Capability::BASE[15], Capability::ApprovalAnswer);
    }

    #[test]
    fn negotiation_order() {
        let s = CapabilitySet::base();
        let sixteen: Vec<&str> = Capability::BASE.iter().map(|c| c.as_str()).collect();
        assert_eq!(negotiate(&sixteen, s).unwrap(), s);
        let mut seventeen = sixteen.clone();
        seventeen.push("bogus");
        assert_eq!(negotiate(&seventeen, s), Err(ErrorCode::InvalidParams));
        assert_eq!(negotiate(&["bad name"], s), Err(ErrorCode::InvalidParams));
        assert_eq!(
            negotiate(&["tool.cards"], s),
            Err(ErrorCode::UnsupportedCapability)
        );
        assert_eq!(
            negotiate(&["nope"], s),
            Err(ErrorCode::UnsupportedCapability)
        );
    }
}
