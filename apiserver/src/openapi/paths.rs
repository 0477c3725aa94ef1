//! The operations of each resource, as upstream's OpenAPI lists them: paths
//! per collection, object and subresource, with the verbs the handlers serve,
//! their query parameters (notably `fieldValidation`, which kubectl looks for
//! before leaving validation to the server), request bodies, responses and
//! the `x-kubernetes-action` / `x-kubernetes-group-version-kind` extensions.

use serde_json::{Map, Value, json};

use super::schemas::{DELETE_OPTIONS, Dialect, PATCH, STATUS, list_name};
use crate::registry::{ResourceInfo, Subresource};

/// Where a parameter goes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum In {
    Path,
    Query,
}

/// One parameter, rendered for either OpenAPI version.
struct Param {
    name: &'static str,
    location: In,
    kind: &'static str,
    description: &'static str,
}

const fn query(name: &'static str, kind: &'static str, description: &'static str) -> Param {
    Param {
        name,
        location: In::Query,
        kind,
        description,
    }
}

const NAME: Param = Param {
    name: "name",
    location: In::Path,
    kind: "string",
    description: "name of the object",
};
const NAMESPACE: Param = Param {
    name: "namespace",
    location: In::Path,
    kind: "string",
    description: "object name and auth scope, such as for teams and projects",
};
const PRETTY: Param = query("pretty", "string", "If 'true', the output is indented.");
const DRY_RUN: Param = query(
    "dryRun",
    "string",
    "When present (only 'All' is valid), the request is validated and admitted but nothing is persisted.",
);
const FIELD_MANAGER: Param = query(
    "fieldManager",
    "string",
    "The name of the actor making the change, recorded in managedFields.",
);
const FIELD_VALIDATION: Param = query(
    "fieldValidation",
    "string",
    "What to do with unknown or duplicate fields in the request body: Ignore drops them silently, Warn (the default) drops them and answers with a Warning header for each, Strict fails the request with every offending field listed.",
);
const FORCE: Param = query(
    "force",
    "boolean",
    "Apply requests only: take over fields other managers own instead of failing with a conflict.",
);
const LIST_PARAMS: &[Param] = &[
    query(
        "allowWatchBookmarks",
        "boolean",
        "Watch only: ask for BOOKMARK events.",
    ),
    query(
        "continue",
        "string",
        "The token from a previous paginated list, to fetch the next page.",
    ),
    query(
        "fieldSelector",
        "string",
        "Restricts the objects by their fields.",
    ),
    query(
        "labelSelector",
        "string",
        "Restricts the objects by their labels.",
    ),
    query(
        "limit",
        "integer",
        "The most objects to return in one page.",
    ),
    query(
        "resourceVersion",
        "string",
        "Which version of the collection to read or watch from.",
    ),
    query(
        "resourceVersionMatch",
        "string",
        "How resourceVersion is applied to a list.",
    ),
    query(
        "sendInitialEvents",
        "boolean",
        "Watch only: begin with the current objects, then a bookmark.",
    ),
    query(
        "timeoutSeconds",
        "integer",
        "Ends the list or watch after this many seconds.",
    ),
    query("watch", "boolean", "Stream changes instead of listing."),
];
const DELETE_PARAMS: &[Param] = &[
    DRY_RUN,
    query(
        "gracePeriodSeconds",
        "integer",
        "Seconds before the object is deleted; 0 deletes at once.",
    ),
    query(
        "orphanDependents",
        "boolean",
        "Deprecated: use propagationPolicy.",
    ),
    query(
        "propagationPolicy",
        "string",
        "Orphan, Background or Foreground deletion of dependents.",
    ),
];

/// The request body of an operation.
#[derive(Clone, Copy)]
enum Body<'a> {
    Object(&'a str),
    Patch { strategic: bool },
    Delete,
}

/// One operation before rendering.
struct Op<'a> {
    method: &'static str,
    action: &'static str,
    id: String,
    description: String,
    params: Vec<&'a Param>,
    body: Option<Body<'a>>,
    /// Response codes with the schema each returns.
    responses: Vec<(&'static str, String)>,
    gvk: (&'a str, &'a str, &'a str),
}

/// The operations on one object: the resource's own objects and their
/// subresources are read, replaced, patched and created alike.
#[derive(Debug, Clone, Copy)]
enum ObjectVerb {
    Get,
    Update,
    Patch,
    Create,
}

impl ObjectVerb {
    /// The operation for an API verb, if it is one of these.
    fn of(verb: &str) -> Option<Self> {
        match verb {
            "get" => Some(Self::Get),
            "update" => Some(Self::Update),
            "patch" => Some(Self::Patch),
            "create" => Some(Self::Create),
            _ => None,
        }
    }

    /// How the operation's id begins.
    fn prefix(self) -> &'static str {
        match self {
            Self::Get => "read",
            Self::Update => "replace",
            Self::Patch => "patch",
            Self::Create => "create",
        }
    }
}

