//! How long the cluster's certificates live and when they are renewed, as
//! k3s: the CA ten years, every leaf (serving, admin, kubelet-client) one
//! year, and a leaf within 120 days of its expiry (or already expired, or
//! unreadable) is re-issued by the same CA at the next start. Clients that
//! hold an older leaf keep working until it expires, because the CA stays.

use std::time::{Duration, SystemTime};

use rcgen::CertificateParams;

const DAY: Duration = Duration::from_secs(24 * 3600);

/// How far back validity starts, for clocks a little behind ours.
const BACKDATE: Duration = Duration::from_secs(5 * 60);

/// Lifetimes and the renewal window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CertLifetimes {
    /// A new CA's lifetime.
    pub ca: Duration,
    /// A new leaf's lifetime.
    pub leaf: Duration,
    /// A leaf expiring sooner than this is renewed.
    pub renew_before: Duration,
}

impl Default for CertLifetimes {
    fn default() -> Self {
        Self {
            ca: 3650 * DAY,
            leaf: 365 * DAY,
            renew_before: 120 * DAY,
        }
    }
}

impl CertLifetimes {
    /// The defaults with leaves living `days` (a development and test knob:
    /// under 120 days every start renews them).
    pub fn with_leaf_days(days: u64) -> Self {
        Self {
            leaf: Duration::from_secs(days.clamp(1, 36_500) * DAY.as_secs()),
            ..Self::default()
        }
    }
}

/// Sets `params` to be valid from just before now for `lifetime`.
pub(super) fn set_validity(params: &mut CertificateParams, lifetime: Duration) {
    let now = SystemTime::now();
    params.not_before = (now - BACKDATE).into();
    params.not_after = (now + lifetime).into();
}

/// When the first certificate of `pem` expires, as seconds since the epoch.
pub fn not_after(pem: &str) -> Option<i64> {
    let (_, block) = x509_parser::pem::parse_x509_pem(pem.as_bytes()).ok()?;
    let cert = block.parse_x509().ok()?;
    Some(cert.validity().not_after.timestamp())
}

/// Whether a certificate must be re-issued: it expires within `window`
/// from now, or cannot be read.
pub(super) fn renewal_due(pem: &str, window: Duration) -> bool {
    let Some(expiry) = not_after(pem) else {
        return true;
    };
    let now = SystemTime::now()
        .duration_since(SystemTime::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs() as i64);
    expiry - now < window.as_secs() as i64
}
