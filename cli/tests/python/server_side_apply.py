"""Server-side apply through the Python client's dynamic client.

Run by the Rust e2e suite with KUBECONFIG pointing at a skiff server; exits
non-zero with the failing assertion on any mismatch.
"""
import os
import time

from kubernetes import client, config, dynamic
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
core = client.CoreV1Api()
ns = "ssa-" + str(int(time.time() * 1000) % 100000)
core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))

dyn = dynamic.DynamicClient(client.ApiClient())
cms = dyn.resources.get(api_version="v1", kind="ConfigMap")


def manifest(data):
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "applied"}, "data": data}


# A dry run answers with the object as it would be, its first manager the caller.
dry = cms.server_side_apply(body=manifest({"k": "1"}), namespace=ns, field_manager="py-ssa", dry_run="All").to_dict()
entries = dry["metadata"]["managedFields"]
assert entries[0]["manager"] == "py-ssa", entries
assert entries[0]["operation"] == "Apply", entries
assert entries[0]["fieldsV1"] == {"f:data": {"f:k": {}}}, entries
try:
    core.read_namespaced_config_map("applied", ns)
    raise AssertionError("a dry-run apply stored the object")
except ApiException as e:
    assert e.status == 404, e.status

# Apply for real, then a second manager that disagrees conflicts.
created = cms.server_side_apply(body=manifest({"k": "1", "o": "x"}), namespace=ns, field_manager="py-ssa").to_dict()
assert created["data"] == {"k": "1", "o": "x"}, created["data"]
try:
    cms.server_side_apply(body=manifest({"k": "2"}), namespace=ns, field_manager="other")
    raise AssertionError("conflicting apply succeeded")
except ApiException as e:
    assert e.status == 409, e.status
    assert "FieldManagerConflict" in e.body and "py-ssa" in e.body, e.body

# Forcing takes the field over; the first manager keeps the rest.
forced = cms.server_side_apply(
    body=manifest({"k": "2"}), namespace=ns, field_manager="other", force_conflicts=True
).to_dict()
assert forced["data"] == {"k": "2", "o": "x"}, forced["data"]
owners = {e["manager"]: e["fieldsV1"] for e in forced["metadata"]["managedFields"]}
assert owners["other"] == {"f:data": {"f:k": {}}}, owners
assert owners["py-ssa"] == {"f:data": {"f:o": {}}}, owners

# The typed client speaks apply too (a JSON body with the apply content type).
typed = core.patch_namespaced_config_map(
    "applied", ns, manifest({"o": "x", "t": "typed"}), field_manager="py-ssa",
    _content_type="application/apply-patch+yaml",
)
assert typed.data == {"k": "2", "o": "x", "t": "typed"}, typed.data

core.delete_namespace(ns)
print("ok")