/// `verb` on an object of `schema`: its method, parameters, body and
/// responses, with the `id` and `description` the caller names it by.
fn object_op<'a>(
    verb: ObjectVerb,
    schema: &'a str,
    strategic: bool,
    gvk: (&'a str, &'a str, &'a str),
    id: String,
    description: String,
) -> Op<'a> {
    let write = vec![&DRY_RUN, &FIELD_MANAGER, &FIELD_VALIDATION];
    let (method, params, body, codes): (_, _, _, &[&'static str]) = match verb {
        ObjectVerb::Get => ("get", vec![], None, &["200"]),
        ObjectVerb::Update => ("put", write, Some(Body::Object(schema)), &["200", "201"]),
        ObjectVerb::Patch => {
            let mut params = write;
            params.push(&FORCE);
            (
                "patch",
                params,
                Some(Body::Patch { strategic }),
                &["200", "201"],
            )
        }
        ObjectVerb::Create => (
            "post",
            write,
            Some(Body::Object(schema)),
            &["200", "201", "202"],
        ),
    };
    Op {
        method,
        action: method,
        id,
        description,
        params,
        body,
        responses: codes
            .iter()
            .map(|code| (*code, schema.to_string()))
            .collect(),
        gvk,
    }
}

/// What a resource's paths are generated from.
pub(super) struct ResourceSchema<'a> {
    pub info: &'a ResourceInfo,
    /// Schema name of the resource's kind.
    pub schema: String,
    /// Schema names of its subresources' kinds, where they differ from the
    /// resource's own.
    pub subresource_schemas: Vec<(Subresource, String)>,
    /// Strategic merge patch is accepted (built-in kinds only).
    pub strategic: bool,
}

/// The group as operation ids and tags spell it: `core` for the core
/// group, without a `.k8s.io` suffix.
fn id_group(group: &str) -> &str {
    if group.is_empty() {
        "core"
    } else {
        group.strip_suffix(".k8s.io").unwrap_or(group)
    }
}

/// `s` with its first character upper-cased (`apps` → `Apps`).
fn upper_first(s: &str) -> String {
    let mut chars = s.chars();
    chars
        .next()
        .map(|first| first.to_uppercase().chain(chars).collect())
        .unwrap_or_default()
}

/// `CoreV1`, `AppsV1`, `RbacAuthorizationV1`: the group version as operation
/// ids spell it.
fn id_group_version(group: &str, version: &str) -> String {
    let mut out: String = id_group(group).split(['.', '-']).map(upper_first).collect();
    out.push_str(&upper_first(version));
    out
}

/// `core_v1`, `apps_v1`, `rbacAuthorization_v1`.
fn tag(group: &str, version: &str) -> String {
    let group: String = id_group(group)
        .split('.')
        .enumerate()
        .map(|(i, part)| {
            if i == 0 {
                part.to_string()
            } else {
                upper_first(part)
            }
        })
        .collect();
    format!("{group}_{version}")
}

