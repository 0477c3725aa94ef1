//! A CustomResourceDefinition as the server uses it: read from its JSON
//! (`spec.names`, `spec.versions`, `spec.scope`), defaulted and validated
//! on writes so only well-formed definitions are ever served.

use serde_json::{Value, json};

use super::printer::PrinterColumn;
use super::scale::ScalePaths;
use crate::status::FieldError;
use crate::validation::{is_dns1123_label, is_dns1123_subdomain};

/// Added on create; the CRD stays until all its objects are deleted.
pub(crate) const CLEANUP_FINALIZER: &str = "customresourcecleanup.apiextensions.k8s.io";

/// The names a CRD asks for.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) struct Names {
    /// `plural`, the resource name in URLs.
    pub plural: String,
    /// `singular`.
    pub singular: String,
    /// `kind`.
    pub kind: String,
    /// `listKind`.
    pub list_kind: String,
    /// `shortNames`, for kubectl.
    pub short_names: Vec<String>,
    /// `categories`, e.g. `all`.
    pub categories: Vec<String>,
}

impl Names {
    fn parse(names: &Value) -> Self {
        let text = |k: &str| names[k].as_str().unwrap_or("").to_string();
        let list = |k: &str| crate::object::strings(&names[k]);
        let kind = text("kind");
        let singular = Some(text("singular"))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| kind.to_ascii_lowercase());
        let list_kind = Some(text("listKind"))
            .filter(|s| !s.is_empty())
            .unwrap_or_else(|| format!("{kind}List"));
        Self {
            plural: text("plural"),
            singular,
            kind,
            list_kind,
            short_names: list("shortNames"),
            categories: list("categories"),
        }
    }

    /// The `status.acceptedNames` form.
    pub(crate) fn to_json(&self) -> Value {
        let mut v = json!({"plural": self.plural, "singular": self.singular,
            "kind": self.kind, "listKind": self.list_kind});
        if !self.short_names.is_empty() {
            v["shortNames"] = json!(self.short_names);
        }
        if !self.categories.is_empty() {
            v["categories"] = json!(self.categories);
        }
        v
    }
}

/// One entry of `spec.versions`.
#[derive(Debug, Clone)]
pub(crate) struct VersionDef {
    /// The version's name, e.g. `v1`.
    pub name: String,
    /// Whether the version is served.
    pub served: bool,
    /// Whether objects are stored in this version.
    pub storage: bool,
    /// `schema.openAPIV3Schema`.
    pub schema: Option<Value>,
    /// `additionalPrinterColumns`.
    pub columns: Vec<PrinterColumn>,
    /// Whether the status subresource is enabled.
    pub status: bool,
    /// The scale subresource's paths, when enabled.
    pub scale: Option<ScalePaths>,
}

/// The parts of a CRD that decide what is served.
#[derive(Debug, Clone)]
pub(crate) struct Definition {
    /// The CRD's name, `<plural>.<group>`.
    pub name: String,
    /// The API group served.
    pub group: String,
    /// The names asked for.
    pub names: Names,
    /// Whether the resource is namespaced.
    pub namespaced: bool,
    /// `spec.versions`.
    pub versions: Vec<VersionDef>,
    /// The CRD's creationTimestamp: the older CRD wins a name conflict.
    pub creation_timestamp: String,
    /// Whether the CRD is being deleted.
    pub terminating: bool,
    /// Its current names were accepted before (`status.acceptedNames`), so
    /// it keeps them against any CRD that asks for them later.
    pub accepted_before: bool,
}

impl Definition {
    /// Reads a (validated) CRD object.
    pub(crate) fn parse(crd: &Value) -> Self {
        let spec = &crd["spec"];
        let versions = spec["versions"]
            .as_array()
            .map(|vs| vs.iter().map(parse_version).collect())
            .unwrap_or_default();
        Self {
            name: crd["metadata"]["name"].as_str().unwrap_or("").to_string(),
            group: spec["group"].as_str().unwrap_or("").to_string(),
            names: Names::parse(&spec["names"]),
            namespaced: spec["scope"] != "Cluster",
            versions,
            creation_timestamp: crd["metadata"]["creationTimestamp"]
                .as_str()
                .unwrap_or("")
                .to_string(),
            terminating: crd["metadata"]["deletionTimestamp"].is_string(),
            accepted_before: {
                let accepted = &crd["status"]["acceptedNames"];
                !spec["names"]["plural"].as_str().unwrap_or("").is_empty()
                    && accepted["plural"] == spec["names"]["plural"]
                    && accepted["kind"] == spec["names"]["kind"]
            },
        }
    }

