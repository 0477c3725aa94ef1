//! Component schemas: the JSON schemas of the built-in kinds from
//! k8s-openapi's `schemars` implementations, named as upstream names them
//! (`io.k8s.api.core.v1.Pod`), with `x-kubernetes-group-version-kind` on
//! every kind and the strategic-merge-patch extensions kubectl reads when it
//! computes `kubectl apply` patches.

use k8s_openapi::Resource;
use k8s_openapi::api::{
    apps, authentication, authorization, autoscaling, batch, certificates, coordination, core,
    discovery, events, networking, policy, rbac, scheduling, storage,
};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions;
use k8s_openapi::apimachinery::pkg::apis::meta::v1 as meta;
use k8s_openapi::schemars::generate::{SchemaGenerator, SchemaSettings};
use k8s_openapi::schemars::{JsonSchema, Schema};
use serde_json::{Map, Value, json};

use crate::patch::{ListStrategy, list_strategy};

/// Adds a type's schema (and everything it references) to a generator.
type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

/// A kind whose schema k8s-openapi knows.
struct BuiltinKind {
    group: &'static str,
    version: &'static str,
    kind: &'static str,
    name: fn() -> std::borrow::Cow<'static, str>,
    add: SchemaFn,
}

fn kind<T: Resource + JsonSchema>() -> BuiltinKind {
    BuiltinKind {
        group: T::GROUP,
        version: T::VERSION,
        kind: T::KIND,
        name: T::schema_name,
        add: SchemaGenerator::subschema_for::<T>,
    }
}

/// Every kind served by the built-in registry, plus the kinds its
/// subresources speak (Scale, Binding, Eviction).
fn builtin_kinds() -> Vec<BuiltinKind> {
    vec![
        kind::<core::v1::Binding>(),
        kind::<core::v1::ConfigMap>(),
        kind::<core::v1::Endpoints>(),
        kind::<core::v1::Event>(),
        kind::<core::v1::LimitRange>(),
        kind::<core::v1::Namespace>(),
        kind::<core::v1::Node>(),
        kind::<core::v1::PersistentVolumeClaim>(),
        kind::<core::v1::PersistentVolume>(),
        kind::<core::v1::Pod>(),
        kind::<core::v1::PodTemplate>(),
        kind::<core::v1::ReplicationController>(),
        kind::<core::v1::ResourceQuota>(),
        kind::<core::v1::Secret>(),
        kind::<core::v1::ServiceAccount>(),
        kind::<core::v1::Service>(),
        kind::<apps::v1::ControllerRevision>(),
        kind::<apps::v1::DaemonSet>(),
        kind::<apps::v1::Deployment>(),
        kind::<apps::v1::ReplicaSet>(),
        kind::<apps::v1::StatefulSet>(),
        kind::<events::v1::Event>(),
        kind::<authentication::v1::SelfSubjectReview>(),
        kind::<authentication::v1::TokenRequest>(),
        kind::<authentication::v1::TokenReview>(),
        kind::<authorization::v1::LocalSubjectAccessReview>(),
        kind::<authorization::v1::SelfSubjectAccessReview>(),
        kind::<authorization::v1::SelfSubjectRulesReview>(),
        kind::<authorization::v1::SubjectAccessReview>(),
        kind::<autoscaling::v2::HorizontalPodAutoscaler>(),
        kind::<autoscaling::v1::HorizontalPodAutoscaler>(),
        kind::<autoscaling::v1::Scale>(),
        kind::<batch::v1::CronJob>(),
        kind::<batch::v1::Job>(),
        kind::<certificates::v1::CertificateSigningRequest>(),
        kind::<networking::v1::IngressClass>(),
        kind::<networking::v1::Ingress>(),
        kind::<networking::v1::IPAddress>(),
        kind::<networking::v1::NetworkPolicy>(),
        kind::<networking::v1::ServiceCIDR>(),
        kind::<policy::v1::Eviction>(),
        kind::<policy::v1::PodDisruptionBudget>(),
        kind::<rbac::v1::ClusterRoleBinding>(),
        kind::<rbac::v1::ClusterRole>(),
        kind::<rbac::v1::RoleBinding>(),
        kind::<rbac::v1::Role>(),
        kind::<storage::v1::CSIDriver>(),
        kind::<storage::v1::CSINode>(),
        kind::<storage::v1::CSIStorageCapacity>(),
        kind::<storage::v1::StorageClass>(),
        kind::<storage::v1::VolumeAttachment>(),
        kind::<apiextensions::v1::CustomResourceDefinition>(),
        kind::<k8s_openapi::kube_aggregator::pkg::apis::apiregistration::v1::APIService>(),
        kind::<scheduling::v1::PriorityClass>(),
        kind::<coordination::v1::Lease>(),
        kind::<discovery::v1::EndpointSlice>(),
    ]
}

