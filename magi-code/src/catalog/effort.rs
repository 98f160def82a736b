//! Effort support of a model and the stable selection ID of a provider/model tuple.

use crate::util::ids::hex;
use crate::wire::results as wire;
use sha2::{Digest, Sha256};

/// Whether a model takes an explicit effort (`backend.md` "Model catalog cache").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EffortSupport {
    /// Not known: no cache says.
    Unknown,
    /// The model has no effort control.
    Unsupported,
    /// The model takes the listed levels.
    Supported,
}

impl EffortSupport {
    /// The wire name.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Unknown => "unknown",
            Self::Unsupported => "unsupported",
            Self::Supported => "supported",
        }
    }

    /// The wire value.
    #[must_use]
    pub const fn wire(self) -> wire::EffortSupport {
        match self {
            Self::Unknown => wire::EffortSupport::Unknown,
            Self::Unsupported => wire::EffortSupport::Unsupported,
            Self::Supported => wire::EffortSupport::Supported,
        }
    }

    /// Parses a wire name.
    #[must_use]
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "unknown" => Self::Unknown,
            "unsupported" => Self::Unsupported,
            "supported" => Self::Supported,
            _ => return None,
        })
    }
}

/// The wire value of an effort name (`default` or a level the cache may list); `None` for
/// any other name, which the cache reader never admits.
#[must_use]
pub fn wire_effort(name: &str) -> Option<wire::Effort> {
    Some(match name {
        "default" => wire::Effort::Default,
        "low" => wire::Effort::Low,
        "medium" => wire::Effort::Medium,
        "high" => wire::Effort::High,
        "xhigh" => wire::Effort::Xhigh,
        "max" => wire::Effort::Max,
        _ => return None,
    })
}

/// Effort support and permitted efforts of a model whose explicit levels are `efforts`
/// (`None` unknown, empty unsupported).
#[must_use]
pub fn effort_support(efforts: Option<&[String]>) -> (EffortSupport, Vec<String>) {
    match efforts {
        None => (EffortSupport::Unknown, vec!["default".into()]),
        Some([]) => (EffortSupport::Unsupported, vec!["default".into()]),
        Some(list) => (
            EffortSupport::Supported,
            std::iter::once("default".to_owned())
                .chain(list.iter().cloned())
                .collect(),
        ),
    }
}

/// The stable selection ID of a provider/model tuple.
#[must_use]
pub fn selection_id(provider: &str, model: &str) -> String {
    let mut h = Sha256::new();
    h.update(provider.as_bytes());
    h.update(b"\0");
    h.update(model.as_bytes());
    hex(&h.finalize())
}
