//! Resource quantities (`250m`, `1.5Gi`, `1e3`) as quota, limit ranges, the
//! scheduler and the node read them, their canonical printing, the
//! decoder's syntax check agreeing with what they read, and the canonical
//! form the API server stores.

use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use skiff_common::amount::Amount;
use skiff_common::quantity;

/// Checks one input; panics where skiff answers it wrongly.
pub fn run(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let q = Quantity(text.to_string());
    let value = quantity::value(&q);
    let milli = quantity::milli_value(&q);
    assert_eq!(value.is_some(), milli.is_some(), "{text:?}");
    // Whatever skiff reads as a quantity, the API server's decoder lets in.
    if milli.is_some() {
        assert_eq!(quantity::syntax::check(text), Ok(()), "{text:?}");
    }
    // The canonical form the API server stores is a quantity, canonical
    // itself, and of the same value.
    if let Some(stored) = quantity::canonical::canonical(text) {
        assert_eq!(
            quantity::syntax::check(&stored),
            Ok(()),
            "{text:?} as {stored:?}"
        );
        assert_eq!(
            quantity::canonical::canonical(&stored).as_deref(),
            Some(stored.as_str()),
            "{text:?} as {stored:?}"
        );
        if let (Some(before), Some(after)) = (
            quantity::parse_scaled(text, 1_000_000_000),
            quantity::parse_scaled(&stored, 1_000_000_000),
        ) {
            assert_eq!(before, after, "{text:?} as {stored:?}");
        }
    }
    let Some(amount) = Amount::parse(text) else {
        assert!(
            milli.is_none(),
            "{text:?} read as {milli:?} but not as an amount"
        );
        return;
    };
    assert_eq!(Some(amount.milli()), milli, "{text:?}");
    // Quota status prints sums canonically; reading that text back must give
    // the same amount.
    let printed = amount.to_string();
    let again = Amount::parse(&printed)
        .unwrap_or_else(|| panic!("{text:?} printed as {printed:?}, which is refused"));
    assert_eq!(
        again.milli(),
        amount.milli(),
        "{text:?} printed as {printed:?}"
    );
    let _ = amount + again;
    let _ = amount - again;
}