/// Every path of one resource, as `(path, path parameters, operations)`.
fn resource_paths<'a>(
    r: &'a ResourceSchema<'a>,
) -> Vec<(String, Vec<&'static Param>, Vec<Op<'a>>)> {
    let info = r.info;
    let gv = id_group_version(info.group, info.version);
    let root = if info.group.is_empty() {
        format!("/api/{}", info.version)
    } else {
        format!("/apis/{}/{}", info.group, info.version)
    };
    let (collection, scope_params, scope) = if info.namespaced {
        (
            format!("{root}/namespaces/{{namespace}}/{}", info.resource),
            vec![&NAMESPACE],
            "Namespaced",
        )
    } else {
        (format!("{root}/{}", info.resource), vec![], "")
    };
    let kind = info.kind;
    let gvk = (info.group, info.version, kind);
    let list_schema = list_name(&r.schema);
    let mut out = Vec::new();

    let mut collection_params = scope_params.clone();
    collection_params.push(&PRETTY);
    let mut list_params: Vec<&Param> = LIST_PARAMS.iter().collect();
    list_params.sort_by_key(|p| p.name);
    let own_op = |verb: ObjectVerb, description: String| {
        let id = format!("{}{gv}{scope}{kind}", verb.prefix());
        object_op(verb, &r.schema, r.strategic, gvk, id, description)
    };
    let create = own_op(ObjectVerb::Create, format!("create a {kind}"));
    if info.is_virtual() {
        // Reviews are only ever created: one path, one operation.
        out.push((collection, collection_params, vec![create]));
        return out;
    }
    let mut collection_ops = vec![
        Op {
            method: "get",
            action: "list",
            id: format!("list{gv}{scope}{kind}"),
            description: format!("list or watch objects of kind {kind}"),
            params: list_params.clone(),
            body: None,
            responses: vec![("200", list_schema.clone())],
            gvk,
        },
        create,
    ];
    // Namespaces are deleted one by one: no collection delete.
    if info.strategy.deletes_collections() {
        collection_ops.push(Op {
            method: "delete",
            action: "deletecollection",
            id: format!("delete{gv}Collection{scope}{kind}"),
            description: format!("delete collection of {kind}"),
            params: DELETE_PARAMS
                .iter()
                .chain(LIST_PARAMS.iter())
                .filter(|p| p.name != "watch" && p.name != "allowWatchBookmarks")
                .collect(),
            body: Some(Body::Delete),
            responses: vec![("200", STATUS.to_string())],
            gvk,
        });
    }
    out.push((
        collection.clone(),
        collection_params.clone(),
        collection_ops,
    ));
    if info.namespaced {
        out.push((
            format!("{root}/{}", info.resource),
            vec![&PRETTY],
            vec![Op {
                method: "get",
                action: "list",
                id: format!("list{gv}{kind}ForAllNamespaces"),
                description: format!("list or watch objects of kind {kind}"),
                params: list_params,
                body: None,
                responses: vec![("200", list_schema.clone())],
                gvk,
            }],
        ));
    }
    let mut object_params = vec![&NAME];
    object_params.extend(scope_params.iter().copied());
    object_params.push(&PRETTY);
    out.push((
        format!("{collection}/{{name}}"),
        object_params.clone(),
        vec![
            own_op(ObjectVerb::Get, format!("read the specified {kind}")),
            own_op(ObjectVerb::Update, format!("replace the specified {kind}")),
            Op {
                method: "delete",
                action: "delete",
                id: format!("delete{gv}{scope}{kind}"),
                description: format!("delete a {kind}"),
                params: DELETE_PARAMS.iter().collect(),
                body: Some(Body::Delete),
                responses: vec![("200", r.schema.to_string()), ("202", r.schema.to_string())],
                gvk,
            },
            own_op(
                ObjectVerb::Patch,
                format!("partially update the specified {kind}"),
            ),
        ],
    ));
    for &sub in &info.subresources {
        // A proxy passes anything on; it has no object schema to describe.
        if sub == crate::registry::Subresource::Proxy {
            continue;
        }
        let own = r
            .subresource_schemas
            .iter()
            .find(|(s, _)| *s == sub)
            .map(|(_, name)| name.as_str());
        let Some(schema) = own.or(sub.kind().is_none().then_some(r.schema.as_str())) else {
            continue;
        };
        let sub_gvk = sub.kind().unwrap_or(gvk);
        let sub_kind = upper_first(sub.name());
        let ops = sub
            .verbs()
            .iter()
            .filter_map(|verb| ObjectVerb::of(verb))
            .map(|verb| {
                let prefix = verb.prefix();
                let id = format!("{prefix}{gv}{scope}{kind}{sub_kind}");
                let description = format!("{prefix} {} of the specified {kind}", sub.name());
                object_op(verb, schema, r.strategic, sub_gvk, id, description)
            })
            .collect();
        out.push((
            format!("{collection}/{{name}}/{}", sub.name()),
            object_params.clone(),
            ops,
        ));
    }
    out
}

const OBJECT_MEDIA: &[&str] = &[
    "application/json",
    "application/yaml",
    "application/vnd.kubernetes.protobuf",
];

fn patch_media(strategic: bool) -> Vec<&'static str> {
    let mut media = vec![
        "application/apply-patch+yaml",
        "application/json-patch+json",
        "application/merge-patch+json",
    ];
    if strategic {
        media.push("application/strategic-merge-patch+json");
    }
    media
}

fn render_param(p: &Param, dialect: Dialect) -> Value {
    let mut v = json!({
        "name": p.name,
        "in": if p.location == In::Path { "path" } else { "query" },
        "description": p.description,
    });
    match dialect {
        Dialect::V3 => v["schema"] = json!({ "type": p.kind, "uniqueItems": true }),
        Dialect::V2 => {
            v["type"] = json!(p.kind);
            v["uniqueItems"] = json!(true);
        }
    }
    if p.location == In::Path {
        v["required"] = json!(true);
    }
    v
}

