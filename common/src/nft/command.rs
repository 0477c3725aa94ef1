//! Running the `nft` command: a script applied as one transaction through
//! `nft -f -`, and the reads that notice a flushed or deleted table.
//! Optionally inside a named network namespace (`ip netns exec`), which is
//! how tests and benchmarks keep their rules off the host.

use super::Family;

/// A failed `nft` invocation: the command did not start, or nft refused
/// the input or the request (its error output says why).
pub type NftError = crate::host_command::CommandError;

/// How to reach nftables: the binary and an optional network namespace.
#[derive(Debug, Clone)]
pub struct Nft {
    binary: String,
    netns: Option<String>,
}

impl Default for Nft {
    fn default() -> Self {
        Self::new()
    }
}

impl Nft {
    /// `nft` from `PATH`, in this process's network namespace.
    pub fn new() -> Self {
        Self {
            binary: "nft".into(),
            netns: None,
        }
    }

    /// The same, inside the network namespace `name` (`ip netns`).
    pub fn in_netns(name: impl Into<String>) -> Self {
        Self {
            binary: "nft".into(),
            netns: Some(name.into()),
        }
    }

    fn run(&self, args: &[&str], input: Option<&str>) -> Result<String, NftError> {
        let mut words: Vec<&str> = Vec::new();
        if let Some(ns) = &self.netns {
            words.extend(["ip", "netns", "exec", ns.as_str()]);
        }
        words.push(&self.binary);
        words.extend(args);
        crate::host_command::run(&words, input)
    }

    /// Applies `script` atomically (`nft -f -`): all of it or nothing.
    pub fn apply(&self, script: &str) -> Result<(), NftError> {
        self.run(&["-f", "-"], Some(script)).map(|_| ())
    }

    /// `nft list table <family> <table>`, or `None` when the table does
    /// not exist.
    pub fn list_table(&self, family: Family, table: &str) -> Result<Option<String>, NftError> {
        self.list(&["list", "table", family.as_str(), table])
    }

    /// `nft list chain <family> <table> <chain>`, or `None` when it does
    /// not exist.
    pub fn list_chain(
        &self,
        family: Family,
        table: &str,
        chain: &str,
    ) -> Result<Option<String>, NftError> {
        self.list(&["list", "chain", family.as_str(), table, chain])
    }

    fn list(&self, args: &[&str]) -> Result<Option<String>, NftError> {
        match self.run(args, None) {
            Ok(text) => Ok(Some(text)),
            Err(NftError::Failed { stderr, .. })
                if stderr.contains("No such file or directory") =>
            {
                Ok(None)
            }
            Err(other) => Err(other),
        }
    }

    /// `nft list ruleset`: every table.
    pub fn list_ruleset(&self) -> Result<String, NftError> {
        self.run(&["list", "ruleset"], None)
    }

    /// Deletes the table if it exists.
    pub fn delete_table(&self, family: Family, table: &str) -> Result<(), NftError> {
        self.apply(&format!(
            "add table {family} {table}\ndelete table {family} {table}\n"
        ))
    }
}
