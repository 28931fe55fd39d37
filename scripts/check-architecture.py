#!/usr/bin/env python3
"""The layering rules docs/src/architecture.md states, checked on the source (run by
scripts/test.sh):

1. No SQL statement longer than a line in crates/*/src/**/*.rs outside tests: statements live
   in .sql files under names (see crates/docket-store/src/sql.rs). Every string literal is read
   as Rust reads it — "…", raw r"…" and r#"…"# (quotes inside), b/c prefixes — past comments and
   char literals ('"'); one spanning lines is SQL when it holds an upper-case keyword (SELECT,
   UPDATE, INSERT, DELETE, CREATE, ALTER, WITH, DROP, TRUNCATE) or, in any case, the shape of a
   statement (`select … from t`, `insert into t`, `update t set c =`, `delete from t`, `create
   table`, `with x as (`, …): lower-case words alone are prose or CSS (`select{…}`).
2. The edges (docket-server, the docket binary) name no docket_store item and do not depend on
   the crate: the engine is the store's only owner.
3. No loops of files inside a crate: module A uses module B and B uses A (through `crate::`,
   `super::` or a child's name) nowhere. The crate root, which declares every module, is left
   out.

Exit status 1 and one line per finding when a rule is broken. The tree checked is the
repository's, or the one given as the first argument (scripts/test_check_architecture.py feeds
it small fixture trees).
"""
import collections
import glob
import os
import re
import sys

ROOT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.chdir(ROOT)
problems = []


def code_of(path):
    s = open(path, encoding="utf-8").read()
    # Unit tests are not the product.
    return re.split(r"#\[cfg\(test\)\]\s*mod tests", s)[0]


# 1. Multi-line SQL in Rust sources.
IDENT = re.compile(r"\w+")
CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F_]{1,8}\}|[^\n])|[^\\'\n])'")
RAW_OPEN = re.compile(r'(#*)"')


def string_literals(s):
    """(offset, text) of each string literal of Rust source `s`: "…" (its escapes as written,
    so `\"` does not end it), r"…" and r#"…"# (any number of #; a quote inside does not end
    it), with b/c prefixes. Comments (// and nested /* */), char literals such as '"' and
    lifetimes ('a) hold no literal, and a quote in them starts none."""
    i, n = 0, len(s)
    while i < n:
        c = s[i]
        if s.startswith("//", i):
            j = s.find("\n", i)
            i = n if j < 0 else j
        elif s.startswith("/*", i):
            depth, i = 1, i + 2
            while i < n and depth:
                if s.startswith("/*", i):
                    depth, i = depth + 1, i + 2
                elif s.startswith("*/", i):
                    depth, i = depth - 1, i + 2
                else:
                    i += 1
        elif c == '"':
            j = i + 1
            while j < n and s[j] != '"':
                j += 2 if s[j] == "\\" else 1
            yield i, s[i + 1 : j]
            i = j + 1
        elif c == "'":
            m = CHAR.match(s, i)
            i = m.end() if m else i + 1
        elif c.isalnum() or c == "_":
            # A whole word at once: the r of `bar"` or `r#type` (a raw identifier) opens nothing.
            m = IDENT.match(s, i)
            i = m.end()
            raw = RAW_OPEN.match(s, i) if m.group() in ("r", "br", "cr") else None
            if raw:
                close = '"' + raw.group(1)
                j = s.find(close, raw.end())
                j = n if j < 0 else j
                yield m.start(), s[raw.end() : j]
                i = j + len(close)
        else:
            i += 1


SQL_UPPER = re.compile(r"\b(SELECT|UPDATE|INSERT|DELETE|CREATE|ALTER|WITH|DROP|TRUNCATE)\b")
NAME = r"[\w.`\"{}$]+"  # a table: schema.table, `quoted`, "quoted", {schema}.t, $1
SQL_SHAPE = re.compile(
    r"\binsert\s+(?:ignore\s+)?into\s+" + NAME
    + r"|\bupdate\s+" + NAME + r"(?:\s+\w+)?\s+set\s+[\w.`\"]+\s*="
    + r"|\bdelete\s+from\s+" + NAME
    + r"|\b(?:create|drop)\s+(?:or\s+replace\s+)?(?:unique\s+)?(?:temp(?:orary)?\s+)?"
    r"(?:table|index|schema|database|view|trigger|function|procedure|sequence|type|extension)\b"
    + r"|\balter\s+(?:table|index|system|user|database|schema|sequence|type|view)\b"
    + r"|\btruncate\s+table\b"
    + r"|\bwith\s+(?:recursive\s+)?[\w`\"]+(?:\s*\([^)]*\))?\s+as\s*(?:(?:not\s+)?materialized\s*)?\(",
    re.I,
)
SELECT = re.compile(r"\bselect\s+(.*?)\s+from\s+" + NAME + r"(.{0,60})", re.I | re.S)
AFTER_FROM = re.compile(r"\s*(?:\w+\s+)?(?:where|join|left|inner|order\s+by|group\s+by|limit|for\s+update|union)\b", re.I)


def is_sql(text):
    if SQL_UPPER.search(text) or SQL_SHAPE.search(text):
        return True
    # select … from t: columns that are SQL (*, a list, a call, a.b, as) or a clause after t.
    return any(
        re.search(r"[*,(.`\"]|\bas\b", m.group(1), re.I) or AFTER_FROM.match(m.group(2))
        for m in SELECT.finditer(text)
    )


for f in sorted(glob.glob("crates/*/src/**/*.rs", recursive=True)):
    if "/testing/" in f:
        continue
    s = code_of(f)
    for start, lit in string_literals(s):
        if "\n" in lit and is_sql(lit):
            line = s[:start].count("\n") + 1
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
