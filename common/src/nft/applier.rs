//! Applying successive rulesets to one table: the first (and any after a
//! failure or a tampered table) replaces the whole table, later ones apply
//! only their difference from what was last applied.

use super::ruleset::{Ruleset, diff_script, full_script};
use super::{Family, Nft, NftError};

/// Applies rulesets to one table, remembering what it applied.
pub struct Applier {
    nft: Nft,
    family: Family,
    table: String,
    applied: Option<Ruleset>,
}

/// How a sync went.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Nothing differed.
    Unchanged,
    /// The difference was applied.
    Incremental,
    /// The whole table was replaced.
    Full,
}

impl Applier {
    /// An applier that has applied nothing yet (its first apply is full).
    pub fn new(nft: Nft, family: Family, table: impl Into<String>) -> Self {
        Self {
            nft,
            family,
            table: table.into(),
            applied: None,
        }
    }

    /// True once a ruleset was applied (and not forgotten since).
    pub fn has_applied(&self) -> bool {
        self.applied.is_some()
    }

    /// Forgets what was applied, so the next apply replaces the table.
    pub fn invalidate(&mut self) {
        self.applied = None;
    }

    /// True when the table exists and its base chain `chain` still holds
    /// `needle` as nft lists it (a `flush table`, `flush ruleset` or
    /// `delete table` breaks this).
    pub fn intact(&self, chain: &str, needle: &str) -> Result<bool, NftError> {
        let listed = self.nft.list_chain(self.family, &self.table, chain)?;
        Ok(listed.is_some_and(|text| text.contains(needle)))
    }

    /// Applies `new`: the difference from the last applied ruleset, or the
    /// whole table when there is none, or when the difference fails.
    pub fn apply(&mut self, new: Ruleset) -> Result<Applied, NftError> {
        if let Some(old) = &self.applied
            && let Some(script) = diff_script(old, &new)
        {
            if script.is_empty() {
                return Ok(Applied::Unchanged);
            }
            match self.nft.apply(&script) {
                Ok(()) => {
                    self.applied = Some(new);
                    return Ok(Applied::Incremental);
                }
                Err(error) => {
                    tracing::warn!(table = %self.table, %error,
                        "incremental rules update failed; replacing the table");
                }
            }
        }
        self.applied = None;
        self.nft.apply(&full_script(&new))?;
        self.applied = Some(new);
        Ok(Applied::Full)
    }
}
