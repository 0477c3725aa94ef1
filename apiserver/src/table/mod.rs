//! Server-side printing for `kubectl get`: objects rendered as a
//! `meta.k8s.io` Table with upstream's columns and cell formats, so kubectl
//! shows what it shows against any cluster. Columns of priority 1 appear with
//! `-o wide`. Row objects carry metadata so `-L`, `--show-labels` and `-A` work.

pub(crate) mod admission;
mod age;
pub(crate) mod aggregator;
pub(crate) mod autoscaling;
pub(crate) mod certificates;
pub(crate) mod cluster;
pub(crate) mod columns;
pub(crate) mod core;
pub(crate) mod flowcontrol;
pub(crate) mod metrics;
pub(crate) mod networking;
pub(crate) mod pods;
pub(crate) mod policy;
pub(crate) mod rbac;
pub(crate) mod storage;
pub(crate) mod workloads;

use http::HeaderMap;
use k8s_openapi::jiff::Timestamp;
use serde_json::{Map, Value, json};

pub(crate) use age::human_duration;
use columns::Column;
pub(crate) use columns::Printer;

/// What each row carries besides its cells (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum IncludeObject {
    /// Cells only.
    None,
    /// A PartialObjectMetadata with the object's metadata (the default).
    #[default]
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter.
    pub(crate) fn parse(value: Option<&str>) -> Result<Self, String> {
        match value {
            None | Some("") | Some("Metadata") => Ok(Self::Metadata),
            Some("None") => Ok(Self::None),
            Some("Object") => Ok(Self::Object),
            Some(other) => Err(format!(
                "includeObject: Unsupported value: \"{other}\": supported values: \"Metadata\", \"None\", \"Object\""
            )),
        }
    }
}

/// The Table API version the client asked for in `Accept`, if it asked for
/// a Table at all (`application/json;as=Table;v=v1;g=meta.k8s.io`).
pub(crate) fn requested_table_version(headers: &HeaderMap) -> Option<&'static str> {
    let accept = headers.get(http::header::ACCEPT)?.to_str().ok()?;
    // The first acceptable entry wins, as in content negotiation.
    for entry in accept.split(',') {
        let mut parts = entry.split(';').map(str::trim);
        let media = parts.next().unwrap_or("");
        if media != "application/json" && media != "*/*" {
            continue;
        }
        let params: Vec<(String, String)> = parts
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
            .collect();
        let get = |key: &str| {
            params
                .iter()
                .find(|(k, _)| k == key)
                .map(|(_, v)| v.as_str())
        };
        match (get("as"), get("g"), get("v")) {
            (Some("Table"), Some("meta.k8s.io"), Some("v1")) => return Some("meta.k8s.io/v1"),
            (Some("Table"), Some("meta.k8s.io"), Some("v1beta1")) => {
                return Some("meta.k8s.io/v1beta1");
            }
            (Some(_), _, _) => continue,
            (None, _, _) => return None,
        }
    }
    None
}

/// The Table for a request that asked for one (`None` when it did not):
/// `objects` of resource `info`, with `metadata` as the Table's list metadata.
pub(crate) fn for_request(
    headers: &HeaderMap,
    include_object: Option<&str>,
    info: &crate::registry::ResourceInfo,
    objects: &[Value],
    metadata: Value,
) -> Option<Result<Value, crate::status::ApiError>> {
    let version = requested_table_version(headers)?;
    Some(
        IncludeObject::parse(include_object)
            .map_err(crate::status::ApiError::BadRequest)
            .map(|include| {
                let request = TableRequest {
                    api_version: version,
                    objects,
                    include,
                    list_metadata: metadata,
                    now: Timestamp::now(),
                };
                info.table(request)
            }),
    )
}

/// What a Table is asked of: `objects` (all of one resource) at
/// `api_version`, what each row carries besides its cells, the Table's
/// metadata (resourceVersion, continue, remainingItemCount) and the time
/// ages are counted to.
#[derive(Debug)]
pub(crate) struct TableRequest<'a> {
    /// The Table's API version (`meta.k8s.io/v1` or `v1beta1`).
    pub api_version: &'a str,
    /// The objects, one row each.
    pub objects: &'a [Value],
    /// What each row carries besides its cells.
    pub include: IncludeObject,
    /// The Table's metadata.
    pub list_metadata: Value,
    /// Now, for age columns.
    pub now: Timestamp,
}

