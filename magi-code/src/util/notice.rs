//! The notice codes results carry (`local-agent-protocol.md`, `decisions.md`).

/// One notice code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Notice {
    /// The opened history records no cwd to check.
    CwdUnverified,
    /// A saved selection was restored, but part of it does not apply.
    SavedSelectionNotice,
    /// The saved selection's provider is not ready; the startup selection stands.
    SavedSelectionUnavailable,
    /// A relevant provider's model cache is missing, empty or invalid.
    ProviderCatalogUnavailable,
    /// Cached entries with unsafe identifiers were left out.
    CatalogEntriesOmittedUnsafe,
    /// Histories that failed validation were left out of a listing.
    SessionsOmittedInvalid,
    /// The durable write succeeded but the history could not be re-read.
    HistoryUnavailable,
    /// The durable write succeeded but its derived metadata could not be written.
    MetadataUpdateFailed,
}

impl Notice {
    /// The wire code.
    #[must_use]
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::CwdUnverified => "cwd_unverified",
            Self::SavedSelectionNotice => "saved_selection_notice",
            Self::SavedSelectionUnavailable => "saved_selection_unavailable",
            Self::ProviderCatalogUnavailable => "provider_catalog_unavailable",
            Self::CatalogEntriesOmittedUnsafe => "catalog_entries_omitted_unsafe",
            Self::SessionsOmittedInvalid => "sessions_omitted_invalid",
            Self::HistoryUnavailable => "history_unavailable",
            Self::MetadataUpdateFailed => "metadata_update_failed",
        }
    }
}

impl serde::Serialize for Notice {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.as_str())
    }
}

/// The wire codes of `notices`, in byte order without duplicates, as results list them.
#[must_use]
pub fn sorted(notices: impl IntoIterator<Item = Notice>) -> Vec<&'static str> {
    let set: std::collections::BTreeSet<&'static str> =
        notices.into_iter().map(Notice::as_str).collect();
    set.into_iter().collect()
}
