"""CRD lifecycle and custom resource CRUD through the Python client's dynamic client.

Run by the Rust e2e suite with KUBECONFIG pointing at a skiff server; exits
non-zero with the failing assertion on any mismatch.
"""
import os
import time

from kubernetes import client, config, dynamic
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
dyn = dynamic.DynamicClient(client.ApiClient())
crds = dyn.resources.get(api_version="apiextensions.k8s.io/v1", kind="CustomResourceDefinition")

crd = {
    "apiVersion": "apiextensions.k8s.io/v1",
    "kind": "CustomResourceDefinition",
    "metadata": {"name": "gadgets.example.org"},
    "spec": {
        "group": "example.org",
        "scope": "Namespaced",
        "names": {"plural": "gadgets", "singular": "gadget", "kind": "Gadget"},
        "versions": [{
            "name": "v1", "served": True, "storage": True,
            "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                    "color": {"type": "string", "enum": ["red", "green"]},
                    "count": {"type": "integer", "default": 2}}}}}},
        }],
    },
}

# A CRD whose schema is not structural is refused.
bad = {**crd, "metadata": {"name": "broken.example.org"}}
bad["spec"] = {**crd["spec"], "names": {"plural": "broken", "kind": "Broken"},
               "versions": [{"name": "v1", "served": True, "storage": True,
                             "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                 "spec": {"properties": {"x": {"type": "string"}}}}}}}]}
try:
    crds.create(body=bad)
    raise AssertionError("a non-structural schema was accepted")
except ApiException as e:
    assert e.status == 422, e
    assert "spec.versions[0].schema.openAPIV3Schema.properties[spec].type" in e.body, e.body

crds.create(body=crd)
deadline = time.time() + 10
while True:
    got = crds.get(name="gadgets.example.org").to_dict()
    conditions = {c["type"]: c["status"] for c in (got.get("status") or {}).get("conditions") or []}
    if conditions.get("Established") == "True":
        break
    assert time.time() < deadline, got
    time.sleep(0.1)
assert conditions["NamesAccepted"] == "True", conditions
assert got["status"]["acceptedNames"]["kind"] == "Gadget", got["status"]

# Discovery is cached by the dynamic client: a fresh one sees the new group.
dyn = dynamic.DynamicClient(client.ApiClient())
gadgets = dyn.resources.get(api_version="example.org/v1", kind="Gadget")
body = {"apiVersion": "example.org/v1", "kind": "Gadget", "metadata": {"name": "g1"},
        "spec": {"color": "red", "unknown": "pruned"}}
created = gadgets.create(body=body, namespace="default").to_dict()
assert created["spec"] == {"color": "red", "count": 2}, created["spec"]

try:
    gadgets.create(body={**body, "metadata": {"name": "g2"}, "spec": {"color": "blue"}}, namespace="default")
    raise AssertionError("an invalid gadget was accepted")
except ApiException as e:
    assert e.status == 422, e
    assert 'spec.color: Unsupported value: \\"blue\\"' in e.body or 'spec.color: Unsupported value: "blue"' in e.body, e.body

listed = gadgets.get(namespace="default").to_dict()
assert [i["metadata"]["name"] for i in listed["items"]] == ["g1"], listed

patched = gadgets.patch(name="g1", namespace="default", body={"spec": {"color": "green"}},
                        content_type="application/merge-patch+json").to_dict()
assert patched["spec"]["color"] == "green", patched
replaced = {**patched, "spec": {"color": "red", "count": 5}}
assert gadgets.replace(body=replaced, namespace="default").to_dict()["spec"]["count"] == 5
gadgets.delete(name="g1", namespace="default")
try:
    gadgets.get(name="g1", namespace="default")
    raise AssertionError("g1 still there")
except ApiException as e:
    assert e.status == 404, e

# Deleting the CRD removes its objects and the CRD itself.
gadgets.create(body={**body, "metadata": {"name": "g3"}}, namespace="default")
crds.delete(name="gadgets.example.org")
deadline = time.time() + 10
while True:
    try:
        crds.get(name="gadgets.example.org")
    except ApiException as e:
        assert e.status == 404, e
        break
    assert time.time() < deadline, "CRD not deleted"
    time.sleep(0.1)
print("ok")