fn gvk_json(gvk: (&str, &str, &str)) -> Value {
    json!({ "group": gvk.0, "version": gvk.1, "kind": gvk.2 })
}

fn body_schema(body: Body<'_>) -> &str {
    match body {
        Body::Object(schema) => schema,
        Body::Patch { .. } => PATCH,
        Body::Delete => DELETE_OPTIONS,
    }
}

fn body_media(body: Body<'_>) -> Vec<&'static str> {
    match body {
        Body::Patch { strategic } => patch_media(strategic),
        _ => OBJECT_MEDIA.to_vec(),
    }
}

fn render_op(op: &Op<'_>, tag_name: &str, dialect: Dialect) -> Value {
    let mut responses = Map::new();
    let produces: Vec<&str> = if op.action == "list" {
        let mut m = OBJECT_MEDIA.to_vec();
        m.extend([
            "application/json;stream=watch",
            "application/vnd.kubernetes.protobuf;stream=watch",
        ]);
        m
    } else {
        OBJECT_MEDIA.to_vec()
    };
    for (code, schema) in &op.responses {
        let text = match *code {
            "200" => "OK",
            "201" => "Created",
            "202" => "Accepted",
            _ => "",
        };
        let response = match dialect {
            Dialect::V3 => {
                let content: Map<String, Value> = produces
                    .iter()
                    .map(|m| {
                        (
                            m.to_string(),
                            json!({ "schema": dialect.reference(schema) }),
                        )
                    })
                    .collect();
                json!({ "description": text, "content": content })
            }
            Dialect::V2 => json!({ "description": text, "schema": dialect.reference(schema) }),
        };
        responses.insert(code.to_string(), response);
    }
    responses.insert("401".into(), json!({ "description": "Unauthorized" }));
    let mut params: Vec<Value> = op.params.iter().map(|p| render_param(p, dialect)).collect();
    let mut v = json!({
        "tags": [tag_name],
        "description": op.description,
        "operationId": op.id,
        "responses": responses,
        "x-kubernetes-action": op.action,
        "x-kubernetes-group-version-kind": gvk_json(op.gvk),
    });
    match dialect {
        Dialect::V3 => {
            if let Some(body) = op.body {
                let content: Map<String, Value> = body_media(body)
                    .iter()
                    .map(|m| {
                        (
                            m.to_string(),
                            json!({ "schema": dialect.reference(body_schema(body)) }),
                        )
                    })
                    .collect();
                v["requestBody"] =
                    json!({ "content": content, "required": !matches!(body, Body::Delete) });
            }
        }
        Dialect::V2 => {
            v["consumes"] = match op.body {
                Some(body) => json!(body_media(body)),
                None => json!(["*/*"]),
            };
            v["produces"] = json!(produces);
            v["schemes"] = json!(["https"]);
            if let Some(body) = op.body {
                params.insert(
                    0,
                    json!({
                        "name": "body",
                        "in": "body",
                        "required": !matches!(body, Body::Delete),
                        "schema": dialect.reference(body_schema(body)),
                    }),
                );
            }
        }
    }
    if !params.is_empty() {
        v["parameters"] = json!(params);
    }
    v
}

/// The `paths` object for a set of resources.
pub(super) fn paths(resources: &[ResourceSchema<'_>], dialect: Dialect) -> Map<String, Value> {
    let mut out = Map::new();
    for r in resources {
        let tag_name = tag(r.info.group, r.info.version);
        for (path, path_params, ops) in resource_paths(r) {
            let mut item = Map::new();
            item.insert(
                "parameters".into(),
                json!(
                    path_params
                        .iter()
                        .map(|p| render_param(p, dialect))
                        .collect::<Vec<_>>()
                ),
            );
            for op in &ops {
                item.insert(op.method.into(), render_op(op, &tag_name, dialect));
            }
            out.insert(path, Value::Object(item));
        }
    }
    out.sort_keys();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn operation_ids_spell_groups_as_upstream() {
        assert_eq!(id_group_version("", "v1"), "CoreV1");
        assert_eq!(
            id_group_version("rbac.authorization.k8s.io", "v1"),
            "RbacAuthorizationV1"
        );
        assert_eq!(id_group_version("apps", "v1"), "AppsV1");
        assert_eq!(
            tag("rbac.authorization.k8s.io", "v1"),
            "rbacAuthorization_v1"
        );
        assert_eq!(tag("", "v1"), "core_v1");
    }
}