/// Where references point: OpenAPI v3 components or v2 definitions.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// OpenAPI v2: `#/definitions/`.
    V2,
    /// OpenAPI v3: `#/components/schemas/`.
    V3,
}

impl Dialect {
    /// The prefix of every `$ref`.
    pub(crate) fn ref_prefix(self) -> &'static str {
        match self {
            Dialect::V2 => "#/definitions/",
            Dialect::V3 => "#/components/schemas/",
        }
    }

    /// A reference to a named schema.
    pub(crate) fn reference(self, name: &str) -> Value {
        json!({ "$ref": format!("{}{name}", self.ref_prefix()) })
    }
}

/// A kind to describe: `(group, version, kind)`.
pub(super) type Gvk = (String, String, String);

/// Upstream's schema name of a kind's list (`io.k8s.api.core.v1.PodList`).
pub(super) fn list_name(item_name: &str) -> String {
    format!("{item_name}List")
}

/// Collects the schemas of a set of kinds and what they reference.
pub(crate) struct SchemaSet {
    generator: SchemaGenerator,
    dialect: Dialect,
    /// Schema name of each kind added, with its GVK.
    kinds: Vec<(String, Gvk)>,
    /// Schemas given as JSON (custom resources), added verbatim.
    extra: Map<String, Value>,
}

impl SchemaSet {
    /// An empty set whose references are written for `dialect`.
    pub(crate) fn new(dialect: Dialect) -> Self {
        let settings = match dialect {
            // OpenAPI 3 moves `$ref` siblings (descriptions) into `allOf`,
            // the form upstream serves and kubectl's patch code follows.
            Dialect::V3 => SchemaSettings::openapi3().with(|s| s.meta_schema = None),
            // Swagger 2 keeps `description` beside `$ref`, as upstream's v2.
            Dialect::V2 => SchemaSettings::draft07().with(|s| {
                s.meta_schema = None;
                s.transforms.clear();
            }),
        };
        let mut set = Self {
            generator: settings.into_generator(),
            dialect,
            kinds: Vec::new(),
            extra: Map::new(),
        };
        // What the operations themselves refer to.
        set.generator.subschema_for::<meta::Status>();
        set.generator.subschema_for::<meta::DeleteOptions>();
        set.generator.subschema_for::<meta::WatchEvent<()>>();
        set.generator.subschema_for::<meta::Patch>();
        set
    }

    /// Adds a kind's schema; returns its schema name, or `None` when no
    /// schema is known for it.
    pub(crate) fn add_kind(&mut self, group: &str, version: &str, kind: &str) -> Option<String> {
        let gvk = (group.to_string(), version.to_string(), kind.to_string());
        if let Some((name, _)) = self.kinds.iter().find(|(_, k)| *k == gvk) {
            return Some(name.clone());
        }
        let builtin = builtin_kinds()
            .into_iter()
            .find(|k| k.group == group && k.version == version && k.kind == kind)?;
        (builtin.add)(&mut self.generator);
        let name = (builtin.name)().into_owned();
        self.kinds.push((name.clone(), gvk));
        Some(name)
    }

