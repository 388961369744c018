// Loads a kubeconfig with the official JavaScript client, unmodified, and lists namespaces:
// `node check.mjs KUBECONFIG` prints the namespace names, one per line (tests/tests/clients.rs).
import * as k8s from '@kubernetes/client-node';

const kc = new k8s.KubeConfig();
kc.loadFromFile(process.argv[2]);
const core = kc.makeApiClient(k8s.CoreV1Api);
const list = await core.listNamespace();
for (const ns of list.items) {
  console.log(ns.metadata.name);
}
