//! Interned strings for registry entries of custom resources. Registry
//! entries name their group, version, resource and kind with `&'static str`
//! (the built-in ones come from k8s-openapi's constants); a CRD's names are
//! interned once per distinct value, so serving, deleting and re-creating
//! CRDs never grows memory beyond the set of names ever seen.

use std::collections::HashSet;
use std::sync::{LazyLock, Mutex};

static STRINGS: LazyLock<Mutex<HashSet<&'static str>>> = LazyLock::new(Default::default);
static LISTS: LazyLock<Mutex<HashSet<&'static [&'static str]>>> = LazyLock::new(Default::default);

/// The one `'static` copy of `s`.
pub(crate) fn intern(s: &str) -> &'static str {
    let mut set = STRINGS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(existing) = set.get(s) {
        return existing;
    }
    let leaked: &'static str = Box::leak(s.to_string().into_boxed_str());
    set.insert(leaked);
    leaked
}

/// The one `'static` copy of a list of strings (short names, categories).
pub(crate) fn intern_list(items: &[String]) -> &'static [&'static str] {
    let interned: Vec<&'static str> = items.iter().map(|s| intern(s)).collect();
    let mut set = LISTS.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(existing) = set.get(interned.as_slice()) {
        return existing;
    }
    let leaked: &'static [&'static str] = Box::leak(interned.into_boxed_slice());
    set.insert(leaked);
    leaked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn equal_names_share_one_copy() {
        let a = intern(&format!("widgets.{}", "example.com"));
        let b = intern("widgets.example.com");
        assert!(std::ptr::eq(a, b));
        let l1 = intern_list(&["wd".to_string(), "wdg".to_string()]);
        let l2 = intern_list(&["wd".to_string(), "wdg".to_string()]);
        assert!(std::ptr::eq(l1, l2));
        assert_eq!(l1, &["wd", "wdg"]);
    }
}
