//! nftables as the node's components use it: `command` runs `nft` (one
//! `nft -f -` transaction per change, optionally inside a network
//! namespace), `ruleset` holds a table as data (named chains and sets) and
//! writes the nft input replacing it or turning one version into the next,
//! `applier` applies successive rulesets to one table remembering what it
//! applied, `sync` keeps one table applied as the cluster changes, and
//! `sysctl` sets the host switches the rules depend on.
//!
//! The service proxy and the network policy controller both render their
//! own table into a [`Ruleset`] and keep it applied with [`keep_applied`],
//! both through [`run`]; what they watch and put in the table is theirs.

mod applier;
mod command;
mod ruleset;
mod sync;
pub mod sysctl;

pub use applier::{Applied, Applier};
pub use command::{Nft, NftError};
pub use ruleset::{Chain, Ruleset, Set, diff_script, full_script};
pub use sync::{TableKind, TableSources, TableSync, keep_applied, remove_table, run};

/// The address family of a table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Family {
    /// `ip`: IPv4 only.
    Ip,
    /// `inet`: IPv4 and IPv6 in one table.
    Inet,
}

impl Family {
    /// The family as nft spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Family::Ip => "ip",
            Family::Inet => "inet",
        }
    }
}

impl std::fmt::Display for Family {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A transport protocol as a Service port or a policy port names it, and
/// as the rules match it: one type for the service proxy and the network
/// policies, which read the same API field the same way.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Protocol {
    /// TCP (the default).
    Tcp,
    /// UDP.
    Udp,
    /// SCTP.
    Sctp,
}

impl Protocol {
    /// The API's spelling (`TCP`, `UDP`, `SCTP`); `None` defaults to TCP,
    /// anything else is unknown.
    pub fn parse(api: Option<&str>) -> Option<Self> {
        match api.unwrap_or("TCP") {
            "TCP" => Some(Protocol::Tcp),
            "UDP" => Some(Protocol::Udp),
            "SCTP" => Some(Protocol::Sctp),
            _ => None,
        }
    }

    /// The nftables name (`tcp`, `udp`, `sctp`).
    pub fn nft(self) -> &'static str {
        match self {
            Protocol::Tcp => "tcp",
            Protocol::Udp => "udp",
            Protocol::Sctp => "sctp",
        }
    }
}
