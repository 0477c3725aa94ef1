"""The Python client as a ServiceAccount: refused before any grant with
upstream's 403 Status, allowed to read its namespace after a view binding.

Usage: rbac.py before|after (KUBECONFIG holds the account's token).
"""
import json
import os
import sys

from kubernetes import client, config
from kubernetes.client.rest import ApiException

config.load_kube_config(config_file=os.environ["KUBECONFIG"])
core = client.CoreV1Api()
phase = sys.argv[1]


def refused(call, message):
    try:
        call()
    except ApiException as e:
        assert e.status == 403, (e.status, e.body)
        status = json.loads(e.body)
        assert status["kind"] == "Status" and status["reason"] == "Forbidden", status
        assert status["code"] == 403, status
        assert status["message"] == message, status["message"]
        return
    raise AssertionError("allowed: " + message)


user = "system:serviceaccount:a:probe"
refused(
    lambda: core.list_secret_for_all_namespaces(),
    'secrets is forbidden: User "%s" cannot list resource "secrets" in API group "" at the cluster scope' % user,
)
refused(
    lambda: core.list_namespaced_secret("a"),
    'secrets is forbidden: User "%s" cannot list resource "secrets" in API group "" in the namespace "a"' % user,
)
if phase == "before":
    refused(
        lambda: core.list_namespaced_pod("a"),
        'pods is forbidden: User "%s" cannot list resource "pods" in API group "" in the namespace "a"' % user,
    )
else:
    pods = core.list_namespaced_pod("a")
    assert pods.items == [], pods.items
    # A namespace is read in its own namespace, so the binding covers it.
    assert core.read_namespace("a").metadata.name == "a"
    refused(
        lambda: core.read_namespace("default"),
        'namespaces "default" is forbidden: User "%s" cannot get resource "namespaces" in API group "" in the namespace "default"' % user,
    )
print("ok", phase)
