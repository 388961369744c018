#!/usr/bin/env python3
"""Generates `proto_table.rs`: the protobuf layout of every Kubernetes API type served here, read
from the Go type definitions of the release (k8s.io/api, k8s.io/apimachinery, k8s.io/kube-aggregator
v0.33.x). Each Go field's struct tags give everything a decoder needs: its protobuf field number and
wire type (`protobuf:"bytes,2,opt,name=spec"`), its JSON name and `omitempty`, whether it is a pointer,
a list or a map, and embedded (`json:",inline"`) structs. Nothing here is decoding logic: that is
`proto.rs`, which follows `encoding/json`'s rules over this table.

Usage (three source trees of one release, e.g. `git clone --depth 1 -b v0.33.9
https://github.com/kubernetes/api` and likewise apimachinery and kube-aggregator):

    python3 api/src/wire/generate_proto.py API APIMACHINERY KUBE_AGGREGATOR > api/src/wire/proto_table.rs
"""

import os
import re
import sys

# Go packages read, as (tree index, directory); every exported struct in their non-test `.go` files.
API_GROUPS = [
    "admissionregistration/v1", "apps/v1", "authentication/v1", "authorization/v1", "autoscaling/v1",
    "autoscaling/v2", "batch/v1", "certificates/v1", "coordination/v1", "core/v1", "discovery/v1",
    "events/v1", "flowcontrol/v1", "networking/v1", "node/v1", "policy/v1", "rbac/v1",
    "scheduling/v1", "storage/v1",
]
PACKAGES = [(0, g) for g in API_GROUPS] + [
    (1, "pkg/apis/meta/v1"),
    (1, "pkg/runtime"),
    (2, "pkg/apis/apiregistration/v1"),
]
IMPORT_ROOTS = ["k8s.io/api/", "k8s.io/apimachinery/", "k8s.io/kube-aggregator/"]

# Types with a hand-written protobuf and JSON form in apimachinery (time_proto.go, intstr.go, ...).
SPECIAL = {
    "k8s.io/apimachinery/pkg/apis/meta/v1.Time": "Time",
    "k8s.io/apimachinery/pkg/apis/meta/v1.MicroTime": "MicroTime",
    "k8s.io/apimachinery/pkg/apis/meta/v1.Duration": "Duration",
    "k8s.io/apimachinery/pkg/apis/meta/v1.FieldsV1": "FieldsV1",
    "k8s.io/apimachinery/pkg/util/intstr.IntOrString": "IntOrString",
    "k8s.io/apimachinery/pkg/api/resource.Quantity": "Quantity",
    "k8s.io/apimachinery/pkg/runtime.RawExtension": "RawExtension",
    "k8s.io/apimachinery/pkg/types.UID": "Str",
    "k8s.io/apimachinery/pkg/types.NodeName": "Str",
}
SCALARS = {"string": "Str", "bool": "Bool", "int32": "I32", "int64": "I64", "int": "I64",
           "float64": "F64", "[]byte": "Bytes", "byte": "I32", "uint32": "I64", "uint64": "I64"}


def schema_prefix(import_path):
    for root, prefix in (("k8s.io/api/", "io.k8s.api."),
                         ("k8s.io/apimachinery/", "io.k8s.apimachinery."),
                         ("k8s.io/kube-aggregator/", "io.k8s.kube-aggregator.")):
        if import_path.startswith(root):
            return prefix + import_path[len(root):].replace("/", ".")
    return None


def import_path(tree, rel):
    return IMPORT_ROOTS[tree] + rel


def strip_comment(line):
    # Struct tags sit in backquotes and never hold `//`.
    out, in_tick = [], False
    for i, c in enumerate(line):
        if c == "`":
            in_tick = not in_tick
        if not in_tick and line.startswith("//", i):
            break
        out.append(c)
    return "".join(out).strip()


def parse_package(root, tree, rel):
    """-> (structs {name: [field]}, aliases {name: go type}, imports per file merged)."""
    pkg = import_path(tree, rel)
    d = os.path.join(root, rel)
    structs, aliases, imports = {}, {}, {}
    for f in sorted(os.listdir(d)):
        if not f.endswith(".go") or f.endswith("_test.go") or f.startswith("zz_") or f.endswith(".pb.go"):
            continue
        lines = open(os.path.join(d, f)).read().split("\n")
        i = 0
        while i < len(lines):
            line = strip_comment(lines[i])
            if line.startswith("import ("):
                i += 1
                while not lines[i].strip().startswith(")"):
                    m = re.match(r'\s*(\w+\s+)?"([^"]+)"', lines[i])
                    if m:
                        alias = (m.group(1) or m.group(2).rsplit("/", 1)[-1]).strip()
                        imports[alias] = m.group(2)
                    i += 1
            elif line.startswith("import "):
                m = re.match(r'import\s+(\w+\s+)?"([^"]+)"', line)
                if m:
                    alias = (m.group(1) or m.group(2).rsplit("/", 1)[-1]).strip()
                    imports[alias] = m.group(2)
            m = re.match(r"type (\w+) struct \{$", line)
            if m:
                name, fields = m.group(1), []
                i += 1
                while not lines[i].startswith("}"):
                    fl = strip_comment(lines[i])
                    fm = re.match(r"^(?:(\w+)\s+)?([^\s`]+)\s+`(.*)`$", fl)
                    if fm:
                        fields.append((fm.group(1), fm.group(2), fm.group(3)))
                    i += 1
                structs[name] = fields
            else:
                m = re.match(r"type (\w+) (=\s*)?([\w\.\[\]\*]+)$", line)
                if m and m.group(1)[0].isupper():
                    aliases[m.group(1)] = m.group(3)
            i += 1
    return pkg, structs, aliases, imports