    /// The version objects are stored in.
    pub(crate) fn storage_version(&self) -> Option<&str> {
        self.versions
            .iter()
            .find(|v| v.storage)
            .map(|v| v.name.as_str())
    }
}

fn parse_version(v: &Value) -> VersionDef {
    let columns = v["additionalPrinterColumns"]
        .as_array()
        .map(|cols| cols.iter().map(PrinterColumn::parse).collect())
        .unwrap_or_default();
    VersionDef {
        name: v["name"].as_str().unwrap_or("").to_string(),
        served: v["served"].as_bool().unwrap_or(false),
        storage: v["storage"].as_bool().unwrap_or(false),
        schema: v["schema"].get("openAPIV3Schema").cloned(),
        columns,
        status: v["subresources"].get("status").is_some(),
        scale: v["subresources"].get("scale").map(ScalePaths::parse),
    }
}

/// Fills in what upstream defaults on a CRD: singular and list kind,
/// conversion strategy `None`.
pub(crate) fn apply_defaults(crd: &mut Value) {
    let Some(spec) = crd.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    if let Some(names) = spec.get_mut("names").and_then(Value::as_object_mut) {
        let kind = names
            .get("kind")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        if !kind.is_empty() {
            names
                .entry("singular")
                .or_insert_with(|| json!(kind.to_ascii_lowercase()));
            names
                .entry("listKind")
                .or_insert_with(|| json!(format!("{kind}List")));
        }
    }
    spec.entry("conversion")
        .or_insert_with(|| json!({"strategy": "None"}));
}

/// Adds the cleanup finalizer to a new CRD.
pub(crate) fn add_cleanup_finalizer(crd: &mut Value) {
    crate::object::add_finalizer(crd, CLEANUP_FINALIZER);
}

