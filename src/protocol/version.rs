//! Protocol versions of the legacy (handshake) era that this client speaks.

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
