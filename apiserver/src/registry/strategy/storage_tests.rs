//! storage.k8s.io and node.k8s.io strategies: defaults, upstream's messages and field paths,
//! immutable fields, tables.

use crate::registry::{builtin, Resource};
use serde_json::{json, Value};
use std::sync::Arc;

fn s(group: &str, plural: &str) -> Arc<Resource> {
    match builtin::find(group, plural) {
        Some(s) => s,
        None => panic!("no strategy for {plural}"),
    }
}

fn st(plural: &str) -> Arc<Resource> {
    s("storage.k8s.io", plural)
}

fn render(errs: Vec<api::validation::FieldError>) -> Vec<String> {
    errs.iter()
        .map(|e| format!("{}: {}", e.field, e.body()))
        .collect()
}

fn created(r: &Resource, obj: &Value) -> Value {
    let mut obj = obj.clone();
    r.prepare_for_create(&mut obj);
    obj
}

fn create_errors(r: &Resource, obj: &Value) -> Vec<String> {
    render(r.validate_create(&created(r, obj)))
}

fn update_errors(r: &Resource, new: &Value, old: &Value) -> Vec<String> {
    let mut new = new.clone();
    r.prepare_for_update(&mut new, old);
    render(r.validate_update(&new, old))
}

fn sc(extra: Value) -> Value {
    let mut obj =
        json!({"metadata": {"name": "fast"}, "provisioner": "kubernetes.io/no-provisioner"});
    if let (Some(o), Some(e)) = (obj.as_object_mut(), extra.as_object()) {
        o.extend(e.clone());
    }
    obj
}

