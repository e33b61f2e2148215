//! Protocol versions of both eras: the one list that this crate's client
//! and its server side (the gateway, the demo server, in-process servers)
//! speak.

/// The version offered in `initialize`.
pub const LATEST_LEGACY_VERSION: &str = "2025-11-25";

/// Every version a server may answer `initialize` with; anything else fails
/// the handshake with a clear error.
pub const SUPPORTED_LEGACY_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Versions of the modern (stateless, per-request `_meta`) era, newest first.
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

pub fn is_modern_version(version: &str) -> bool {
    MODERN_VERSIONS.contains(&version)
}

pub fn is_supported_legacy_version(version: &str) -> bool {
    SUPPORTED_LEGACY_VERSIONS.contains(&version)
}

/// Every version served, newest first (what `server/discover` lists and
/// -32022 reports as `supported`).
pub fn supported_versions() -> Vec<&'static str> {
    MODERN_VERSIONS.iter().chain(SUPPORTED_LEGACY_VERSIONS.iter().rev()).copied().collect()
}

/// The version a server answers `initialize` with: the client's when it is
/// a legacy version served here, else the latest.
pub fn negotiated_legacy_version(requested: Option<&str>) -> &'static str {
    SUPPORTED_LEGACY_VERSIONS.iter().find(|version| Some(**version) == requested).copied().unwrap_or(LATEST_LEGACY_VERSION)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn initialize_answers_the_clients_version_when_served_else_the_latest() {
        assert_eq!(negotiated_legacy_version(Some("2025-03-26")), "2025-03-26");
        assert_eq!(negotiated_legacy_version(Some("2026-07-28")), LATEST_LEGACY_VERSION);
        assert_eq!(negotiated_legacy_version(None), LATEST_LEGACY_VERSION);
        assert_eq!(supported_versions(), ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]);
    }
}
