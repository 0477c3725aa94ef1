#!/usr/bin/env python3
"""Writes the seed corpus under fuzz/corpus/ (hand-written inputs; run once, commit the files)."""
import os, json
root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")
def w(target, name, data):
    d = os.path.join(root, target); os.makedirs(d, exist_ok=True)
    if isinstance(data, str): data = data.encode()
    open(os.path.join(d, name), "wb").write(data)

pod = {"apiVersion":"v1","kind":"Pod","metadata":{"name":"web-0","namespace":"prod","labels":{"app":"web"}},
       "spec":{"containers":[{"name":"app","image":"busybox","command":["sleep","3600"],"ports":[{"containerPort":80,"protocol":"TCP"}],
       "resources":{"requests":{"cpu":"250m","memory":"64Mi"}}}]}}
deploy = {"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default","labels":{"app":"web"}},
  "spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},
  "spec":{"containers":[{"name":"web","image":"nginx:1.25","ports":[{"containerPort":80}],"env":[{"name":"A","value":"1"}]}]}}}}
cm = {"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"settings","annotations":{"note":"x"}},"data":{"a":"b","n":"1.5"}}

# body: first byte picks the media type (0 json, 1 yaml, 2 none, 3 json+charset, 4 text/yaml)
w("body","pod.json", b"\x00"+json.dumps(pod).encode())
w("body","deployment.json", b"\x00"+json.dumps(deploy).encode())
w("body","configmap-nocontenttype.json", b"\x02"+json.dumps(cm).encode())
w("body","numbers.json", b"\x03"+b'{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"n"},"x":[1,-2,3.25,1e300,18446744073709551615,-9223372036854775808,0.1]}')
w("body","pod.yaml", b"\x01"+b"""apiVersion: v1
kind: Pod
metadata:
  name: web-0
  labels: {app: web, "tier": front}
spec:
  containers:
  - name: app
    image: busybox
    command: [sleep, "3600"]
    env:
    - {name: ON, value: "yes"}
""")
w("body","anchors.yaml", b"\x04"+b"""apiVersion: v1
kind: ConfigMap
metadata: &m
  name: anchored
data:
  a: &v hello
  b: *v
  multi: |
    line one
    line two
  t: 2024-01-01T00:00:00Z
  n: ~
  big: 1e400
""")
w("body","not-an-object.json", b"\x00[1,2,3]")
w("body","list.yaml", b"\x05"+b"- a\n- b: {c: [1, 2]}\n")

# protobuf envelopes, encoded by hand in protobuf's wire format
def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7f; n >>= 7
        if n: out.append(b | 0x80)
        else: out.append(b); return bytes(out)
def field(num, data):
    if isinstance(data, str): data = data.encode()
    return varint(num << 3 | 2) + varint(len(data)) + data
def vfield(num, n): return varint(num << 3) + varint(n)
def entry(k, v): return field(1, k) + field(2, v)
def envelope(api, kind, raw):
    return b"k8s\x00" + field(1, field(1, api) + field(2, kind)) + field(2, raw) + field(3, "") + field(4, "")
def meta(name, ns=None, labels=()):
    m = field(1, name)
    if ns: m += field(3, ns)
    for k, v in labels: m += field(11, entry(k, v))
    return m
w("protobuf","namespace.pb", envelope("v1","Namespace", field(1, meta("team-a", labels=[("env","dev")])) + field(2, b"")))
w("protobuf","configmap.pb", envelope("v1","ConfigMap", field(1, meta("settings","default")) + field(2, entry("a","b")) + field(2, entry("empty","")) + field(3, entry("blob", b"\x00\x01\xff")) + vfield(4, 0)))
w("protobuf","secret.pb", envelope("v1","Secret", field(1, meta("creds","prod")) + field(2, entry("password", b"s3cr3t")) + field(3, "Opaque")))
container = field(1,"web") + field(2,"nginx:1.25") + field(3,"sleep") + field(3,"60") + field(6, vfield(3,80) + field(4,"TCP"))
podspec = field(2, container) + field(3, "Always")
w("protobuf","pod.pb", envelope("v1","Pod", field(1, meta("web-0","prod",[("app","web")])) + field(2, podspec)))
selector = field(1, entry("app","web"))
template = field(1, meta("", labels=[("app","web")])) + field(2, podspec)
w("protobuf","deployment.pb", envelope("apps/v1","Deployment", field(1, meta("web","default")) + field(2, vfield(1,3) + field(2, selector) + field(3, template))))
w("protobuf","unknown-kind.pb", envelope("v1","Nope", b""))
w("protobuf","no-magic.pb", b"\x0a\x00")
nested = envelope("v1","ConfigMap", b"")
for _ in range(30):  # objects embedded 30 deep: refused past MAX_NESTING
    nested = envelope("apps/v1","ControllerRevision", field(2, field(1, nested)))
w("protobuf","regression-nested-30-deep", nested)

# patch: <type byte><object>\0<patch>; 0 json, 1 merge, 2 strategic
P = lambda t, obj, p: bytes([t]) + json.dumps(obj).encode() + b"\x00" + (p if isinstance(p, bytes) else json.dumps(p).encode())
w("patch","json-replace", P(0, cm, [{"op":"replace","path":"/data/a","value":"c"},{"op":"add","path":"/metadata/labels","value":{"x":"y"}},{"op":"remove","path":"/data/n"}]))
w("patch","json-test-move", P(0, deploy, [{"op":"test","path":"/spec/replicas","value":3},{"op":"move","from":"/metadata/labels","path":"/metadata/annotations"},{"op":"copy","from":"/spec/template/spec/containers/0","path":"/spec/template/spec/containers/-"}]))
w("patch","merge-labels", P(1, cm, {"metadata":{"labels":{"a":"1","gone":None}},"data":None}))
w("patch","strategic-containers", P(2, deploy, {"spec":{"template":{"spec":{"containers":[{"name":"web","image":"nginx:1.26"},{"name":"side","image":"busybox"}]}}}}))
w("patch","strategic-directives", P(2, pod, {"metadata":{"labels":{"$patch":"replace","b":"2"}},"spec":{"containers":[{"name":"app","$patch":"delete"}],"$setElementOrder/containers":[{"name":"app"}]}}))
w("patch","strategic-delete-primitive", P(2, {"metadata":{"name":"a","finalizers":["x","y"]}}, {"metadata":{"$deleteFromPrimitiveList/finalizers":["x"]},"$retainKeys":["metadata"]}))

# JSON patch ops that add 125-deep arrays below each other: refused past patch::MAX_NESTING
deep = "[" * 125 + "]" * 125
ops = ",".join('{"op":"add","path":"/a%s/0","value":%s}' % ("/0" * (125 * i), deep) for i in range(2))
w("patch","regression-deepening-json-patch", b"\x00" + b'{"a":[]}' + b"\x00" + ("[" + ops + "]").encode())

# apply: <flags><live>\0<apply body YAML>; flags bits: which(0-1) status(2) force(3) kubectl(4)
applied_deploy = b"""apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 2
  selector:
    matchLabels: {app: web}
  template:
    metadata:
      labels: {app: web}
    spec:
      containers:
      - name: web
        image: nginx:1.26
        ports:
        - containerPort: 80
          protocol: TCP
"""
live = dict(deploy); live["metadata"] = dict(deploy["metadata"], managedFields=[{"manager":"kubectl-client-side-apply","operation":"Update","apiVersion":"apps/v1","time":"2024-01-01T00:00:00Z","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:image":{}}}}}}}}])
w("apply","create-deployment", b"\x00\x00"+applied_deploy)
w("apply","conflict-deployment", b"\x00"+json.dumps(live).encode()+b"\x00"+applied_deploy)
w("apply","force-deployment", b"\x08"+json.dumps(live).encode()+b"\x00"+applied_deploy)
cm_live = dict(cm); cm_live["metadata"] = dict(cm["metadata"], annotations={"kubectl.kubernetes.io/last-applied-configuration": json.dumps(cm)})
w("apply","kubectl-upgrade-configmap", b"\x11"+json.dumps(cm_live).encode()+b"\x00"+json.dumps(cm).encode())
w("apply","custom-status", b"\x06"+json.dumps({"metadata":{"name":"fs"},"status":{"conditions":[{"type":"Ready","status":"True"}]}}).encode()+b"\x00"+b"status:\n  conditions:\n  - type: Ready\n    status: \"False\"\n")
w("apply","managed-fields-set", b"\x00{}\x00metadata:\n  name: x\n  managedFields: []\n")

