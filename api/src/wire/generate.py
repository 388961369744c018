#!/usr/bin/env python3
"""Generates `go_order.rs`: the Go struct field order of every Kubernetes API type, which is the
order kube-apiserver's encoding/json writes them in, with each field's JSON name, the type of its
value and its patch/list tags (`+patchStrategy`, `+patchMergeKey`, `+listType`, `+listMapKey`,
`+mapType`, `+structType`).

Sources, both the crates this workspace pins (so nothing is hand-written):
- k8s-pb: prost structs in `generated.proto` order, which go-to-protobuf writes in Go struct order,
  with the Go doc comments (and their `+` tags); embedded structs (`json:",inline"`) are messages.
- k8s-openapi: each type's schema name and JSON field names (its serializer).

Usage: python3 api/src/wire/generate.py > api/src/wire/go_order.rs
(`cargo test -p api wire` checks the table against the k8s-openapi schemas.)
"""

import glob
import os
import re
import sys

REGISTRY = os.path.expanduser("~/.cargo/registry/src")


def crate_dir(name):
    dirs = sorted(glob.glob(os.path.join(REGISTRY, "*", name + "-*")))
    if not dirs:
        sys.exit(f"{name} not found under {REGISTRY}")
    return dirs[-1]


def pb_package(rel_dir):
    """k8s-pb module dir (`api/core/v1`) -> schema-name prefix (`io.k8s.api.core.v1`)."""
    parts = rel_dir.split("/")
    parts = ["apiextensions-apiserver" if p == "apiextensions_apiserver" else p for p in parts]
    parts = ["kube-aggregator" if p == "kube_aggregator" else p for p in parts]
    return "io.k8s." + ".".join(parts)


CANONICAL = {}


def resolve(module, ty):
    """A prost type path, relative to `module` (a list of segments), -> schema name."""
    segs = ty.strip().lstrip(":").split("::")
    mod = list(module)
    while segs and segs[0] == "super":
        segs.pop(0)
        mod.pop()
    path = mod + segs
    name = pb_package("/".join(path[:-1])) + "." + path[-1]
    return CANONICAL.get(name.lower(), name)


def strip_wrappers(ty):
    ty = re.sub(r"\s+", "", ty)
    for w in ("::core::option::Option<", "::prost::alloc::vec::Vec<", "::prost::alloc::boxed::Box<"):
        while ty.startswith(w):
            ty = ty[len(w):-1]
    return ty


def split_top(s):
    depth = 0
    for i, c in enumerate(s):
        if c == "<":
            depth += 1
        elif c == ">":
            depth -= 1
        elif c == "," and depth == 0:
            return s[:i], s[i + 1:]
    return s, ""


def parse_pb():
    """schema name -> [(snake name, attr, type text, tags)] in declaration order."""
    root = os.path.join(crate_dir("k8s-pb"), "src")
    out = {}
    for path in glob.glob(os.path.join(root, "**", "mod.rs"), recursive=True):
        rel = os.path.relpath(os.path.dirname(path), root)
        module = rel.split("/")
        lines = open(path).read().split("\n")
        i = 0
        current = None
        doc = []
        while i < len(lines):
            line = lines[i].strip()
            m = re.match(r"pub struct (\w+) \{", line)
            if m:
                current = pb_package(rel) + "." + m.group(1)
                out[current] = {"module": module, "fields": []}
                doc = []
            elif line == "}":
                current = None
            elif current and line.startswith("///"):
                doc.append(line[3:].strip())
            elif current and line.startswith("#[prost("):
                attr = line
                i += 1
                decl = ""
                while True:
                    decl += lines[i].strip()
                    if decl.endswith(",") and decl.count("<") == decl.count(">"):
                        break
                    i += 1
                m = re.match(r"pub (r#)?(\w+):(.*),$", decl)
                tags = {}
                for d in doc:
                    t = re.match(r"\+(patchStrategy|patchMergeKey|listType|listMapKey|mapType|structType)=(\S+)", d)
                    if t:
                        if t.group(1) == "listMapKey":
                            tags.setdefault("listMapKey", []).append(t.group(2))
                        else:
                            tags[t.group(1)] = t.group(2)
                out[current]["fields"].append((m.group(2), attr, m.group(3).strip(), tags))
                doc = []
            elif current and not line.startswith("#["):
                doc = []
            i += 1
    return out


def parse_openapi():
    """schema name -> (JSON field names, is a resource with apiVersion/kind)."""
    root = os.path.join(crate_dir("k8s-openapi"), "src", "v1_33")
    out = {}
    for path in glob.glob(os.path.join(root, "**", "*.rs"), recursive=True):
        text = open(path).read()
        for m in re.finditer(r'fn schema_name\(\) -> std::borrow::Cow<\'static, str> \{\s*"([^"]+)"', text):
            name = m.group(1)
            if "serialize_struct(" not in text:
                out[name] = None  # not an object on the wire (Quantity, Time, IntOrString, ...)
                continue
            fields = re.findall(r'serialize_field\(&mut state, "([^"]+)"', text)
            out[name] = fields
    return out


