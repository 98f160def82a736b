//! The one error of a settings value, shared by the settings reader and the readers of the
//! parts it delegates (hooks, profile and skill names, instructions).

/// A settings problem; reported as `configuration_invalid` without detail on the wire.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid(pub &'static str);
