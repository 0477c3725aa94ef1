//! Impersonation: a caller acting as another user through the
//! `Impersonate-User`, `Impersonate-Group`, `Impersonate-Uid` and
//! `Impersonate-Extra-<key>` headers (`kubectl --as`, `--as-group`,
//! `--as-uid`). Every identity claimed is first authorized for the real
//! caller with the verb `impersonate`, as upstream checks it; only when all
//! are allowed does the request go on as the impersonated user.
//!
//! This module decides who the request runs as; it must never let a header
//! change the identity without that check. The middleware records every
//! switch for the audit log (`impersonatedUser`, with the real caller as
//! `user`).

use std::collections::BTreeMap;

use http::{HeaderMap, HeaderName};

use super::{Attributes, Chain, RequestKind, ResourceAttributes, forbidden};
use crate::authn::{AUTHENTICATED_GROUP, UserInfo};
use crate::status::ApiError;

/// The user to act as.
pub const USER_HEADER: &str = "impersonate-user";
/// A group to act with (repeatable).
pub const GROUP_HEADER: &str = "impersonate-group";
/// The UID to act with.
pub const UID_HEADER: &str = "impersonate-uid";
/// The prefix of headers that set one user extra each (repeatable).
pub const EXTRA_HEADER_PREFIX: &str = "impersonate-extra-";

const ANONYMOUS: &str = "system:anonymous";
const UNAUTHENTICATED_GROUP: &str = "system:unauthenticated";
const SERVICE_ACCOUNT_PREFIX: &str = "system:serviceaccount:";

/// One identity claimed through a header, in the order upstream checks
/// them: the user, the groups, the extras, the UID.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Claim {
    User(String),
    ServiceAccount { namespace: String, name: String },
    Group(String),
    Extra { key: String, value: String },
    Uid(String),
}

impl Claim {
    /// What the real caller must be allowed to `impersonate` for this claim.
    fn attributes(&self, caller: &UserInfo) -> Attributes {
        let (group, resource, subresource, namespace, name) = match self {
            Claim::User(name) => ("", "users", "", "", name.as_str()),
            Claim::ServiceAccount { namespace, name } => {
                ("", "serviceaccounts", "", namespace.as_str(), name.as_str())
            }
            Claim::Group(name) => ("", "groups", "", "", name.as_str()),
            Claim::Extra { key, value } => (
                "authentication.k8s.io",
                "userextras",
                key.as_str(),
                "",
                value.as_str(),
            ),
            Claim::Uid(uid) => ("authentication.k8s.io", "uids", "", "", uid.as_str()),
        };
        Attributes {
            user: caller.clone(),
            verb: "impersonate".to_string(),
            request: RequestKind::Resource(ResourceAttributes {
                group: group.to_string(),
                version: String::new(),
                resource: resource.to_string(),
                subresource: subresource.to_string(),
                namespace: namespace.to_string(),
                name: name.to_string(),
            }),
        }
    }
}

/// Whether a request carries any impersonation header.
pub fn requested(headers: &HeaderMap) -> bool {
    headers.keys().any(is_impersonation_header)
}

/// Whether `name` is one of the impersonation headers.
fn is_impersonation_header(name: &HeaderName) -> bool {
    let name = name.as_str();
    name == USER_HEADER
        || name == GROUP_HEADER
        || name == UID_HEADER
        || name.starts_with(EXTRA_HEADER_PREFIX)
}

/// The identity `caller` acts as: `Ok(None)` when the request asks for
/// no impersonation, the impersonated user when the chain allows every
/// claim, else upstream's refusal (403 naming the first claim refused).
pub fn impersonate(
    chain: &Chain,
    caller: &UserInfo,
    headers: &HeaderMap,
) -> Result<Option<UserInfo>, ApiError> {
    let claims = claims(headers)?;
    if claims.is_empty() {
        return Ok(None);
    }
    for claim in &claims {
        let attributes = claim.attributes(caller);
        if let Err(reason) = chain.decide(&attributes) {
            tracing::info!(user = %caller.name, ?claim, "impersonation refused");
            return Err(forbidden(&attributes, &reason));
        }
    }
    let acting = acting_user(&claims, headers.contains_key(GROUP_HEADER));
    tracing::info!(
        user = %caller.name,
        impersonated = %acting.name,
        groups = ?acting.groups,
        "acting as another user"
    );
    Ok(Some(acting))
}

/// Removes every impersonation header, so nothing past the switch (proxied
/// streams included) sees them.
pub fn strip(headers: &mut HeaderMap) {
    let names: Vec<_> = headers
        .keys()
        .filter(|name| is_impersonation_header(name))
        .cloned()
        .collect();
    for name in names {
        headers.remove(name);
    }
}

