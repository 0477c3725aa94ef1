"""The Python `kubernetes` client against a running skiff server.

Run by the Rust e2e suite with KUBECONFIG pointing at the server; exits non-zero
with the failing assertion on any mismatch.
"""
import os
import threading
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
core = client.CoreV1Api()
ns = "py-" + str(int(time.time() * 1000) % 100000)

core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))

# ConfigMap CRUD.
cm = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="conf", labels={"app": "py"}), data={"a": "1"})
created = core.create_namespaced_config_map(ns, cm)
assert created.metadata.uid, "uid assigned"
got = core.read_namespaced_config_map("conf", ns)
assert got.data == {"a": "1"}, got.data
got.data["b"] = "2"
updated = core.replace_namespaced_config_map("conf", ns, got)
assert int(updated.metadata.resource_version) > int(created.metadata.resource_version)
patched = core.patch_namespaced_config_map("conf", ns, {"data": {"c": "3"}})
assert patched.data == {"a": "1", "b": "2", "c": "3"}, patched.data
listed = core.list_namespaced_config_map(ns, label_selector="app=py")
assert [i.metadata.name for i in listed.items] == ["conf"], listed.items
core.delete_namespaced_config_map("conf", ns)
try:
    core.read_namespaced_config_map("conf", ns)
    raise AssertionError("configmap still readable after delete")
except ApiException as e:
    assert e.status == 404, e.status

# Service CRUD.
svc = client.V1Service(
    metadata=client.V1ObjectMeta(name="web"),
    spec=client.V1ServiceSpec(selector={"app": "web"}, ports=[client.V1ServicePort(port=80, target_port=8080)]),
)
core.create_namespaced_service(ns, svc)
got = core.read_namespaced_service("web", ns)
assert got.spec.ports[0].port == 80
got.spec.ports[0].port = 81
core.replace_namespaced_service("web", ns, got)
assert core.read_namespaced_service("web", ns).spec.ports[0].port == 81
core.delete_namespaced_service("web", ns)

# A watch with a label selector sees ADDED, MODIFIED, DELETED of matching objects only.
events = []
start = core.list_namespaced_config_map(ns).metadata.resource_version
ready = threading.Event()


def watcher():
    w = watch.Watch()
    ready.set()
    for ev in w.stream(core.list_namespaced_config_map, ns, label_selector="watched=yes",
                       resource_version=start, timeout_seconds=20):
        events.append((ev["type"], ev["object"].metadata.name))
        if ev["type"] == "DELETED":
            w.stop()


t = threading.Thread(target=watcher)
t.start()
ready.wait()
time.sleep(0.5)
core.create_namespaced_config_map(ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="ignored")))
core.create_namespaced_config_map(
    ns, client.V1ConfigMap(metadata=client.V1ObjectMeta(name="seen", labels={"watched": "yes"})))
core.patch_namespaced_config_map("seen", ns, {"data": {"x": "y"}})
core.delete_namespaced_config_map("seen", ns)
t.join(30)
assert events == [("ADDED", "seen"), ("MODIFIED", "seen"), ("DELETED", "seen")], events
print("python client: all checks passed")
