"""Loads a kubeconfig with the official Python client, unmodified, and lists namespaces:
`python3 check.py KUBECONFIG` prints the namespace names, one per line (tests/tests/clients.rs)."""
import sys

from kubernetes import client, config

config.load_kube_config(config_file=sys.argv[1])
for ns in client.CoreV1Api().list_namespace().items:
    print(ns.metadata.name)
