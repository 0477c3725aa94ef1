//! The query parameters of resource requests, parsed once.

use std::collections::HashMap;

use crate::status::{ApiError, FieldError};

/// Query parameters the handlers understand; unknown ones are ignored as
/// upstream does.
#[derive(Debug, Clone, Default)]
pub(crate) struct Params {
    pub resource_version: Option<String>,
    pub resource_version_match: Option<String>,
    pub label_selector: String,
    pub field_selector: String,
    pub limit: Option<usize>,
    pub continue_token: Option<String>,
    pub watch: bool,
    pub allow_bookmarks: bool,
    /// `sendInitialEvents`; `Some(false)` is given and differs from unset.
    pub send_initial_events: Option<bool>,
    pub timeout_seconds: Option<u64>,
    pub dry_run: bool,
    pub field_manager: Option<String>,
    /// `force` of server-side apply: take over conflicting fields.
    pub force: Option<bool>,
    pub grace_period_seconds: Option<i64>,
    pub propagation_policy: Option<String>,
    pub orphan_dependents: Option<bool>,
    /// `includeObject` of Table requests.
    pub include_object: Option<String>,
    /// `fieldValidation`: Ignore, Warn or Strict (see `field_validation`).
    pub field_validation: Option<String>,
}

fn truthy(v: &str) -> bool {
    matches!(v, "true" | "1" | "True" | "TRUE")
}

fn number<T: std::str::FromStr>(name: &str, v: &str) -> Result<T, ApiError> {
    v.parse()
        .map_err(|_| ApiError::BadRequest(format!("invalid value for {name}: {v:?}")))
}

impl Params {
    /// Parses a raw query string.
    pub(crate) fn parse(query: Option<&str>) -> Result<Self, ApiError> {
        let pairs: Vec<(String, String)> = match query {
            Some(q) => serde_urlencoded_pairs(q)?,
            None => Vec::new(),
        };
        let map: HashMap<String, String> = pairs.iter().cloned().collect();
        let get = |k: &str| map.get(k).map(String::as_str);
        // An empty value is the same as none.
        let set = |k: &str| get(k).filter(|s| !s.is_empty());
        let mut p = Params {
            resource_version: set("resourceVersion").map(String::from),
            resource_version_match: set("resourceVersionMatch").map(String::from),
            label_selector: get("labelSelector").unwrap_or("").to_string(),
            field_selector: get("fieldSelector").unwrap_or("").to_string(),
            continue_token: set("continue").map(String::from),
            watch: get("watch").is_some_and(truthy),
            allow_bookmarks: get("allowWatchBookmarks").is_some_and(truthy),
            send_initial_events: set("sendInitialEvents").map(truthy),
            field_manager: set("fieldManager").map(String::from),
            propagation_policy: set("propagationPolicy").map(String::from),
            orphan_dependents: get("orphanDependents").map(truthy),
            force: get("force").map(truthy),
            include_object: get("includeObject").map(String::from),
            field_validation: get("fieldValidation").map(String::from),
            ..Default::default()
        };
        if let Some(v) = set("limit") {
            let n: i64 = number("limit", v)?;
            p.limit = (n > 0).then_some(n as usize);
        }
        if let Some(v) = set("timeoutSeconds") {
            p.timeout_seconds = Some(number("timeoutSeconds", v)?);
        }
        if let Some(v) = set("gracePeriodSeconds") {
            p.grace_period_seconds = Some(number("gracePeriodSeconds", v)?);
        }
        for (k, v) in &pairs {
            if k == "dryRun" {
                if v != "All" {
                    return Err(ApiError::BadRequest(format!(
                        "Invalid dry run value: dryRun: Unsupported value: \"{v}\": supported values: \"All\""
                    )));
                }
                p.dry_run = true;
            }
        }
        Ok(p)
    }
}