/// The claims the headers make; groups, extras or a UID without a user is
/// an error, as upstream (which answers it as an internal error).
fn claims(headers: &HeaderMap) -> Result<Vec<Claim>, ApiError> {
    let text = |value: &http::HeaderValue| value.to_str().unwrap_or_default().to_string();
    let mut claims = Vec::new();
    let user = headers.get(USER_HEADER).map(text).unwrap_or_default();
    let has_user = !user.is_empty();
    if has_user {
        claims.push(match service_account(&user) {
            Some((namespace, name)) => Claim::ServiceAccount { namespace, name },
            None => Claim::User(user),
        });
    }
    let mut others = false;
    for group in headers.get_all(GROUP_HEADER) {
        others = true;
        claims.push(Claim::Group(text(group)));
    }
    // Header names arrive lower-cased; the key may be percent-encoded to
    // carry characters a header name cannot.
    let mut extra_names: Vec<&str> = headers
        .keys()
        .map(http::HeaderName::as_str)
        .filter(|name| name.starts_with(EXTRA_HEADER_PREFIX))
        .collect();
    extra_names.sort_unstable();
    for name in extra_names {
        let key = percent_decode(&name[EXTRA_HEADER_PREFIX.len()..]);
        for value in headers.get_all(name) {
            others = true;
            claims.push(Claim::Extra {
                key: key.clone(),
                value: text(value),
            });
        }
    }
    if let Some(uid) = headers.get(UID_HEADER).map(text)
        && !uid.is_empty()
    {
        others = true;
        claims.push(Claim::Uid(uid));
    }
    if others && !has_user {
        return Err(ApiError::Internal(
            "requested impersonation of groups, a uid or user extras without impersonating a user"
                .into(),
        ));
    }
    Ok(claims)
}

/// The user the claims describe. Groups given in headers are the groups;
/// else an impersonated service account gets its own. A non-anonymous user
/// is always authenticated unless the groups say it is not.
fn acting_user(claims: &[Claim], groups_given: bool) -> UserInfo {
    let mut acting = UserInfo {
        name: String::new(),
        uid: String::new(),
        groups: Vec::new(),
        extra: BTreeMap::new(),
    };
    for claim in claims {
        match claim {
            Claim::User(name) => acting.name = name.clone(),
            Claim::ServiceAccount { namespace, name } => {
                acting.name = crate::tokens::user_name(namespace, name);
                if !groups_given {
                    acting.groups = crate::tokens::groups(namespace);
                }
            }
            Claim::Group(group) => acting.groups.push(group.clone()),
            Claim::Extra { key, value } => acting
                .extra
                .entry(key.clone())
                .or_default()
                .push(value.clone()),
            Claim::Uid(uid) => acting.uid = uid.clone(),
        }
    }
    if acting.name != ANONYMOUS
        && !acting
            .groups
            .iter()
            .any(|g| g == AUTHENTICATED_GROUP || g == UNAUTHENTICATED_GROUP)
    {
        acting.groups.push(AUTHENTICATED_GROUP.to_string());
    }
    acting
}

/// `(namespace, name)` of a well-formed service-account user name.
fn service_account(user: &str) -> Option<(String, String)> {
    let rest = user.strip_prefix(SERVICE_ACCOUNT_PREFIX)?;
    let (namespace, name) = rest.split_once(':')?;
    (crate::validation::is_dns1123_label(namespace)
        && crate::validation::is_dns1123_subdomain(name))
    .then(|| (namespace.to_string(), name.to_string()))
}

