//! The OpenAPI v2 document in gnostic's protobuf form
//! (`application/com.github.proto-openapi.spec.v2@v1.0+protobuf`), which
//! client-go's discovery client asks `/openapi/v2` for. Only the messages
//! and fields the generated JSON document uses are declared; the field
//! numbers are those of gnostic's `openapiv2/OpenAPIv2.proto`.

use prost::Message;
use serde_json::{Map, Value};

#[derive(Clone, PartialEq, Message)]
struct Document {
    #[prost(string, tag = "1")]
    swagger: String,
    #[prost(message, optional, tag = "2")]
    info: Option<Info>,
    #[prost(message, optional, tag = "8")]
    paths: Option<Paths>,
    #[prost(message, optional, tag = "9")]
    definitions: Option<Definitions>,
}

#[derive(Clone, PartialEq, Message)]
struct Info {
    #[prost(string, tag = "1")]
    title: String,
    #[prost(string, tag = "2")]
    version: String,
}

#[derive(Clone, PartialEq, Message)]
struct Paths {
    #[prost(message, repeated, tag = "2")]
    path: Vec<NamedPathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedPathItem {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<PathItem>,
}

#[derive(Clone, PartialEq, Message)]
struct PathItem {
    #[prost(message, optional, tag = "2")]
    get: Option<Operation>,
    #[prost(message, optional, tag = "3")]
    put: Option<Operation>,
    #[prost(message, optional, tag = "4")]
    post: Option<Operation>,
    #[prost(message, optional, tag = "5")]
    delete: Option<Operation>,
    #[prost(message, optional, tag = "8")]
    patch: Option<Operation>,
    #[prost(message, repeated, tag = "9")]
    parameters: Vec<ParametersItem>,
}

#[derive(Clone, PartialEq, Message)]
struct Operation {
    #[prost(string, repeated, tag = "1")]
    tags: Vec<String>,
    #[prost(string, tag = "3")]
    description: String,
    #[prost(string, tag = "5")]
    operation_id: String,
    #[prost(string, repeated, tag = "6")]
    produces: Vec<String>,
    #[prost(string, repeated, tag = "7")]
    consumes: Vec<String>,
    #[prost(message, repeated, tag = "8")]
    parameters: Vec<ParametersItem>,
    #[prost(message, optional, tag = "9")]
    responses: Option<Responses>,
    #[prost(string, repeated, tag = "10")]
    schemes: Vec<String>,
    #[prost(message, repeated, tag = "13")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct ParametersItem {
    #[prost(message, optional, tag = "1")]
    parameter: Option<Parameter>,
}

#[derive(Clone, PartialEq, Message)]
struct Parameter {
    #[prost(message, optional, tag = "1")]
    body_parameter: Option<BodyParameter>,
    #[prost(message, optional, tag = "2")]
    non_body_parameter: Option<NonBodyParameter>,
}

#[derive(Clone, PartialEq, Message)]
struct BodyParameter {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(string, tag = "2")]
    name: String,
    #[prost(string, tag = "3")]
    r#in: String,
    #[prost(bool, tag = "4")]
    required: bool,
    #[prost(message, optional, tag = "5")]
    schema: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct NonBodyParameter {
    #[prost(message, optional, tag = "3")]
    query_parameter_sub_schema: Option<QueryParameter>,
    #[prost(message, optional, tag = "4")]
    path_parameter_sub_schema: Option<PathParameter>,
}

/// Declares one of gnostic's non-body parameter sub-schemas and how a JSON
/// parameter `in` `$location` becomes it: the query and path messages carry
/// the same fields the document uses, numbered alike up to `name` and apart
/// after it.
macro_rules! non_body_parameter {
    ($message:ident, $location:literal, type = $type_tag:tt, unique_items = $unique_tag:tt) => {
        #[derive(Clone, PartialEq, Message)]
        struct $message {
            #[prost(bool, tag = "1")]
            required: bool,
            #[prost(string, tag = "2")]
            r#in: String,
            #[prost(string, tag = "3")]
            description: String,
            #[prost(string, tag = "4")]
            name: String,
            #[prost(string, tag = $type_tag)]
            r#type: String,
            #[prost(bool, tag = $unique_tag)]
            unique_items: bool,
        }

        impl $message {
            fn of(v: &Value) -> Self {
                Self {
                    required: flag(v, "required"),
                    r#in: $location.into(),
                    description: text(v, "description"),
                    name: text(v, "name"),
                    r#type: text(v, "type"),
                    unique_items: flag(v, "uniqueItems"),
                }
            }
        }
    };
}

non_body_parameter!(QueryParameter, "query", type = "6", unique_items = "20");
non_body_parameter!(PathParameter, "path", type = "5", unique_items = "19");

#[derive(Clone, PartialEq, Message)]
struct Responses {
    #[prost(message, repeated, tag = "1")]
    response_code: Vec<NamedResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedResponseValue {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<ResponseValue>,
}

#[derive(Clone, PartialEq, Message)]
struct ResponseValue {
    #[prost(message, optional, tag = "1")]
    response: Option<Response>,
}

#[derive(Clone, PartialEq, Message)]
struct Response {
    #[prost(string, tag = "1")]
    description: String,
    #[prost(message, optional, tag = "2")]
    schema: Option<SchemaItem>,
}

#[derive(Clone, PartialEq, Message)]
struct SchemaItem {
    #[prost(message, optional, tag = "1")]
    schema: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Definitions {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedSchema {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Schema {
    #[prost(string, tag = "1")]
    r#ref: String,
    #[prost(string, tag = "2")]
    format: String,
    #[prost(string, tag = "3")]
    title: String,
    #[prost(string, tag = "4")]
    description: String,
    #[prost(message, optional, tag = "5")]
    default: Option<Any>,
    #[prost(bool, tag = "16")]
    unique_items: bool,
    #[prost(string, repeated, tag = "19")]
    required: Vec<String>,
    #[prost(message, repeated, tag = "20")]
    r#enum: Vec<Any>,
    #[prost(message, optional, boxed, tag = "21")]
    additional_properties: Option<Box<AdditionalPropertiesItem>>,
    #[prost(message, optional, tag = "22")]
    r#type: Option<TypeItem>,
    #[prost(message, optional, tag = "23")]
    items: Option<ItemsItem>,
    #[prost(message, repeated, tag = "24")]
    all_of: Vec<Schema>,
    #[prost(message, optional, tag = "25")]
    properties: Option<Properties>,
    #[prost(message, repeated, tag = "31")]
    vendor_extension: Vec<NamedAny>,
}

#[derive(Clone, PartialEq, Message)]
struct AdditionalPropertiesItem {
    #[prost(message, optional, tag = "1")]
    schema: Option<Schema>,
    #[prost(bool, optional, tag = "2")]
    boolean: Option<bool>,
}

#[derive(Clone, PartialEq, Message)]
struct TypeItem {
    #[prost(string, repeated, tag = "1")]
    value: Vec<String>,
}

#[derive(Clone, PartialEq, Message)]
struct ItemsItem {
    #[prost(message, repeated, tag = "1")]
    schema: Vec<Schema>,
}

#[derive(Clone, PartialEq, Message)]
struct Properties {
    #[prost(message, repeated, tag = "1")]
    additional_properties: Vec<NamedSchema>,
}

#[derive(Clone, PartialEq, Message)]
struct NamedAny {
    #[prost(string, tag = "1")]
    name: String,
    #[prost(message, optional, tag = "2")]
    value: Option<Any>,
}

/// gnostic's `Any`: arbitrary values travel as YAML text (JSON is YAML).
#[derive(Clone, PartialEq, Message)]
struct Any {
    #[prost(string, tag = "2")]
    yaml: String,
}

fn text(v: &Value, key: &str) -> String {
    v.get(key).and_then(Value::as_str).unwrap_or("").to_string()
}

fn strings(v: &Value, key: &str) -> Vec<String> {
    crate::object::strings(&v[key])
}

fn flag(v: &Value, key: &str) -> bool {
    v.get(key).and_then(Value::as_bool).unwrap_or(false)
}

/// `f` of each element of the array at `key`, none when it is not one.
fn each<T>(v: &Value, key: &str, f: impl Fn(&Value) -> T) -> Vec<T> {
    v.get(key)
        .and_then(Value::as_array)
        .map(|a| a.iter().map(f).collect())
        .unwrap_or_default()
}

fn any(v: &Value) -> Any {
    Any {
        yaml: v.to_string(),
    }
}

fn extensions(v: &Value) -> Vec<NamedAny> {
    v.as_object()
        .map(|m| {
            m.iter()
                .filter(|(k, _)| k.starts_with("x-"))
                .map(|(k, v)| NamedAny {
                    name: k.clone(),
                    value: Some(any(v)),
                })
                .collect()
        })
        .unwrap_or_default()
}

fn named_schemas(m: Option<&Map<String, Value>>) -> Vec<NamedSchema> {
    m.map(|m| {
        m.iter()
            .map(|(name, s)| NamedSchema {
                name: name.clone(),
                value: Some(schema(s)),
            })
            .collect()
    })
    .unwrap_or_default()
}

fn schema(v: &Value) -> Schema {
    let types = match v.get("type") {
        Some(Value::String(t)) => vec![t.clone()],
        Some(Value::Array(_)) => strings(v, "type"),
        _ => Vec::new(),
    };
    Schema {
        r#ref: text(v, "$ref"),
        format: text(v, "format"),
        title: text(v, "title"),
        description: text(v, "description"),
        default: v.get("default").map(any),
        unique_items: flag(v, "uniqueItems"),
        required: strings(v, "required"),
        r#enum: each(v, "enum", any),
        additional_properties: v.get("additionalProperties").map(|a| {
            Box::new(match a {
                Value::Bool(b) => AdditionalPropertiesItem {
                    schema: None,
                    boolean: Some(*b),
                },
                other => AdditionalPropertiesItem {
                    schema: Some(schema(other)),
                    boolean: None,
                },
            })
        }),
        r#type: (!types.is_empty()).then_some(TypeItem { value: types }),
        items: v.get("items").map(|i| ItemsItem {
            schema: match i {
                Value::Array(many) => many.iter().map(schema).collect(),
                one => vec![schema(one)],
            },
        }),
        all_of: each(v, "allOf", schema),
        properties: v
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| Properties {
                additional_properties: named_schemas(Some(p)),
            }),
        vendor_extension: extensions(v),
    }
}

fn parameter(v: &Value) -> ParametersItem {
    let parameter = match v.get("in").and_then(Value::as_str) {
        Some("body") => Parameter {
            body_parameter: Some(BodyParameter {
                description: text(v, "description"),
                name: text(v, "name"),
                r#in: "body".into(),
                required: flag(v, "required"),
                schema: v.get("schema").map(schema),
            }),
            non_body_parameter: None,
        },
        Some("path") => Parameter {
            body_parameter: None,
            non_body_parameter: Some(NonBodyParameter {
                query_parameter_sub_schema: None,
                path_parameter_sub_schema: Some(PathParameter::of(v)),
            }),
        },
        _ => Parameter {
            body_parameter: None,
            non_body_parameter: Some(NonBodyParameter {
                query_parameter_sub_schema: Some(QueryParameter::of(v)),
                path_parameter_sub_schema: None,
            }),
        },
    };
    ParametersItem {
        parameter: Some(parameter),
    }
}

fn parameters(v: &Value) -> Vec<ParametersItem> {
    each(v, "parameters", parameter)
}

fn operation(v: &Value) -> Operation {
    let responses = v
        .get("responses")
        .and_then(Value::as_object)
        .map(|r| Responses {
            response_code: r
                .iter()
                .map(|(code, resp)| NamedResponseValue {
                    name: code.clone(),
                    value: Some(ResponseValue {
                        response: Some(Response {
                            description: text(resp, "description"),
                            schema: resp.get("schema").map(|s| SchemaItem {
                                schema: Some(schema(s)),
                            }),
                        }),
                    }),
                })
                .collect(),
        });
    Operation {
        tags: strings(v, "tags"),
        description: text(v, "description"),
        operation_id: text(v, "operationId"),
        produces: strings(v, "produces"),
        consumes: strings(v, "consumes"),
        parameters: parameters(v),
        responses,
        schemes: strings(v, "schemes"),
        vendor_extension: extensions(v),
    }
}

/// Encodes the JSON v2 document as gnostic protobuf.
pub(super) fn encode(doc: &Value) -> Vec<u8> {
    let paths = doc["paths"].as_object().map(|paths| Paths {
        path: paths
            .iter()
            .map(|(name, item)| NamedPathItem {
                name: name.clone(),
                value: Some(PathItem {
                    get: item.get("get").map(operation),
                    put: item.get("put").map(operation),
                    post: item.get("post").map(operation),
                    delete: item.get("delete").map(operation),
                    patch: item.get("patch").map(operation),
                    parameters: parameters(item),
                }),
            })
            .collect(),
    });
    Document {
        swagger: text(doc, "swagger"),
        info: Some(Info {
            title: text(&doc["info"], "title"),
            version: text(&doc["info"], "version"),
        }),
        paths,
        definitions: Some(Definitions {
            additional_properties: named_schemas(doc["definitions"].as_object()),
        }),
    }
    .encode_to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn round_trips_what_kubectl_reads() {
        let doc = json!({
            "swagger": "2.0",
            "info": {"title": "Kubernetes", "version": "v1"},
            "paths": {"/api/v1/pods": {"get": {"operationId": "list",
                "consumes": ["*/*"],
                "x-kubernetes-group-version-kind": {"group": "", "kind": "Pod", "version": "v1"}}}},
            "definitions": {"io.k8s.api.core.v1.Pod": {"type": "object",
                "properties": {"spec": {"$ref": "#/definitions/x", "description": "d"}},
                "additionalProperties": false,
                "x-kubernetes-group-version-kind": [{"group": "", "kind": "Pod", "version": "v1"}]}},
        });
        let bytes = encode(&doc);
        let decoded = Document::decode(bytes.as_slice()).unwrap();
        assert_eq!(decoded.swagger, "2.0");
        let pod = &decoded.definitions.unwrap().additional_properties[0];
        assert_eq!(pod.name, "io.k8s.api.core.v1.Pod");
        let pod = pod.value.as_ref().unwrap();
        assert_eq!(pod.r#type.as_ref().unwrap().value, vec!["object"]);
        assert_eq!(
            pod.properties.as_ref().unwrap().additional_properties[0]
                .value
                .as_ref()
                .unwrap()
                .r#ref,
            "#/definitions/x"
        );
        assert_eq!(
            pod.vendor_extension[0].name,
            "x-kubernetes-group-version-kind"
        );
        let op = decoded.paths.unwrap().path[0]
            .value
            .clone()
            .unwrap()
            .get
            .unwrap();
        assert_eq!(op.operation_id, "list");
        assert!(
            op.vendor_extension[0]
                .value
                .as_ref()
                .unwrap()
                .yaml
                .contains("Pod")
        );
    }

    #[test]
    fn non_body_parameters_keep_gnostics_field_numbers() {
        let v = json!({"name": "n", "type": "string", "required": true, "uniqueItems": true});
        // required (1), in (2), name (4), then type and uniqueItems (each
        // key a field number and wire type): 5 and 19 for a path parameter,
        // 6 and 20 for a query parameter.
        for (encoded, location, type_key, unique_items_key) in [
            (PathParameter::of(&v).encode_to_vec(), "path", 0x2a, 0x98),
            (QueryParameter::of(&v).encode_to_vec(), "query", 0x32, 0xa0),
        ] {
            let location_len = u8::try_from(location.len()).unwrap();
            let head = [0x08, 0x01, 0x12, location_len];
            let fields: [&[u8]; 7] = [
                &head,
                location.as_bytes(),
                &[0x22, 0x01],
                b"n",
                &[type_key, 0x06],
                b"string",
                &[unique_items_key, 0x01, 0x01],
            ];
            assert_eq!(encoded, fields.concat(), "{location}");
        }
    }
}
