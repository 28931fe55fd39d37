#!/usr/bin/env python3
"""The layering rules docs/src/architecture.md states, checked on the source (run by
scripts/test.sh):

1. No SQL statement longer than a line in crates/*/src/**/*.rs outside tests: statements live
   in .sql files under names (see crates/docket-store/src/sql.rs).
2. The edges (docket-server, the docket binary) name no docket_store item and do not depend on
   the crate: the engine is the store's only owner.
3. No loops of files inside a crate: module A uses module B and B uses A (through `crate::`,
   `super::` or a child's name) nowhere. The crate root, which declares every module, is left
   out.

Exit status 1 and one line per finding when a rule is broken.
"""
import collections
import glob
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.chdir(ROOT)
problems = []


def code_of(path):
    s = open(path, encoding="utf-8").read()
    # Unit tests are not the product.
    return re.split(r"#\[cfg\(test\)\]\s*mod tests", s)[0]


# 1. Multi-line SQL in Rust sources.
LIT = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)
SQL = re.compile(r"\b(SELECT|UPDATE|INSERT|DELETE|CREATE|ALTER|WITH)\b")
for f in sorted(glob.glob("crates/*/src/**/*.rs", recursive=True)):
    if "/testing/" in f:
        continue
    s = code_of(f)
    for m in LIT.finditer(s):
        lit = m.group(1)
        if "\n" in lit and SQL.search(lit):
            line = s[: m.start()].count("\n") + 1
            problems.append(f"{f}:{line}: an SQL statement longer than a line (move it to a .sql file)")

# 2. Edges off the store.
for crate in ["docket-server", "docket"]:
    for f in sorted(glob.glob(f"crates/{crate}/src/**/*.rs", recursive=True)):
        for i, line in enumerate(open(f, encoding="utf-8"), 1):
            if "docket_store" in line and not line.lstrip().startswith("//"):
                problems.append(f"{f}:{i}: an edge names docket_store (go through docket_engine)")
    manifest = open(f"crates/{crate}/Cargo.toml", encoding="utf-8").read()
    deps = manifest.split("[dev-dependencies]")[0]
    if re.search(r"^docket-store", deps, re.M):
        problems.append(f"crates/{crate}/Cargo.toml: depends on docket-store outside [dev-dependencies]")


# 3. Loops of files.
def module_of(path, src):
    p = os.path.relpath(path, src)[:-3]
    if p.endswith("/mod"):
        p = p[:-4]
    return "crate" if p in ("lib", "main") else p.replace("/", "::")


for src in sorted(glob.glob("crates/*/src")):
    files = glob.glob(os.path.join(src, "**/*.rs"), recursive=True)
    mods = {module_of(f, src): f for f in files}
    deps = collections.defaultdict(set)
    for m, f in mods.items():
        s = re.sub(r"//[^\n]*", "", code_of(f))
        for r in re.findall(r"crate::((?:[a-z_]+::)*[A-Za-z_]+)", s):
            parts = r.split("::")
            tgt = next(("::".join(parts[:k]) for k in range(len(parts), 0, -1) if "::".join(parts[:k]) in mods), "crate")
            if tgt != m:
                deps[m].add(tgt)
        if m != "crate":
            base = m.rsplit("::", 1)[0] if "::" in m else "crate"
            for r in re.findall(r"super::([a-z_]+)", s):
                c = f"{base}::{r}" if base != "crate" else r
                tgt = c if c in mods else base
                if tgt != m:
                    deps[m].add(tgt)
            if re.search(r"super::\*", s):
                deps[m].add(base)
        depth = 0 if m == "crate" else m.count("::") + 1
        for child in mods:
            if child != m and child.count("::") == depth and (m == "crate" or child.startswith(m + "::")):
                name = child.rsplit("::", 1)[-1]
                if re.search(r"(?<![:\w])" + name + r"::", s):
                    deps[m].add(child)

    def reaches(a, b, seen):
        if a == b:
            return True
        seen.add(a)
        return any(reaches(n, b, seen) for n in deps[a] if n not in seen and n != "crate")

    loops = set()
    for a in mods:
        for b in deps[a]:
            if "crate" not in (a, b) and reaches(b, a, set()):
                loops.add(tuple(sorted((a, b))))
    for a, b in sorted(loops):
        problems.append(f"{src}: modules {a} and {b} use each other")

for p in problems:
    print(p)
sys.exit(1 if problems else 0)
