#!/usr/bin/env python3
"""Regenerates apiserver/src/protobuf_body/schema.txt: the protobuf field numbers
of the built-in Kubernetes messages (read from the prost attributes of the
k8s-pb crate's source) joined with their JSON field names (read from the
k8s-openapi crate's source), for the messages reachable from the served kinds.

Usage: gen_protobuf_schema.py K8S_PB_SRC K8S_OPENAPI_VERSION_SRC > schema.txt
  e.g. ~/.cargo/registry/src/*/k8s-pb-0.9.0/src
       ~/.cargo/registry/src/*/k8s-openapi-0.29.0/src/v1_33
(the crate sources land there after `cargo fetch` of a crate depending on them).
"""
import os
import re
import sys

pb_root, openapi_root = sys.argv[1], sys.argv[2]

FIELD_RE = re.compile(r'#\[prost\(([^)]*?)tag = "(\d+)"\)\]\s*pub (r#)?(\w+):\s*(.*?),\s*\n(?=\s*(?:///|#\[|\Z))', re.S)
STRUCT_RE = re.compile(r'pub struct (\w+) \{(.*?)\n\}', re.S)


def module_of(path, root):
    rel = os.path.relpath(path, root)
    parts = rel.split(os.sep)
    if parts[-1] == 'mod.rs':
        parts = parts[:-1]
    else:
        parts[-1] = parts[-1][:-3]
    return parts


def resolve(module, rust_type):
    """Full dotted message name for a Rust type path used in `module`."""
    inner = rust_type
    for wrapper in ('::core::option::Option<', '::prost::alloc::vec::Vec<', '::prost::alloc::boxed::Box<'):
        if inner.startswith(wrapper):
            inner = inner[len(wrapper):-1]
    if inner.startswith('::prost::alloc::collections::BTreeMap<'):
        inner = inner.split(',', 1)[1].strip().rstrip(',')[:-1].rstrip(',')
    segments = inner.split('::')
    base = list(module)
    while segments and segments[0] == 'super':
        base.pop()
        segments.pop(0)
    return '.'.join(base + segments)


messages = {}
for dirpath, _, files in os.walk(pb_root):
    for f in files:
        if not f.endswith('.rs') or f == 'lib.rs':
            continue
        path = os.path.join(dirpath, f)
        module = module_of(path, pb_root)
        text = open(path).read()
        for struct in STRUCT_RE.finditer(text):
            name, body = struct.group(1), struct.group(2) + '\n'
            fields = []
            for m in FIELD_RE.finditer(body):
                attrs, tag, rust_name, rust_type = m.group(1), m.group(2), m.group(4), ' '.join(m.group(5).split())
                rust_type = rust_type.replace(' ', '')
                repeated = 'repeated' in attrs
                kind = attrs.split(',')[0].strip()
                if kind.startswith('btree_map'):
                    value = attrs.split('"')[1].split(',')[1].strip()
                    if value == 'message':
                        spec = 'map:m ' + resolve(module, rust_type)
                    else:
                        spec = 'map:' + value
                elif kind == 'message':
                    spec = 'm ' + resolve(module, rust_type)
                elif kind.startswith('bytes'):
                    spec = 'bytes'
                else:
                    spec = kind
                if repeated:
                    spec = '[]' + spec
                fields.append((int(tag), rust_name, spec))
            messages['.'.join(module + [name])] = fields

# JSON names per (module, struct) from k8s-openapi's deserializers.
def norm(rust_name):
    """Rust names of one Go field differ between the crates (`non_resource_urls`
    vs `non_resource_ur_ls`); compare them without underscores or case."""
    return rust_name.replace('_', '').lower()


json_names = {}
KEY_RE = re.compile(r'"([A-Za-z0-9$]+)" => Field::Key_(\w+),')
for dirpath, _, files in os.walk(openapi_root):
    for f in files:
        if not f.endswith('.rs') or f == 'mod.rs':
            continue
        path = os.path.join(dirpath, f)
        text = open(path).read()
        m = re.search(r'pub struct (\w+) \{', text)
        if not m:
            continue
        module = module_of(os.path.dirname(path) + '/mod.rs', openapi_root)
        names = {norm(rust): js for js, rust in KEY_RE.findall(text)}
        json_names['.'.join(module + [m.group(1)])] = names


def camel(snake):
    head, *rest = snake.split('_')
    return head + ''.join(p[:1].upper() + p[1:] for p in rest)


SERVED = [
    'api.core.v1', 'api.apps.v1', 'api.batch.v1', 'api.coordination.v1', 'api.discovery.v1',
    'api.events.v1', 'api.rbac.v1', 'api.storage.v1', 'api.scheduling.v1', 'api.policy.v1',
    'api.networking.v1', 'api.autoscaling.v1', 'api.autoscaling.v2', 'api.certificates.v1',
    'apiextensions_apiserver.pkg.apis.apiextensions.v1',
]
roots = [name for name in messages if name.rsplit('.', 1)[0] in SERVED]
roots.append('apimachinery.pkg.apis.meta.v1.DeleteOptions')
seen, order = set(), []
stack = list(roots)
while stack:
    name = stack.pop()
    if name in seen or name not in messages:
        continue
    seen.add(name)
    order.append(name)
    for _, _, spec in messages[name]:
        if ' ' in spec:
            stack.append(spec.split(' ', 1)[1])

print('# protobuf field numbers and JSON names of built-in Kubernetes messages;')
print('# generated by apiserver/tools/gen_protobuf_schema.py, do not edit.')
for name in sorted(order):
    print('@' + name)
    names = json_names.get(name)
    for tag, rust_name, spec in sorted(messages[name]):
        key = norm(rust_name)
        if names is not None and key not in names:
            sub = messages.get(spec[2:], []) if spec.startswith('m ') else []
            if any(norm(r) in names for _, r, _ in sub):
                # Embedded Go struct: its fields are inlined in JSON.
                print(f'{tag} - {spec}')
                continue
            print(f'# no JSON name for {name}.{rust_name} (newer than k8s-openapi)', file=sys.stderr)
        json_name = names.get(key) if names else None
        print(f'{tag} {json_name or camel(rust_name)} {spec}')