/// Decodes `%XX` escapes (an invalid escape stays as written).
fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%'
            && let Some(hex) = text.get(i + 1..i + 3)
            && let Ok(byte) = u8::from_str_radix(hex, 16)
        {
            out.push(byte);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::authz::{Authorizer, Decision, Masters};

    /// Allows exactly the impersonations it lists, as `resource/name`.
    struct Grants(Vec<&'static str>);

    impl Authorizer for Grants {
        fn authorize(&self, attributes: &Attributes) -> Decision {
            let Some(r) = attributes.resource() else {
                return Decision::NoOpinion(String::new());
            };
            let wanted = format!("{}/{}", r.combined_resource(), r.name);
            if attributes.verb == "impersonate" && self.0.contains(&wanted.as_str()) {
                Decision::Allow(String::new())
            } else {
                Decision::NoOpinion(String::new())
            }
        }
    }

    fn headers(pairs: &[(&str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (name, value) in pairs {
            h.append(
                http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                value.parse().unwrap(),
            );
        }
        h
    }

    fn caller() -> UserInfo {
        UserInfo::new("x", Vec::new())
    }

    #[test]
    fn no_headers_no_impersonation() {
        let chain = Chain::new(vec![Arc::new(Masters)]);
        assert!(matches!(
            impersonate(&chain, &caller(), &HeaderMap::new()),
            Ok(None)
        ));
        assert!(!requested(&headers(&[("authorization", "Bearer t")])));
    }

    #[test]
    fn a_user_without_the_grant_is_refused_with_upstreams_message() {
        let chain = Chain::new(vec![Arc::new(Masters), Arc::new(Grants(vec![]))]);
        let error = impersonate(&chain, &caller(), &headers(&[("Impersonate-User", "bob")]))
            .expect_err("refused");
        assert_eq!(
            error.to_string(),
            "users \"bob\" is forbidden: User \"x\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope"
        );
        let error = impersonate(
            &chain,
            &caller(),
            &headers(&[("Impersonate-User", "system:serviceaccount:default:builder")]),
        )
        .expect_err("refused");
        assert_eq!(
            error.to_string(),
            "serviceaccounts \"builder\" is forbidden: User \"x\" cannot impersonate resource \"serviceaccounts\" in API group \"\" in the namespace \"default\""
        );
    }

    #[test]
    fn every_claim_needs_its_own_grant() {
        let chain = Chain::new(vec![Arc::new(Grants(vec!["users/bob", "groups/dev"]))]);
        let allowed = impersonate(
            &chain,
            &caller(),
            &headers(&[("Impersonate-User", "bob"), ("Impersonate-Group", "dev")]),
        )
        .expect("allowed")
        .expect("impersonated");
        assert_eq!(allowed.name, "bob");
        assert_eq!(allowed.groups, vec!["dev", "system:authenticated"]);

        let error = impersonate(
            &chain,
            &caller(),
            &headers(&[
                ("Impersonate-User", "bob"),
                ("Impersonate-Group", "dev"),
                ("Impersonate-Group", "system:masters"),
            ]),
        )
        .expect_err("a group without a grant");
        assert!(
            error
                .to_string()
                .starts_with("groups \"system:masters\" is forbidden"),
            "{error}"
        );
        let error = impersonate(
            &chain,
            &caller(),
            &headers(&[("Impersonate-User", "bob"), ("Impersonate-Uid", "1234")]),
        )
        .expect_err("a uid without a grant");
        assert_eq!(
            error.to_string(),
            "uids.authentication.k8s.io \"1234\" is forbidden: User \"x\" cannot impersonate resource \"uids\" in API group \"authentication.k8s.io\" at the cluster scope"
        );
        let error = impersonate(
            &chain,
            &caller(),
            &headers(&[
                ("Impersonate-User", "bob"),
                ("Impersonate-Extra-Scopes", "view"),
            ]),
        )
        .expect_err("an extra without a grant");
        assert!(
            error
                .to_string()
                .contains("cannot impersonate resource \"userextras/scopes\""),
            "{error}"
        );
    }

    #[test]
    fn groups_uid_and_extras_default_as_upstream() {
        let chain = Chain::new(vec![Arc::new(Grants(vec![
            "serviceaccounts/builder",
            "users/system:anonymous",
            "users/bob",
            "uids/1234",
            "userextras/scopes/view",
            "userextras/scopes/edit",
            "groups/system:unauthenticated",
        ]))]);
        let sa = impersonate(
            &chain,
            &caller(),
            &headers(&[("Impersonate-User", "system:serviceaccount:default:builder")]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(sa.name, "system:serviceaccount:default:builder");
        assert_eq!(
            sa.groups,
            vec![
                "system:serviceaccounts",
                "system:serviceaccounts:default",
                "system:authenticated"
            ]
        );
        let anonymous = impersonate(
            &chain,
            &caller(),
            &headers(&[
                ("Impersonate-User", "system:anonymous"),
                ("Impersonate-Group", "system:unauthenticated"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(anonymous.groups, vec!["system:unauthenticated"]);
        let bob = impersonate(
            &chain,
            &caller(),
            &headers(&[
                ("Impersonate-User", "bob"),
                ("Impersonate-Uid", "1234"),
                ("Impersonate-Extra-Scopes", "view"),
                ("Impersonate-Extra-Scopes", "edit"),
            ]),
        )
        .unwrap()
        .unwrap();
        assert_eq!(bob.uid, "1234");
        assert_eq!(bob.extra["scopes"], vec!["view", "edit"]);
        assert_eq!(bob.groups, vec!["system:authenticated"]);
    }

    #[test]
    fn extra_keys_are_percent_decoded() {
        assert_eq!(percent_decode("acme.com%2Fteam"), "acme.com/team");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("a%zz"), "a%zz");
        let claims = claims(&headers(&[
            ("Impersonate-User", "bob"),
            ("Impersonate-Extra-acme.com%2fteam", "a"),
        ]))
        .unwrap();
        assert_eq!(
            claims[1],
            Claim::Extra {
                key: "acme.com/team".into(),
                value: "a".into()
            }
        );
    }

    #[test]
    fn groups_without_a_user_are_an_error() {
        let chain = Chain::new(vec![Arc::new(Masters)]);
        let master = UserInfo::new("m", vec![crate::authz::MASTERS_GROUP.to_string()]);
        for pairs in [
            [("Impersonate-Group", "dev")],
            [("Impersonate-Uid", "1")],
            [("Impersonate-Extra-Scopes", "x")],
        ] {
            let error = impersonate(&chain, &master, &headers(&pairs)).expect_err("no user");
            assert!(matches!(error, ApiError::Internal(_)), "{error}");
        }
    }

    #[test]
    fn service_account_names_must_be_well_formed() {
        assert_eq!(
            service_account("system:serviceaccount:ns:sa"),
            Some(("ns".into(), "sa".into()))
        );
        assert_eq!(service_account("system:serviceaccount:ns"), None);
        assert_eq!(service_account("system:serviceaccount:Ns:sa"), None);
        assert_eq!(service_account("system:serviceaccount:ns:a:b"), None);
        assert_eq!(service_account("bob"), None);
    }
}