# managed_fields: <which><old>\0<new>
new = json.loads(json.dumps(deploy)); new["spec"]["replicas"] = 5
new["metadata"]["managedFields"] = [
  {"manager":"kubectl","operation":"Apply","apiVersion":"apps/v1","time":"2024-01-01T00:00:00Z","fieldsType":"FieldsV1",
   "fieldsV1":{"f:metadata":{"f:labels":{"f:app":{}}},"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{".":{},"f:ports":{"k:{\"containerPort\":80,\"protocol\":\"TCP\"}":{".":{}}}}}}}}}},
  {"manager":"hpa","operation":"Update","apiVersion":"autoscaling/v1","subresource":"scale","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{"f:replicas":{}}}},
  {"manager":"x","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:metadata":{"f:finalizers":{"v:\"a\"":{}}},"f:list":{"i:0":{}}}}]
w("managed_fields","deployment-body-entries", b"\x00"+json.dumps(deploy).encode()+b"\x00"+json.dumps(new).encode())
old_cm = dict(cm); old_cm["metadata"] = dict(cm["metadata"], managedFields=[{"manager":"creator","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{"f:data":{"f:a":{},"f:n":{}}}}])
new_cm = json.loads(json.dumps(cm)); new_cm["data"]["a"] = "changed"
w("managed_fields","configmap-stored-entries", b"\x01"+json.dumps(old_cm).encode()+b"\x00"+json.dumps(new_cm).encode())
w("managed_fields","clear-entries", b"\x02"+json.dumps(old_cm).encode()+b"\x00"+json.dumps(dict(cm, metadata=dict(cm["metadata"], managedFields=[{}]))).encode())

# selectors: 0 label query, 1 field query, 2 label selector object
for i, q in enumerate(["app=web,tier!=back", "env in (prod, staging),!canary", "app==web,version notin (v1,v2),tier", "a>1,b<3", "example.com/name=x_y-z.1"]):
    w("selectors", f"label-{i}", b"\x00"+q.encode())
for i, q in enumerate(["metadata.name=web-0", "spec.nodeName!=,status.phase==Running", "metadata.namespace=prod,metadata.name=a\\,b", "spec.hostNetwork=false"]):
    w("selectors", f"field-{i}", b"\x01"+q.encode())
w("selectors","object-0", b"\x02"+json.dumps({"matchLabels":{"app":"web"},"matchExpressions":[{"key":"tier","operator":"In","values":["front","back"]},{"key":"canary","operator":"DoesNotExist"}]}).encode())
w("selectors","object-bad-op", b"\x02"+json.dumps({"matchExpressions":[{"key":"a","operator":"Gt","values":["1"]}]}).encode())

# quantity: the text
for i, q in enumerate(["250m","1.5Gi","129e6","-2","+3k","0.0001","100n","9Ei","1e-3","512Ki","1.2.3","","0","12E","8Pi", "0.5", "1E3"]):
    w("quantity", f"q-{i}", q)

# store_codec: 0 record, 1 index entry, 2 key, 3 metadata u64
be = lambda n: n.to_bytes(8, "big")
def record(key, value, deleted=False, create=5, version=1, prev=0):
    return bytes([1, 1 if deleted else 0]) + be(create) + be(version) + be(prev) + len(key).to_bytes(4,"big") + key.encode() + value
w("store_codec","record-put", b"\x00"+record("/registry/configmaps/default/a", b'{"data":{"a":"b"}}'))
w("store_codec","record-delete", b"\x00"+record("/registry/pods/prod/web-0", b"", deleted=True, version=3, prev=9))
w("store_codec","record-truncated", b"\x00"+record("/registry/x", b"")[:-3])
w("store_codec","index-put", b"\x01"+bytes([0])+be(12)+be(5)+be(2))
w("store_codec","index-delete", b"\x01"+bytes([1])+be(13)+be(5)+be(3))
w("store_codec","key-index", b"\x02k/registry/configmaps/default/a")
w("store_codec","key-record", b"\x02r"+be(42))
w("store_codec","meta-revision", b"\x03"+be(1234))
# 4: a snapshot file's body (the target appends the digest)
def blob(b):
    return be(len(b)) + b
snapshot = (b"SKIFFSNAP\n" + (1).to_bytes(4, "big") + be(9) + be(1700000000) + be(1) + be(1)
            + blob(b"tls/ca.key") + blob(b"key")
            + blob(b"/registry/configmaps/default/a") + be(2) + be(5) + be(2) + blob(b'{"data":{}}'))
w("store_codec","snapshot", b"\x04"+snapshot)