impl Params {
    /// The list options' rules for a list, watch or collection delete, as
    /// upstream's `ValidateListOptions`: each broken one is a cause of a 422
    /// `ListOptions.meta.k8s.io` Invalid (a watch with initial events needs
    /// `resourceVersionMatch=NotOlderThan`; a list takes no initial events).
    pub(crate) fn check_list_options(&self) -> Result<(), ApiError> {
        const FIELD: &str = "resourceVersionMatch";
        let forbidden = |field: &str, detail: &str| FieldError::forbidden(field, detail);
        let unsupported =
            |value: &str, allowed: &[&str]| FieldError::not_supported(FIELD, value, allowed);
        let mut causes = Vec::new();
        let matching = self.resource_version_match.as_deref();
        if self.watch {
            if self.send_initial_events.is_some() && matching != Some("NotOlderThan") {
                causes.push(forbidden(
                    FIELD,
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if let Some(matching) = matching {
                if self.send_initial_events.is_none() {
                    causes.push(forbidden(
                        FIELD,
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if matching != "NotOlderThan" {
                    causes.push(unsupported(matching, &["NotOlderThan"]));
                }
                if self.continue_token.is_some() {
                    causes.push(forbidden(
                        FIELD,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
        } else {
            if let Some(matching) = matching {
                if self.resource_version.is_none() {
                    causes.push(forbidden(
                        FIELD,
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if self.continue_token.is_some() {
                    causes.push(forbidden(
                        FIELD,
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if !matches!(matching, "Exact" | "NotOlderThan") {
                    causes.push(unsupported(matching, &["Exact", "NotOlderThan", ""]));
                }
                if matching == "Exact" && self.resource_version.as_deref() == Some("0") {
                    causes.push(forbidden(
                        FIELD,
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if self.send_initial_events.is_some() {
                causes.push(forbidden(
                    "sendInitialEvents",
                    "sendInitialEvents is forbidden for list",
                ));
            }
        }
        if causes.is_empty() {
            return Ok(());
        }
        Err(ApiError::Invalid {
            kind: "ListOptions".into(),
            group: "meta.k8s.io".into(),
            name: String::new(),
            causes,
        })
    }
}

fn serde_urlencoded_pairs(query: &str) -> Result<Vec<(String, String)>, ApiError> {
    let uri: http::Uri = format!("/?{query}")
        .parse()
        .map_err(|e| ApiError::BadRequest(format!("malformed query string: {e}")))?;
    axum::extract::Query::<Vec<(String, String)>>::try_from_uri(&uri)
        .map(|q| q.0)
        .map_err(|e| ApiError::BadRequest(format!("malformed query string: {e}")))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_common_parameters() {
        let p = Params::parse(Some(
            "labelSelector=app%3Dweb&limit=2&watch=1&dryRun=All&timeoutSeconds=5",
        ))
        .unwrap();
        assert_eq!(p.label_selector, "app=web");
        assert_eq!(p.limit, Some(2));
        assert!(p.watch && p.dry_run);
        assert_eq!(p.timeout_seconds, Some(5));
        assert!(Params::parse(Some("dryRun=Some")).is_err());
        assert!(Params::parse(Some("limit=x")).is_err());
    }

    /// What upstream's `ValidateListOptions` refuses, and what it lets by.
    #[test]
    fn list_options_as_upstream() {
        let refused = |query: &str| match Params::parse(Some(query)).unwrap().check_list_options() {
            Err(e @ ApiError::Invalid { .. }) => e.to_string(),
            other => panic!("{query}: {other:?}"),
        };
        assert_eq!(
            refused("watch=1&sendInitialEvents=true"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        );
        assert_eq!(
            refused("resourceVersionMatch=Exact"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert!(refused("resourceVersion=5&resourceVersionMatch=Bogus").contains(
            "resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        ));
        assert!(
            refused("sendInitialEvents=false").contains("sendInitialEvents is forbidden for list")
        );
        assert!(
            refused("watch=1&resourceVersionMatch=NotOlderThan")
                .contains("unless sendInitialEvents is provided")
        );
        for allowed in [
            "",
            "resourceVersion=0",
            "resourceVersion=5&resourceVersionMatch=Exact",
            "resourceVersion=5&resourceVersionMatch=NotOlderThan",
            "watch=1&resourceVersion=5",
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan",
        ] {
            let params = Params::parse(Some(allowed)).unwrap();
            assert!(params.check_list_options().is_ok(), "{allowed}");
        }
    }
}