    /// Adds a custom resource kind under upstream's name for it (the group
    /// reversed: `com.example.stable.v1.CronTab`) and returns the name. Its
    /// schema is the CRD's `declared` one with the standard metadata (in v2
    /// documents as far as v2 can say it, see [`v2_schema`]); without one it
    /// names the standard fields and keeps every other field, so clients
    /// leave validation to the server.
    pub(crate) fn add_custom_kind(
        &mut self,
        group: &str,
        version: &str,
        kind: &str,
        declared: Option<&Value>,
    ) -> String {
        let reversed: Vec<&str> = group.split('.').rev().collect();
        let name = format!("{}.{version}.{kind}", reversed.join("."));
        let gvk = (group.to_string(), version.to_string(), kind.to_string());
        if self.kinds.iter().any(|(n, _)| *n == name) {
            return name;
        }
        self.generator.subschema_for::<meta::ObjectMeta>();
        let metadata = match self.dialect {
            Dialect::V3 => json!({ "allOf": [self.dialect.reference(OBJECT_META)] }),
            Dialect::V2 => self.dialect.reference(OBJECT_META),
        };
        let schema = match declared.filter(|d| d.is_object()) {
            Some(declared) => {
                let converted = match self.dialect {
                    Dialect::V3 => declared.clone(),
                    Dialect::V2 => v2_schema(declared),
                };
                with_standard_fields(converted, metadata)
            }
            None => json!({
                "type": "object",
                "properties": {
                    "apiVersion": { "type": "string" },
                    "kind": { "type": "string" },
                    "metadata": metadata,
                },
                "x-kubernetes-preserve-unknown-fields": true,
            }),
        };
        self.extra.insert(name.clone(), schema);
        self.kinds.push((name.clone(), gvk));
        name
    }

    /// Every schema, by name, with the Kubernetes extensions added.
    pub(crate) fn finish(mut self) -> Map<String, Value> {
        let mut definitions = self.generator.take_definitions(true);
        definitions.append(&mut self.extra);
        for (name, (group, version, kind)) in &self.kinds {
            let gvk = json!([{ "group": group, "kind": kind, "version": version }]);
            if let Some(Value::Object(schema)) = definitions.get_mut(name) {
                schema.insert("x-kubernetes-group-version-kind".into(), gvk);
            }
            let list = list_schema(self.dialect, name, group, version, kind);
            definitions.insert(list_name(name), list);
        }
        for (name, schema) in definitions.iter_mut() {
            metadata_optional(schema);
            annotate_patch_strategies(name, schema);
        }
        definitions.sort_keys();
        definitions
    }
}

/// Takes `metadata` out of a schema's `required` list (and drops a list
/// left empty). k8s-openapi lists it on every resource because its Rust
/// field is not an `Option`, but upstream's field is `omitempty` and no
/// upstream schema requires it: kubectl validates create-only kinds (the
/// reviews) against these schemas on the client, so a review written
/// without `metadata`, as the Kubernetes docs write them, must pass.
fn metadata_optional(schema: &mut Value) {
    let Some(object) = schema.as_object_mut() else {
        return;
    };
    let Some(Value::Array(required)) = object.get_mut("required") else {
        return;
    };
    required.retain(|field| field != "metadata");
    if required.is_empty() {
        object.remove("required");
    }
}

/// The Status schema name.
pub(super) const STATUS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Status";
/// The DeleteOptions schema name.
pub(super) const DELETE_OPTIONS: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions";
/// The Patch schema name.
pub(super) const PATCH: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.Patch";
const LIST_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta";
const OBJECT_META: &str = "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta";