/// Every field error of a CRD about to be written.
pub(crate) fn validate(crd: &Value, errors: &mut Vec<FieldError>) {
    let spec = &crd["spec"];
    let group = spec["group"].as_str().unwrap_or("");
    if group.is_empty() {
        errors.push(FieldError::required("spec.group", ""));
    } else if !is_dns1123_subdomain(group) || !group.contains('.') {
        errors.push(FieldError::invalid(
            "spec.group",
            group,
            "should be a domain with at least one dot",
        ));
    }
    let names = &spec["names"];
    let plural = names["plural"].as_str().unwrap_or("");
    check_name_part(names, "plural", true, errors);
    check_name_part(names, "singular", false, errors);
    for list in ["shortNames", "categories"] {
        if let Some(items) = names[list].as_array() {
            for (i, item) in items.iter().enumerate() {
                let s = item.as_str().unwrap_or("");
                if !is_dns1123_label(s) {
                    errors.push(FieldError::invalid(
                        format!("spec.names.{list}[{i}]"),
                        s,
                        "must be a DNS-1123 label",
                    ));
                }
            }
        }
    }
    for kind_field in ["kind", "listKind"] {
        match names[kind_field].as_str() {
            None | Some("") if kind_field == "kind" => {
                errors.push(FieldError::required("spec.names.kind", ""));
            }
            Some(k) if !k.is_empty() && !is_kind(k) => errors.push(FieldError::invalid(
                format!("spec.names.{kind_field}"),
                k,
                "may have mixed case, but should otherwise match: [a-z]([-a-z0-9]*[a-z0-9])?",
            )),
            _ => {}
        }
    }
    let name = crd["metadata"]["name"].as_str().unwrap_or("");
    if !plural.is_empty() && !group.is_empty() && name != format!("{plural}.{group}") {
        errors.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    match spec["scope"].as_str() {
        Some("Namespaced" | "Cluster") => {}
        None | Some("") => errors.push(FieldError::required("spec.scope", "")),
        Some(other) => errors.push(FieldError::not_supported(
            "spec.scope",
            other,
            &["Cluster", "Namespaced"],
        )),
    }
    if let Some(strategy) = spec["conversion"]["strategy"].as_str()
        && strategy != "None"
    {
        errors.push(FieldError::not_supported(
            "spec.conversion.strategy",
            strategy,
            &["None"],
        ));
    }
    validate_versions(&spec["versions"], errors);
}

fn is_kind(k: &str) -> bool {
    is_dns1123_label(&k.to_ascii_lowercase()) && !k.contains('-')
}

fn check_name_part(names: &Value, field: &str, required: bool, errors: &mut Vec<FieldError>) {
    match names[field].as_str() {
        None | Some("") if required => {
            errors.push(FieldError::required(format!("spec.names.{field}"), ""));
        }
        Some(s) if !s.is_empty() && !is_dns1123_label(s) => {
            errors.push(FieldError::invalid(
                format!("spec.names.{field}"),
                s,
                "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character",
            ));
        }
        _ => {}
    }
}

fn validate_versions(versions: &Value, errors: &mut Vec<FieldError>) {
    let Some(list) = versions.as_array().filter(|l| !l.is_empty()) else {
        errors.push(FieldError::required(
            "spec.versions",
            "must have exactly one version marked as storage version",
        ));
        return;
    };
    let mut seen: Vec<&str> = Vec::new();
    for (i, v) in list.iter().enumerate() {
        let path = format!("spec.versions[{i}]");
        let name = v["name"].as_str().unwrap_or("");
        if name.is_empty() {
            errors.push(FieldError::required(format!("{path}.name"), ""));
        } else if !is_dns1123_label(name) {
            errors.push(FieldError::invalid(
                format!("{path}.name"),
                name,
                "must be a DNS-1123 label",
            ));
        } else if seen.contains(&name) {
            errors.push(FieldError::duplicate(format!("{path}.name"), name));
        }
        seen.push(name);
        for flag in ["served", "storage"] {
            if !v[flag].is_boolean() {
                errors.push(FieldError::required(format!("{path}.{flag}"), ""));
            }
        }
        let schema_path = format!("{path}.schema.openAPIV3Schema");
        match v["schema"].get("openAPIV3Schema") {
            Some(schema) => {
                super::structural::check_root(schema, &schema_path, errors);
                super::rules::check_definition(schema, &schema_path, errors);
            }
            None => errors.push(FieldError::required(schema_path, "schemas are required")),
        }
        if let Some(columns) = v["additionalPrinterColumns"].as_array() {
            for (c, column) in columns.iter().enumerate() {
                super::printer::validate_column(
                    column,
                    &format!("{path}.additionalPrinterColumns[{c}]"),
                    errors,
                );
            }
        }
        if let Some(scale) = v["subresources"].get("scale") {
            super::scale::validate(scale, &format!("{path}.subresources.scale"), errors);
        }
    }
    let storage = list.iter().filter(|v| v["storage"] == true).count();
    if storage != 1 {
        errors.push(FieldError::invalid(
            "spec.versions",
            json!(seen),
            "must have exactly one version marked as storage version",
        ));
    }
    if !list.iter().any(|v| v["served"] == true) {
        errors.push(FieldError::invalid(
            "spec.versions",
            json!(seen),
            "must have at least one version marked as served",
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn crd(spec: Value) -> Value {
        json!({"metadata": {"name": "widgets.example.com"}, "spec": spec})
    }

    fn errors_of(crd: &Value) -> Vec<String> {
        let mut errors = Vec::new();
        validate(crd, &mut errors);
        errors.iter().map(FieldError::render).collect()
    }

    fn good_spec() -> Value {
        json!({"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget", "shortNames": ["wd"]},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object"}}}]})
    }

    #[test]
    fn a_good_definition_passes_and_is_defaulted() {
        let mut c = crd(good_spec());
        assert!(errors_of(&c).is_empty(), "{:?}", errors_of(&c));
        apply_defaults(&mut c);
        assert_eq!(c["spec"]["names"]["singular"], "widget");
        assert_eq!(c["spec"]["names"]["listKind"], "WidgetList");
        let d = Definition::parse(&c);
        assert_eq!(d.storage_version(), Some("v1"));
        assert!(d.namespaced);
    }

    #[test]
    fn names_and_versions_are_checked() {
        let mut spec = good_spec();
        spec["names"]["plural"] = json!("gadgets");
        spec["versions"][0]["storage"] = json!(false);
        spec["versions"][0]["served"] = json!(false);
        let errors = errors_of(&crd(spec));
        assert!(errors.contains(&"metadata.name: Invalid value: \"widgets.example.com\": must be spec.names.plural+\".\"+spec.group".to_string()), "{errors:?}");
        crate::crd::assert_reported(
            &errors,
            "must have exactly one version marked as storage version",
        );
        crate::crd::assert_reported(&errors, "must have at least one version marked as served");
        let mut two = good_spec();
        two["versions"] = json!([
            {"name": "v1", "served": true, "storage": true, "schema": {"openAPIV3Schema": {"type": "object"}}},
            {"name": "v1", "served": true, "storage": true}]);
        two["scope"] = json!("Everywhere");
        let errors = errors_of(&crd(two));
        assert!(
            errors.contains(&"spec.versions[1].name: Duplicate value: \"v1\"".to_string()),
            "{errors:?}"
        );
        assert!(
            errors.contains(
                &"spec.versions[1].schema.openAPIV3Schema: Required value: schemas are required"
                    .to_string()
            ),
            "{errors:?}"
        );
        crate::crd::assert_reported(&errors, "spec.scope: Unsupported value: \"Everywhere\"");
    }
}