#[test]
fn storage_class_defaults_validation_and_immutables() {
    let r = st("storageclasses");
    let c = created(&r, &sc(json!({})));
    assert_eq!(c["reclaimPolicy"], "Delete");
    assert_eq!(c["volumeBindingMode"], "Immediate");
    assert_eq!(create_errors(&r, &sc(json!({}))), Vec::<String>::new());
    assert_eq!(
        create_errors(
            &r,
            &json!({"metadata": {"name": "x"}, "reclaimPolicy": "Recycle", "volumeBindingMode": "Later", "parameters": {"": "v"}})
        ),
        [
            "provisioner: Required value",
            "parameters: Invalid value: \"\": field can not be empty.",
            "reclaimPolicy: Unsupported value: \"Recycle\": supported values: \"Delete\", \"Retain\"",
            "volumeBindingMode: Unsupported value: \"Later\": supported values: \"Immediate\", \"WaitForFirstConsumer\"",
        ]
    );
    assert_eq!(
        create_errors(&r, &sc(json!({"provisioner": "a/b/c"}))),
        ["provisioner: Invalid value: \"a/b/c\": a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"]
    );
    assert_eq!(
        create_errors(
            &r,
            &sc(json!({"allowedTopologies": [
                {"matchLabelExpressions": [{"key": "zone", "values": ["a", "a"]}, {"key": "zone", "values": []}]},
                {},
            ]}))
        ),
        [
            "allowedTopologies[0].matchLabelExpressions[0].values[1]: Duplicate value: \"a\"",
            "allowedTopologies[0].matchLabelExpressions[1].values: Required value",
            "allowedTopologies[0].matchLabelExpressions[1].key: Duplicate value: \"zone\"",
            "allowedTopologies[1].matchLabelExpressions: Duplicate value: \"\"",
        ]
    );
    let old = c.clone();
    let changed = sc(
        json!({"provisioner": "other.io/p", "parameters": {"a": "b"}, "reclaimPolicy": "Retain", "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    assert_eq!(
        update_errors(&r, &changed, &old),
        [
            "parameters: Forbidden: updates to parameters are forbidden.",
            "provisioner: Forbidden: updates to provisioner are forbidden.",
            "reclaimPolicy: Forbidden: updates to reclaimPolicy are forbidden.",
            "volumeBindingMode: Invalid value: \"WaitForFirstConsumer\": field is immutable",
        ]
    );
    // A change the class allows: its labels and allowVolumeExpansion.
    let mut ok = old.clone();
    ok["allowVolumeExpansion"] = json!(true);
    assert_eq!(update_errors(&r, &ok, &old), Vec::<String>::new());
}

#[test]
fn storage_class_table_marks_the_default() {
    let r = st("storageclasses");
    let mut c = created(&r, &sc(json!({"allowVolumeExpansion": true})));
    c["metadata"]["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "true"});
    let cells = r.strategy.table_cells(&c, jiff::Timestamp::now());
    assert_eq!(
        cells[..5],
        [
            json!("fast (default)"),
            json!("kubernetes.io/no-provisioner"),
            json!("Delete"),
            json!("Immediate"),
            json!(true)
        ]
    );
    c["metadata"]["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "false"});
    assert_eq!(
        r.strategy.table_cells(&c, jiff::Timestamp::now())[0],
        "fast"
    );
}

#[test]
fn csi_driver_defaults_and_immutables() {
    let r = st("csidrivers");
    let obj = |spec: Value| json!({"metadata": {"name": "csi.example.com"}, "spec": spec});
    let d = created(&r, &obj(json!({})));
    assert_eq!(
        d["spec"],
        json!({"attachRequired": true, "podInfoOnMount": false, "storageCapacity": false,
               "fsGroupPolicy": "ReadWriteOnceWithFSType", "requiresRepublish": false,
               "seLinuxMount": false, "volumeLifecycleModes": ["Persistent"]})
    );
    assert_eq!(d["metadata"]["generation"], 1);
    assert_eq!(create_errors(&r, &obj(json!({}))), Vec::<String>::new());
    let bad = obj(
        json!({"fsGroupPolicy": "Sometimes", "volumeLifecycleModes": ["Forever"],
        "tokenRequests": [{"audience": "a", "expirationSeconds": 60}, {"audience": "a"}]}),
    );
    let once = [
        "spec.fsGroupPolicy: Unsupported value: \"Sometimes\": supported values: \"File\", \"None\", \"ReadWriteOnceWithFSType\"",
        "spec.tokenRequests[0].expirationSeconds: Invalid value: 60: may not specify a duration less than 10 minutes",
        "spec.tokenRequests[1].audience: Duplicate value: \"a\"",
        "spec.volumeLifecycleModes: Unsupported value: \"Forever\": supported values: \"Persistent\", \"Ephemeral\"",
    ];
    // Upstream validates a new driver twice.
    assert_eq!(create_errors(&r, &bad), [once, once].concat());
    let changed = obj(json!({"attachRequired": false, "volumeLifecycleModes": ["Ephemeral"]}));
    assert_eq!(
        update_errors(&r, &changed, &d),
        [
            "spec.attachedRequired: Invalid value: false: field is immutable",
            "spec.volumeLifecycleModes: Invalid value: []storage.VolumeLifecycleMode{\"Ephemeral\"}: field is immutable",
        ]
    );
    let mut podinfo = d.clone();
    podinfo["spec"]["podInfoOnMount"] = json!(true);
    let mut new = podinfo.clone();
    r.prepare_for_update(&mut new, &d);
    assert_eq!(new["metadata"]["generation"], 2);
    assert_eq!(render(r.validate_update(&new, &d)), Vec::<String>::new());
    let cells = r.strategy.table_cells(&d, jiff::Timestamp::now());
    assert_eq!(
        cells[1..7],
        [
            json!(true),
            json!(false),
            json!(false),
            json!("<unset>"),
            json!(false),
            json!("Persistent")
        ]
    );
}

#[test]
fn csi_nodes_and_capacities() {
    let r = st("csinodes");
    let node =
        |drivers: Value| json!({"metadata": {"name": "node-1"}, "spec": {"drivers": drivers}});
    let ok = node(
        json!([{"name": "csi.example.com", "nodeID": "n1", "topologyKeys": ["topology.kubernetes.io/zone"]}]),
    );
    assert_eq!(create_errors(&r, &ok), Vec::<String>::new());
    assert_eq!(
        create_errors(
            &r,
            &node(json!([{"name": "csi.example.com", "nodeID": "", "topologyKeys": ["k", "k"], "allocatable": {"count": -1}},
                         {"name": "csi.example.com", "nodeID": "n"}]))
        ),
        [
            "spec.drivers[0].nodeID: Required value",
            "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0",
            "spec.drivers[0]: Duplicate value: \"k\"",
            "spec.drivers[1].name: Duplicate value: \"csi.example.com\"",
        ]
    );
    let changed = node(json!([{"name": "csi.example.com", "nodeID": "n2"}]));
    assert_eq!(
        update_errors(&r, &changed, &ok),
        ["spec.drivers: Invalid value: storage.CSINodeDriver{Name:\"csi.example.com\", NodeID:\"n2\", TopologyKeys:[]string(nil), Allocatable:(*storage.VolumeNodeResources)(nil)}: field is immutable"]
    );
    assert_eq!(r.strategy.table_cells(&ok, jiff::Timestamp::now())[1], 1);

    let r = st("csistoragecapacities");
    let cap = |class: &str, capacity: &str| {
        json!({"metadata": {"name": "c", "namespace": "default"},
        "storageClassName": class, "capacity": capacity,
        "nodeTopology": {"matchLabels": {"zone": "a"}}})
    };
    assert_eq!(
        create_errors(&r, &cap("fast", "10Gi")),
        Vec::<String>::new()
    );
    assert_eq!(
        create_errors(&r, &cap("fast", "-1")),
        ["capacity: Invalid value: \"-1\": must be greater than or equal to 0"]
    );
    let mut moved = cap("slow", "1Gi");
    moved["nodeTopology"] = json!({"matchLabels": {"zone": "b"}});
    assert_eq!(
        update_errors(&r, &moved, &cap("fast", "10Gi")),
        [
            "nodeTopology: Invalid value: v1.LabelSelector{MatchLabels:map[string]string{\"zone\":\"b\"}, MatchExpressions:[]v1.LabelSelectorRequirement(nil)}: field is immutable",
            "storageClassName: Invalid value: \"slow\": field is immutable",
        ]
    );
    assert_eq!(
        r.strategy
            .table_cells(&cap("fast", "10Gi"), jiff::Timestamp::now()),
        [json!("c"), json!("fast"), json!("10Gi")]
    );
}

#[test]
fn volume_attachments_have_one_source_and_an_immutable_spec() {
    let r = st("volumeattachments");
    let va = |spec: Value| json!({"metadata": {"name": "va"}, "spec": spec, "status": {"attached": true}});
    let ok = va(
        json!({"attacher": "csi.example.com", "nodeName": "node-1", "source": {"persistentVolumeName": "pv-1"}}),
    );
    let c = created(&r, &ok);
    assert_eq!(
        c["status"],
        json!({"attached": false}),
        "status is reset on create"
    );
    assert_eq!(create_errors(&r, &ok), Vec::<String>::new());
    assert_eq!(
        create_errors(&r, &va(json!({"nodeName": "node-1", "source": {}}))),
        [
            "spec.attacher: Required value",
            "spec.source: Required value: must specify exactly one of inlineVolumeSpec and persistentVolumeName",
            "spec.attacher: Required value",
            "spec.attacher: Invalid value: \"\": a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        ]
    );
    let moved = va(
        json!({"attacher": "csi.example.com", "nodeName": "node-2", "source": {"persistentVolumeName": "pv-1"}}),
    );
    assert_eq!(
        update_errors(&r, &moved, &c),
        ["spec: Invalid value: storage.VolumeAttachmentSpec{Attacher:\"csi.example.com\", Source:storage.VolumeAttachmentSource{PersistentVolumeName:(*string)(0xc000000000), InlineVolumeSpec:(*core.PersistentVolumeSpec)(nil)}, NodeName:\"node-2\"}: field is immutable"]
    );
    let mut attached = c.clone();
    attached["status"] = json!({"attached": true});
    assert_eq!(
        r.strategy.table_cells(&attached, jiff::Timestamp::now())[1..5],
        [
            json!("csi.example.com"),
            json!("pv-1"),
            json!("node-1"),
            json!(true)
        ]
    );
}

#[test]
fn runtime_class_handler_overhead_and_scheduling() {
    let r = s("node.k8s.io", "runtimeclasses");
    let rc = |extra: Value| {
        let mut obj = json!({"metadata": {"name": "gvisor"}, "handler": "runsc"});
        if let (Some(o), Some(e)) = (obj.as_object_mut(), extra.as_object()) {
            o.extend(e.clone());
        }
        obj
    };
    assert_eq!(create_errors(&r, &rc(json!({}))), Vec::<String>::new());
    assert_eq!(
        create_errors(
            &r,
            &rc(json!({"handler": "Run.SC", "overhead": {"podFixed": {"cpu": "-1"}},
                "scheduling": {"nodeSelector": {"bad key!": "v"},
                    "tolerations": [{"operator": "Equal", "value": "x"}, {"key": "k", "operator": "Exists", "value": "v"}, {"key": "k", "effect": "Never"}]}}))
        )[..],
        [
            "handler: Invalid value: \"Run.SC\": a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')".to_string(),
            "overhead.limits[cpu]: Invalid value: \"-1\": must be greater than or equal to 0".to_string(),
            "scheduling.nodeSelector: Invalid value: \"bad key!\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')".to_string(),
            "scheduling.tolerations[0].operator: Invalid value: \"Equal\": operator must be Exists when `key` is empty, which means \"match all values and all keys\"".to_string(),
            "scheduling.tolerations[1].operator: Invalid value: core.Toleration{Key:\"k\", Operator:\"Exists\", Value:\"v\", Effect:\"\", TolerationSeconds:(*int64)(nil)}: value must be empty when `operator` is 'Exists'".to_string(),
            "scheduling.tolerations[2].effect: Unsupported value: \"Never\": supported values: \"NoSchedule\", \"PreferNoSchedule\", \"NoExecute\"".to_string(),
        ]
    );
    assert_eq!(
        update_errors(&r, &rc(json!({"handler": "runc"})), &rc(json!({}))),
        ["handler: Invalid value: \"runc\": field is immutable"]
    );
    assert_eq!(
        r.strategy
            .table_cells(&rc(json!({})), jiff::Timestamp::now())[..2],
        [json!("gvisor"), json!("runsc")]
    );
}