/// A `<Kind>List` schema (k8s-openapi has no schema for its generic list).
fn list_schema(dialect: Dialect, item: &str, group: &str, version: &str, kind: &str) -> Value {
    let metadata = match dialect {
        Dialect::V3 => json!({
            "allOf": [dialect.reference(LIST_META)],
            "description": "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
        }),
        Dialect::V2 => {
            let mut r = dialect.reference(LIST_META);
            r["description"] = json!(
                "Standard list metadata. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds"
            );
            r
        }
    };
    json!({
        "description": format!("{kind}List is a list of {kind} objects."),
        "type": "object",
        "required": ["items"],
        "properties": {
            "apiVersion": {
                "description": "APIVersion defines the versioned schema of this representation of an object. Servers should convert recognized schemas to the latest internal value, and may reject unrecognized values. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
                "type": "string",
            },
            "items": {
                "description": format!("List of {kind} objects."),
                "type": "array",
                "items": dialect.reference(item),
            },
            "kind": {
                "description": "Kind is a string value representing the REST resource this object represents. Servers may infer this from the endpoint the client submits requests to. Cannot be updated. In CamelCase. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
                "type": "string",
            },
            "metadata": metadata,
        },
        "x-kubernetes-group-version-kind": [{ "group": group, "kind": format!("{kind}List"), "version": version }],
    })
}

/// Where a type sits in an object, as far as the server's patch strategy
/// table cares (it keys a few list names by their parent field).
fn type_context(schema_name: &str) -> &'static [&'static str] {
    match schema_name.rsplit('.').next().unwrap_or("") {
        "Container" | "EphemeralContainer" => &["spec", "containers"],
        "ServiceSpec" => &["spec"],
        "ObjectMeta" => &["metadata"],
        "NodeStatus" => &["status"],
        _ => &["", ""],
    }
}

/// Marks list properties with the patch strategy the server applies to
/// them, so kubectl's three-way patches agree with the server's merge.
fn annotate_patch_strategies(schema_name: &str, schema: &mut Value) {
    let context = type_context(schema_name);
    let Some(properties) = schema.get_mut("properties").and_then(Value::as_object_mut) else {
        return;
    };
    for (field, property) in properties.iter_mut() {
        if property.get("type").and_then(Value::as_str) != Some("array") {
            continue;
        }
        let mut path: Vec<&str> = context.to_vec();
        path.push(field);
        let (strategy, key) = match list_strategy(&path) {
            ListStrategy::Replace => continue,
            ListStrategy::MergeByKey(key) => ("merge", Some(key)),
            ListStrategy::MergePrimitives => ("merge", None),
        };
        property["x-kubernetes-patch-strategy"] = json!(strategy);
        if let Some(key) = key {
            property["x-kubernetes-patch-merge-key"] = json!(key);
        }
    }
}

/// A custom kind's schema with the fields every object has: `metadata`
/// (the standard ObjectMeta), and `apiVersion` and `kind` unless declared.
fn with_standard_fields(mut schema: Value, metadata: Value) -> Value {
    let properties = schema
        .as_object_mut()
        .map(|s| s.entry("properties").or_insert_with(|| json!({})))
        .and_then(Value::as_object_mut);
    if let Some(properties) = properties {
        properties.insert("metadata".into(), metadata);
        for field in ["apiVersion", "kind"] {
            properties
                .entry(field)
                .or_insert_with(|| json!({ "type": "string" }));
        }
    }
    schema
}