impl TableRequest<'_> {
    /// The Table with these column definitions, each object's row holding
    /// `cells(object, now)`: the one assembly built-in kinds (a [`Printer`])
    /// and custom resources (their printer columns) share.
    pub(crate) fn render(
        self,
        definitions: Vec<Value>,
        cells: impl Fn(&Value, Timestamp) -> Vec<Value>,
    ) -> Value {
        let rows: Vec<Value> = self
            .objects
            .iter()
            .map(|object| row(cells(object, self.now), object, self.include))
            .collect();
        json!({
            "kind": "Table",
            "apiVersion": self.api_version,
            "metadata": self.list_metadata,
            "columnDefinitions": definitions,
            "rows": rows,
        })
    }
}

/// Renders a Table with `printer`'s columns (each kind's strategy names its
/// printer).
pub(crate) fn render(printer: &Printer, request: TableRequest<'_>) -> Value {
    let definitions = printer.columns.iter().map(Column::definition).collect();
    request.render(definitions, printer.cells)
}

fn row(cells: Vec<Value>, object: &Value, include: IncludeObject) -> Value {
    let mut row = Map::new();
    row.insert("cells".into(), Value::Array(cells));
    match include {
        IncludeObject::None => {}
        IncludeObject::Object => {
            row.insert("object".into(), object.clone());
        }
        IncludeObject::Metadata => {
            row.insert(
                "object".into(),
                json!({
                    "kind": "PartialObjectMetadata",
                    "apiVersion": "meta.k8s.io/v1",
                    "metadata": object.get("metadata").cloned().unwrap_or_else(|| json!({})),
                }),
            );
        }
    }
    Value::Object(row)
}

/// The time the printers' tests count ages to.
#[cfg(test)]
fn test_now() -> Timestamp {
    "2026-01-01T01:00:00Z".parse().expect("time")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_requested_only_through_the_meta_group() {
        let cases = [
            (
                "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json",
                Some("meta.k8s.io/v1"),
            ),
            ("application/json", None),
            (
                "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
                None,
            ),
        ];
        for (accept, version) in cases {
            let headers =
                HeaderMap::from_iter([(http::header::ACCEPT, accept.parse().expect("header"))]);
            assert_eq!(requested_table_version(&headers), version, "{accept}");
        }
    }

    #[test]
    fn rows_carry_metadata_or_the_object() {
        let cm = json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": {"name": "a", "labels": {"x": "y"}, "creationTimestamp": "2026-01-01T00:00:00Z"},
            "data": {"k": "v", "l": "w"}});
        let now: Timestamp = "2026-01-01T00:05:00Z".parse().expect("ts");
        let request = |objects, include, list_metadata| TableRequest {
            api_version: "meta.k8s.io/v1",
            objects,
            include,
            list_metadata,
            now,
        };
        let t = render(
            &core::CONFIGMAPS,
            request(
                std::slice::from_ref(&cm),
                IncludeObject::Metadata,
                json!({"resourceVersion": "7"}),
            ),
        );
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["metadata"]["resourceVersion"], "7");
        let names: Vec<_> = t["columnDefinitions"]
            .as_array()
            .expect("cols")
            .iter()
            .map(|c| c["name"].clone())
            .collect();
        assert_eq!(names, vec!["Name", "Data", "Age"]);
        assert_eq!(t["rows"][0]["cells"], json!(["a", 2, "5m"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
        assert_eq!(t["rows"][0]["object"]["metadata"]["labels"]["x"], "y");
        let t = render(
            &core::CONFIGMAPS,
            request(std::slice::from_ref(&cm), IncludeObject::Object, json!({})),
        );
        assert_eq!(t["rows"][0]["object"], cm);
        let t = render(
            &core::CONFIGMAPS,
            request(std::slice::from_ref(&cm), IncludeObject::None, json!({})),
        );
        assert!(t["rows"][0].get("object").is_none());
    }

    #[test]
    fn include_object_values_are_checked() {
        assert_eq!(IncludeObject::parse(None), Ok(IncludeObject::Metadata));
        assert_eq!(
            IncludeObject::parse(Some("Object")),
            Ok(IncludeObject::Object)
        );
        assert!(IncludeObject::parse(Some("All")).is_err());
    }
}