def norm(s):
    return re.sub(r"[^0-9a-z]", "", s.lower())


def main():
    pb_raw = parse_pb()
    oa = parse_openapi()
    pb_by_lower = {k.lower(): v for k, v in pb_raw.items()}
    # Keyed by the k8s-openapi schema name; prost CamelCases acronyms (`AwsElasticBlock...`).
    pb = dict(pb_raw)
    pb.update({n: pb_by_lower[n.lower()] for n in oa if n.lower() in pb_by_lower})
    CANONICAL.update({n.lower(): n for n in oa})
    defs = {}  # schema name -> [(json, child, tags)]

    def embedded(snake, target, json_names):
        """Go names an embedded field after its type (`VolumeSource`, `ProbeHandler` as `handler`);
        a newer field of the protobuf type that the pinned JSON type lacks is not one."""
        if target not in pb or not norm(target.rsplit(".", 1)[1]).endswith(norm(snake)):
            return False
        inner = {norm(f[0]) for f in pb[target]["fields"]}
        return any(norm(j) in inner for j in json_names)

    def fields_of(name, json_names, seen):
        """The JSON fields of pb type `name` in order, inlining embedded structs."""
        entry = pb[name]
        by_norm = {norm(j): j for j in json_names}
        result = []
        for snake, attr, ty, tags in entry["fields"]:
            child = None
            if "btree_map" in attr or "hash_map" in attr:
                inner = re.sub(r"\s+", "", ty)
                inner = inner[inner.index("<") + 1:-1]
                _, value = split_top(inner)
                if "message" in attr.split(",")[1]:
                    child = ("map", resolve(entry["module"], value))
                else:
                    child = ("map", None)
            elif attr.startswith("#[prost(message"):
                child = ("struct", resolve(entry["module"], strip_wrappers(ty)))
            j = by_norm.get(norm(snake))
            if j is None and child and embedded(snake, child[1], json_names) and child[1] not in seen:
                # An embedded struct (`json:",inline"`): its fields go here.
                result.extend(fields_of(child[1], json_names, seen | {child[1]}))
                continue
            if j is None:
                print(f"warning: {name}.{snake} has no JSON field", file=sys.stderr)
                continue
            result.append((j, child, tags))
        return result

    for name, json_names in sorted(oa.items()):
        if json_names is None or name not in pb:
            continue
        fields = fields_of(name, json_names, {name})
        got = {f[0] for f in fields}
        # TypeMeta (`kind`, `apiVersion`, first) is not in the protobuf message; fields of those
        # names that are (ObjectReference's, ManagedFieldsEntry's) keep their place.
        head = [j for j in ("kind", "apiVersion") if j in json_names and j not in got]
        missing = [j for j in json_names if j not in got and j not in head]
        for j in missing:
            print(f"warning: {name}.{j} not in the protobuf type; placed last", file=sys.stderr)
        defs[name] = [(j, None, {}) for j in head] + fields + [(j, None, {}) for j in missing]

    names = sorted(defs)
    index = {n: i for i, n in enumerate(names)}

    def child_expr(child):
        if child is None:
            return "Child::Leaf"
        kind, target = child
        t = index.get(target) if target else None
        if kind == "map":
            return f"Child::Map({t})" if t is not None else "Child::Map(NONE)"
        return f"Child::Struct({t})" if t is not None else "Child::Leaf"

    def tags_expr(tags):
        if not tags:
            return "NO_TAGS"
        parts = []
        for k, rust in (("patchStrategy", "patch_strategy"), ("patchMergeKey", "patch_merge_key"),
                        ("listType", "list_type"), ("mapType", "map_type"), ("structType", "struct_type")):
            v = tags.get(k)
            parts.append(f'{rust}: {"Some(" + repr_str(v) + ")" if v else "None"}')
        keys = tags.get("listMapKey", [])
        parts.append("list_map_keys: &[" + ", ".join(repr_str(k) for k in keys) + "]")
        return "&Tags { " + ", ".join(parts) + " }"

    print("// @generated by api/src/wire/generate.py from k8s-pb and k8s-openapi; do not edit.")
    print("// Regenerate: python3 api/src/wire/generate.py > api/src/wire/go_order.rs")
    print()
    print("use super::{Child, Def, Field, Tags, NONE, NO_TAGS};")
    print()
    print("/// Every type, sorted by schema name.")
    print("pub(super) static DEFS: &[Def] = &[")
    for n in names:
        print(f"    Def {{ name: {repr_str(n)}, fields: &[")
        for j, child, tags in defs[n]:
            print(f"        Field {{ json: {repr_str(j)}, child: {child_expr(child)}, tags: {tags_expr(tags)} }},")
        print("    ] },")
    print("];")


def repr_str(s):
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


if __name__ == "__main__":
    main()