/// A CRD's declared schema as upstream publishes it in OpenAPI v2, which
/// cannot say everything v3 can: `allOf`, `oneOf`, `anyOf` and `not` go; a
/// nullable field loses its type and shape and is no longer required; a
/// field that keeps unknown fields loses its properties and items; and an
/// array left without items loses its type (kubectl cannot read one).
fn v2_schema(schema: &Value) -> Value {
    let Some(object) = schema.as_object() else {
        return schema.clone();
    };
    let mut out = object.clone();
    for dropped in ["allOf", "oneOf", "anyOf", "not"] {
        out.remove(dropped);
    }
    let is_true = |v: Option<&Value>| v.is_some_and(|v| *v == Value::Bool(true));
    let nullable = is_true(out.remove("nullable").as_ref());
    let preserves = is_true(out.get("x-kubernetes-preserve-unknown-fields"));
    if nullable {
        out.remove("type");
    }
    if nullable || preserves {
        out.remove("properties");
        out.remove("items");
    }
    let mut nullable_fields = Vec::new();
    if let Some(Value::Object(properties)) = out.get_mut("properties") {
        for (name, field) in properties.iter_mut() {
            if is_true(field.get("nullable")) {
                nullable_fields.push(name.clone());
            }
            *field = v2_schema(field);
        }
    }
    if let Some(Value::Array(required)) = out.get_mut("required") {
        required.retain(|r| !nullable_fields.iter().any(|f| r == f.as_str()));
    }
    if let Some(items) = out.get_mut("items") {
        *items = v2_schema(items);
    }
    if let Some(additional) = out.get_mut("additionalProperties")
        && additional.is_object()
    {
        *additional = v2_schema(additional);
    }
    if out.get("type").is_some_and(|t| t == "array") && !out.contains_key("items") {
        out.remove("type");
    }
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pod_schema_has_upstream_names_and_extensions() {
        let mut set = SchemaSet::new(Dialect::V3);
        let name = set.add_kind("", "v1", "Pod").unwrap();
        assert_eq!(name, "io.k8s.api.core.v1.Pod");
        set.add_kind("", "v1", "Service").unwrap();
        let defs = set.finish();
        let pod = &defs["io.k8s.api.core.v1.Pod"];
        assert_eq!(
            pod["x-kubernetes-group-version-kind"],
            json!([{"group": "", "kind": "Pod", "version": "v1"}])
        );
        // References with a description are wrapped in allOf (OpenAPI 3).
        assert_eq!(
            pod["properties"]["spec"]["allOf"][0]["$ref"],
            "#/components/schemas/io.k8s.api.core.v1.PodSpec"
        );
        let containers = &defs["io.k8s.api.core.v1.PodSpec"]["properties"]["containers"];
        assert_eq!(containers["x-kubernetes-patch-merge-key"], "name");
        assert_eq!(containers["x-kubernetes-patch-strategy"], "merge");
        let ports = &defs["io.k8s.api.core.v1.Container"]["properties"]["ports"];
        assert_eq!(ports["x-kubernetes-patch-merge-key"], "containerPort");
        let service_ports = &defs["io.k8s.api.core.v1.ServiceSpec"]["properties"]["ports"];
        assert_eq!(service_ports["x-kubernetes-patch-merge-key"], "port");
        assert!(defs["io.k8s.api.core.v1.PodList"]["properties"]["items"].is_object());
        assert!(defs.contains_key("io.k8s.apimachinery.pkg.apis.meta.v1.WatchEvent"));
        assert!(defs.contains_key(STATUS));
    }

    #[test]
    fn no_kind_requires_metadata_as_upstream() {
        for dialect in [Dialect::V2, Dialect::V3] {
            let mut set = SchemaSet::new(dialect);
            for (group, kind) in [
                ("", "Pod"),
                ("", "Binding"),
                ("authorization.k8s.io", "SelfSubjectAccessReview"),
            ] {
                set.add_kind(group, "v1", kind).unwrap();
            }
            let defs = set.finish();
            let required = |name: &str| defs[name].get("required").cloned();
            assert_eq!(required("io.k8s.api.core.v1.Pod"), None);
            assert_eq!(
                required("io.k8s.api.core.v1.Binding"),
                Some(json!(["target"]))
            );
            assert_eq!(
                required("io.k8s.api.authorization.v1.SelfSubjectAccessReview"),
                Some(json!(["spec"]))
            );
            assert!(
                defs.values().filter_map(|d| d.get("required")).all(|r| r
                    .as_array()
                    .is_some_and(|r| !r.contains(&json!("metadata")))),
                "no schema requires metadata"
            );
        }
    }

    #[test]
    fn v2_keeps_descriptions_beside_references() {
        let mut set = SchemaSet::new(Dialect::V2);
        set.add_kind("apps", "v1", "Deployment").unwrap();
        let defs = set.finish();
        let spec = &defs["io.k8s.api.apps.v1.Deployment"]["properties"]["spec"];
        assert_eq!(
            spec["$ref"],
            "#/definitions/io.k8s.api.apps.v1.DeploymentSpec"
        );
        assert!(spec["description"].is_string());
    }

    #[test]
    fn custom_kinds_get_an_open_schema_under_upstream_names() {
        let mut set = SchemaSet::new(Dialect::V3);
        assert!(
            set.add_kind("stable.example.com", "v1", "CronTab")
                .is_none()
        );
        let name = set.add_custom_kind("stable.example.com", "v1", "CronTab", None);
        assert_eq!(name, "com.example.stable.v1.CronTab");
        let defs = set.finish();
        let schema = &defs["com.example.stable.v1.CronTab"];
        assert_eq!(schema["x-kubernetes-preserve-unknown-fields"], true);
        assert_eq!(
            schema["x-kubernetes-group-version-kind"][0]["kind"],
            "CronTab"
        );
        assert!(defs.contains_key(OBJECT_META));
        assert!(defs.contains_key("com.example.stable.v1.CronTabList"));
    }
    #[test]
    fn a_declared_schema_is_published_in_v2_as_far_as_v2_can_say_it() {
        let declared = json!({"type": "object", "properties": {
            "spec": {"type": "object", "required": ["size", "note"], "properties": {
                "size": {"type": "integer", "minimum": 1, "default": 1},
                "note": {"type": "string", "nullable": true},
                "port": {"x-kubernetes-int-or-string": true,
                    "anyOf": [{"type": "integer"}, {"type": "string"}]},
                "raw": {"type": "object", "x-kubernetes-preserve-unknown-fields": true,
                    "properties": {"a": {"type": "string"}}},
                "list": {"type": "array", "items": {"type": "object",
                    "x-kubernetes-preserve-unknown-fields": true}},
                "loose": {"type": "array", "x-kubernetes-preserve-unknown-fields": true,
                    "items": {"type": "string"}},
                "labels": {"type": "object", "additionalProperties": {
                    "type": "string", "nullable": true}}}}}});
        let mut set = SchemaSet::new(Dialect::V2);
        let name = set.add_custom_kind("example.com", "v1", "Widget", Some(&declared));
        let defs = set.finish();
        let schema = &defs[&name];
        assert_eq!(
            schema["properties"]["metadata"]["$ref"],
            format!("#/definitions/{OBJECT_META}")
        );
        assert_eq!(schema["properties"]["kind"]["type"], "string");
        assert!(schema.get("x-kubernetes-preserve-unknown-fields").is_none());
        let spec = &schema["properties"]["spec"];
        assert_eq!(
            spec["required"],
            json!(["size"]),
            "a nullable field is not required"
        );
        assert_eq!(
            spec["properties"]["size"],
            json!({"type": "integer", "minimum": 1, "default": 1})
        );
        assert_eq!(spec["properties"]["note"], json!({}), "nullable: no type");
        assert_eq!(
            spec["properties"]["port"],
            json!({"x-kubernetes-int-or-string": true})
        );
        assert_eq!(
            spec["properties"]["raw"],
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(
            spec["properties"]["list"]["items"],
            json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true})
        );
        assert_eq!(
            spec["properties"]["loose"],
            json!({"x-kubernetes-preserve-unknown-fields": true}),
            "an array without items"
        );
        assert_eq!(
            spec["properties"]["labels"]["additionalProperties"],
            json!({})
        );
    }
}
