//! The query parameters of resource requests, parsed once.

use std::collections::HashMap;

use crate::status::ApiError;

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
    pub send_initial_events: bool,
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
            send_initial_events: get("sendInitialEvents").is_some_and(truthy),
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
}