def tag_value(tags, key):
    m = re.search(key + r':"([^"]*)"', tags)
    return m.group(1) if m else None


def main():
    roots = sys.argv[1:4]
    if len(roots) != 3:
        sys.exit(__doc__)
    pkgs = {}
    for tree, rel in PACKAGES:
        pkg, structs, aliases, imports = parse_package(roots[tree], tree, rel)
        pkgs[pkg] = (structs, aliases, imports)

    def resolve(pkg, go):
        """A Go type (without pointer/slice) -> ('scalar', name) | ('special', n) | ('msg', schema)
        | ('list', inner) | ('map', value) | ('wrapped', inner) for named slices."""
        structs, aliases, imports = pkgs[pkg]
        if go in SCALARS:
            return ("scalar", SCALARS[go])
        if "." in go and not go.startswith("map[") and not go.startswith("[]"):
            alias, name = go.split(".", 1)
            target = imports.get(alias)
            if target is None:
                return None
            full = target + "." + name
            if full in SPECIAL:
                s = SPECIAL[full]
                return ("scalar", s) if s == "Str" else ("special", s)
            if target in pkgs:
                return resolve(target, name)
            return None
        if go.startswith("[]"):
            inner = resolve(pkg, go[2:].lstrip("*"))
            return ("list", inner) if inner else None
        if go.startswith("map["):
            value = go[go.index("]") + 1:]
            inner = resolve(pkg, value.lstrip("*"))
            return ("map", inner) if inner else None
        full = pkg + "." + go
        if full in SPECIAL:
            s = SPECIAL[full]
            return ("scalar", s) if s == "Str" else ("special", s)
        if go in structs:
            return ("msg", schema_prefix(pkg) + "." + go)
        if go in aliases:
            target = resolve(pkg, aliases[go])
            if target and target[0] == "list":
                return ("named_list", target[1])
            return target
        return None

    messages = {}  # schema name -> [(tag, json, omitempty, ptr, shape, elem)]

    def visit(pkg, name):
        schema = schema_prefix(pkg) + "." + name
        if schema in messages or pkg + "." + name in SPECIAL:
            return
        messages[schema] = None
        structs = pkgs[pkg][0]
        out = []
        for fname, gotype, tags in structs[name]:
            pb = tag_value(tags, "protobuf")
            js = tag_value(tags, "json")
            if pb is None or js == "-":
                continue
            parts = pb.split(",")
            if len(parts) < 3:
                continue
            tag = int(parts[1])
            json_name, _, opts = (js or "").partition(",")
            if js is None:
                field = fname or gotype.lstrip("*").rsplit(".", 1)[-1]
                json_name = field[0].lower() + field[1:]
            omitempty = "omitempty" in opts.split(",")
            inline = "inline" in opts.split(",")
            ptr = gotype.startswith("*")
            base = gotype.lstrip("*")
            r = resolve(pkg, base)
            if r is None:
                print(f"warning: {schema}.{fname}: {gotype} not resolved; skipped", file=sys.stderr)
                continue
            shape, elem = "one", r
            if r[0] == "list":
                shape, elem = "list", r[1]
            elif r[0] == "map":
                shape, elem = "map", r[1]
            elif r[0] == "named_list":
                # A named slice is a plain repeated field, or (declared `opt`) a message of `items`.
                shape, elem = ("list" if parts[2] == "rep" else "wrapped"), r[1]
            if elem[0] == "named_list":
                elem = ("wrapped_value", elem[1])
            for e in (elem, elem[1] if elem[0] == "wrapped_value" else None):
                if e and e[0] == "msg":
                    visit_schema(e[1])
            out.append((tag, "" if inline else json_name, omitempty, ptr, shape, elem))
        messages[schema] = out

    by_schema = {}
    for pkg, (structs, _, _) in pkgs.items():
        for name in structs:
            by_schema[schema_prefix(pkg) + "." + name] = (pkg, name)

    def visit_schema(schema):
        pkg, name = by_schema[schema]
        visit(pkg, name)

    for schema in sorted(by_schema):
        visit_schema(schema)

    names = sorted(n for n in messages if messages[n] is not None)
    index = {n: i for i, n in enumerate(names)}

    def elem_expr(e):
        kind, v = e
        if kind == "scalar":
            return f"PT::{v}"
        if kind == "special":
            return f"PT::{v}"
        if kind == "msg":
            return f"PT::Msg({index[v]})"
        if kind == "wrapped_value":
            inner = elem_expr(v)
            if inner != "PT::Str":
                raise SystemExit(f"named list of {inner} as a map value")
            return "PT::StrList"
        raise SystemExit(f"unexpected element {e}")

    print("// @generated by api/src/wire/generate_proto.py from the Go types of k8s.io/api, k8s.io/apimachinery")
    print("// and k8s.io/kube-aggregator v0.33.9; do not edit. Regenerate: see generate_proto.py.")
    print()
    print("use super::{Msg, Shape, PF, PT};")
    print()
    print("/// Every message, sorted by schema name.")
    print("#[rustfmt::skip]")
    print("pub(super) static MESSAGES: &[Msg] = &[")
    for n in names:
        print(f'    Msg {{ name: "{n}", fields: &[')
        for tag, js, omit, ptr, shape, elem in messages[n]:
            sh = {"one": "Shape::One", "list": "Shape::List", "map": "Shape::Map",
                  "wrapped": "Shape::Wrapped"}[shape]
            e = elem_expr(elem)
            print(f'        PF {{ tag: {tag}, json: "{js}", omitempty: {str(omit).lower()}, '
                  f'ptr: {str(ptr).lower()}, shape: {sh}, ty: {e} }},')
        print("    ] },")
    print("];")


if __name__ == "__main__":
    main()
