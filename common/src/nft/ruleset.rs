//! One nftables table as data — named chains holding rules, named sets and
//! maps holding elements — and the nft input that applies it: the whole
//! table (deleted and re-added in one transaction) or the difference from
//! the previously applied version.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::Family;

/// A chain: its base-chain declaration (for hooked chains) and its rules.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chain {
    /// e.g. `type nat hook prerouting priority dstnat; policy accept;`.
    pub hook: Option<String>,
    /// Rules in order.
    pub rules: Vec<String>,
}

impl Chain {
    /// A base chain hooked as `hook`, without rules yet.
    pub fn base(hook: &str) -> Self {
        Self {
            hook: Some(hook.to_string()),
            rules: Vec::new(),
        }
    }

    /// A regular chain (reached by jump, goto or a verdict map).
    pub fn regular(rules: Vec<String>) -> Self {
        Self { hook: None, rules }
    }
}

/// A set or map: its declaration and its static elements. Sets with
/// `dynamic` elements (session affinity) render none; the kernel fills them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Set {
    /// `set` or `map`.
    pub keyword: &'static str,
    /// e.g. `type ipv4_addr; flags interval;`.
    pub declaration: String,
    /// Elements (`key` or `key : value`).
    pub elements: BTreeSet<String>,
}

impl Set {
    /// An empty set declared as `declaration`.
    pub fn new(declaration: &str) -> Self {
        Self {
            keyword: "set",
            declaration: declaration.to_string(),
            elements: BTreeSet::new(),
        }
    }

    /// An empty map declared as `declaration`.
    pub fn map(declaration: &str) -> Self {
        Self {
            keyword: "map",
            ..Self::new(declaration)
        }
    }

    /// The key of a map element (the whole element for a set).
    fn key(element: &str) -> &str {
        element.split_once(" : ").map_or(element, |(k, _)| k)
    }
}

/// The whole table.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ruleset {
    /// Address family of the table.
    pub family: Family,
    /// Table name.
    pub table: String,
    /// Chains by name.
    pub chains: BTreeMap<String, Chain>,
    /// Sets and maps by name.
    pub sets: BTreeMap<String, Set>,
}

impl Ruleset {
    /// An empty table.
    pub fn new(family: Family, table: impl Into<String>) -> Self {
        Self {
            family,
            table: table.into(),
            chains: BTreeMap::new(),
            sets: BTreeMap::new(),
        }
    }

    /// `family table`, as nft commands name the table.
    fn qualified(&self) -> String {
        format!("{} {}", self.family, self.table)
    }
}

fn write_set(out: &mut String, t: &str, name: &str, set: &Set, declare: bool, fill: bool) {
    if declare {
        let _ = writeln!(
            out,
            "add {} {t} {name} {{ {} }}",
            set.keyword, set.declaration
        );
    }
    if fill {
        write_elements(out, t, name, "add", set.elements.iter().map(String::as_str));
    }
}

fn write_elements<'a>(
    out: &mut String,
    t: &str,
    name: &str,
    verb: &str,
    elements: impl Iterator<Item = &'a str>,
) {
    let elements: Vec<&str> = elements.collect();
    // Bounded batches keep each command line of reasonable size.
    for batch in elements.chunks(500) {
        let _ = writeln!(out, "{verb} element {t} {name} {{ {} }}", batch.join(", "));
    }
}

fn write_chain(out: &mut String, t: &str, name: &str, chain: &Chain) {
    for rule in &chain.rules {
        let _ = writeln!(out, "add rule {t} {name} {rule}");
    }
}

fn add_chain(out: &mut String, t: &str, name: &str, chain: &Chain) {
    match &chain.hook {
        Some(hook) => {
            let _ = writeln!(out, "add chain {t} {name} {{ {hook} }}");
        }
        None => {
            let _ = writeln!(out, "add chain {t} {name}");
        }
    }
}

/// nft input replacing the whole table in one transaction (the table is
/// added first so the delete cannot fail when it does not exist yet).
pub fn full_script(new: &Ruleset) -> String {
    let t = &new.qualified();
    let mut out = String::with_capacity(256 * (new.chains.len() + new.sets.len()));
    let _ = writeln!(out, "add table {t}");
    let _ = writeln!(out, "delete table {t}");
    let _ = writeln!(out, "add table {t}");
    // Declarations first: elements and rules refer to chains and sets.
    for (name, set) in &new.sets {
        write_set(&mut out, t, name, set, true, false);
    }
    for (name, chain) in &new.chains {
        add_chain(&mut out, t, name, chain);
    }
    for (name, set) in &new.sets {
        write_set(&mut out, t, name, set, false, true);
    }
    for (name, chain) in &new.chains {
        write_chain(&mut out, t, name, chain);
    }
    out
}

/// nft input turning the applied `old` into `new` in one transaction, or
/// `None` when only a full replacement can (another table, or a set's or
/// hook's declaration changed). An empty string means nothing to do.
pub fn diff_script(old: &Ruleset, new: &Ruleset) -> Option<String> {
    if old.table != new.table || old.family != new.family {
        return None;
    }
    let declaration_changed = new.sets.iter().any(|(name, s)| {
        old.sets
            .get(name)
            .is_some_and(|o| o.declaration != s.declaration || o.keyword != s.keyword)
    }) || new
        .chains
        .iter()
        .any(|(name, c)| old.chains.get(name).is_some_and(|o| o.hook != c.hook));
    if declaration_changed {
        return None;
    }
    let t = &new.qualified();
    let mut out = String::new();
    // 1. New chains and sets exist before anything refers to them.
    for (name, chain) in &new.chains {
        if !old.chains.contains_key(name) {
            add_chain(&mut out, t, name, chain);
        }
    }
    for (name, set) in &new.sets {
        if !old.sets.contains_key(name) {
            write_set(&mut out, t, name, set, true, false);
        }
    }
    // 2. Rewrite changed chains.
    for (name, chain) in &new.chains {
        match old.chains.get(name) {
            Some(o) if o.rules == chain.rules => {}
            Some(_) => {
                let _ = writeln!(out, "flush chain {t} {name}");
                write_chain(&mut out, t, name, chain);
            }
            None => write_chain(&mut out, t, name, chain),
        }
    }
    // 3. Elements: gone or changed ones out, new ones in.
    for (name, set) in &new.sets {
        let empty = BTreeSet::new();
        let before = old.sets.get(name).map_or(&empty, |s| &s.elements);
        let removed = before
            .difference(&set.elements)
            .map(|e| Set::key(e))
            .collect::<BTreeSet<_>>();
        write_elements(&mut out, t, name, "delete", removed.into_iter());
        write_elements(
            &mut out,
            t,
            name,
            "add",
            set.elements.difference(before).map(String::as_str),
        );
    }
    // 4. Chains and sets nobody refers to any more: emptied first (they may
    // refer to each other), then deleted.
    let gone: Vec<&String> = old
        .chains
        .keys()
        .filter(|n| !new.chains.contains_key(*n))
        .collect();
    for name in &gone {
        let _ = writeln!(out, "flush chain {t} {name}");
    }
    for name in &gone {
        let _ = writeln!(out, "delete chain {t} {name}");
    }
    for (name, set) in &old.sets {
        if !new.sets.contains_key(name) {
            let _ = writeln!(out, "delete {} {t} {name}", set.keyword);
        }
    }
    Some(out)
}
