#!/usr/bin/env python3
"""Tests of scripts/check-architecture.py (run by scripts/test.sh before the script itself):
each case writes a small fixture tree — a clean one that holds what must not be flagged (SQL
on one line, in comments, under tests and testing/; prose and CSS that use SQL's words; char
literals and raw strings with quotes) and, for each violation the script exists to find, the
clean tree plus that one violation — and runs the script on it, expecting exit 0 or exit 1
with the finding at its file and line.

    python3 scripts/test_check_architecture.py        # or: python3 -m unittest … -v
CHECK_ARCHITECTURE points the tests at another copy of the script (to show what one misses).
"""
import os
import subprocess
import sys
import tempfile
import textwrap
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.environ.get("CHECK_ARCHITECTURE", os.path.join(HERE, "check-architecture.py"))

SERVER_TOML = """\
[package]
name = "docket-server"

[dependencies]
docket-engine = { path = "../docket-engine" }

[dev-dependencies]
docket-store = { path = "../docket-store" }
"""

CLEAN_RS = r'''//! SQL lives in .sql files; nothing here is a statement over lines.
// SELECT id
// FROM docket_tasks (a comment holds no literal)
/* UPDATE docket_tasks
   SET state = 'x' /* nested */ */
pub const ONE_LINE: &str = "SELECT id FROM docket_tasks WHERE id = $1";
pub const QUOTE: char = '"';
pub const BYTE_QUOTE: u8 = b'"';
pub const ESCAPED: &str = "a \" quote
and a second line";
pub const HELP: &str = "select the queue from the list, then
update it as you like: drop --auth off, delete nothing, create nothing";
pub const CSS: &str = "input,select,button{font:inherit}
a:focus-visible,select:focus-visible{outline:2px solid}";
pub const RAW: &str = r#"a "quoted" word
on two lines"#;
pub const RAW_BACKSLASH: &str = r"C:\";
pub fn borrow<'a>(x: &'a str) -> &'a str {
    let r#type = x;
    r#type
}

#[cfg(test)]
mod tests {
    const Q: &str = "SELECT a
        FROM b";
}
'''

CLEAN = {
    "crates/docket-server/Cargo.toml": SERVER_TOML,
    "crates/docket-server/src/lib.rs": "//! The server.\npub mod routes;\npub use docket_engine::Engine;\n",
    "crates/docket-server/src/routes.rs": "// docket_store is named in a comment only.\npub fn r() {}\n",
    "crates/docket/Cargo.toml": SERVER_TOML.replace("docket-server", "docket"),
    "crates/docket/src/main.rs": "fn main() {}\n",
    "crates/docket-store/src/lib.rs": "//! The store.\npub mod a;\npub mod b;\npub mod testing;\n",
    "crates/docket-store/src/a.rs": CLEAN_RS,
    # b uses a; a does not use b: no loop.
    "crates/docket-store/src/b.rs": "pub fn f() -> char { crate::a::QUOTE }\n",
    # The conformance suite may spell statements out.
    "crates/docket-store/src/testing/mod.rs": 'pub const Q: &str = "select id, state\n  from docket_tasks where id = $1";\n',
}


def violation(rust):
    """The clean tree plus crates/docket-store/src/bad.rs holding `rust` (a module of the crate)."""
    tree = dict(CLEAN)
    tree["crates/docket-store/src/lib.rs"] += "pub mod bad;\n"
    tree["crates/docket-store/src/bad.rs"] = textwrap.dedent(rust)
    return tree


def run(tree):
    with tempfile.TemporaryDirectory() as root:
        for path, text in tree.items():
            os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
            with open(os.path.join(root, path), "w", encoding="utf-8") as f:
                f.write(text)
        p = subprocess.run([sys.executable, SCRIPT, root], capture_output=True, text=True)
        return p.returncode, p.stdout + p.stderr


SQL_FINDING = "an SQL statement longer than a line"


class CheckArchitecture(unittest.TestCase):
    def flags(self, tree, *wanted):
        code, out = run(tree)
        self.assertEqual(code, 1, f"not flagged:\n{out}")
        for w in wanted:
            self.assertIn(w, out)

    def sql_flagged(self, rust, line):
        self.flags(violation(rust), f"crates/docket-store/src/bad.rs:{line}: {SQL_FINDING}")

    def test_clean_tree_passes(self):
        code, out = run(CLEAN)
        self.assertEqual((code, out), (0, ""))

    def test_upper_case_sql(self):
        self.sql_flagged('pub const Q: &str = "SELECT id\n    FROM docket_tasks";\n', 1)

    def test_lower_case_select(self):
        self.sql_flagged('\n\npub const Q: &str = "select id, state\n    from docket_tasks where id = $1";\n', 3)

    def test_lower_case_select_star_one_table(self):
        self.sql_flagged('pub const Q: &str = "select *\n    from docket_tasks";\n', 1)

    def test_mixed_case_update(self):
        self.sql_flagged('pub const Q: &str = "Update docket_tasks\n    Set state = $1 where id = $2";\n', 1)

    def test_lower_case_insert_delete_create_alter_with(self):
        for sql in [
            "insert into docket_tasks (kind)\n values ($1)",
            "delete from docket_tasks\n where id = $1",
            "create table if not exists t (\n id bigint)",
            "create unique index i\n on t (a)",
            "alter table t\n add column c int",
            "drop table t;\n drop table u",
            "with gone as (\n delete from t returning id) select count(*) from gone",
        ]:
            with self.subTest(sql=sql):
                self.sql_flagged(f'pub const Q: &str = "{sql}";\n', 1)

    def test_raw_string_with_quotes(self):
        # The quotes inside split it into short pieces for a reader that ignores `r#`.
        self.sql_flagged('pub const Q: &str = r#"SELECT "id"\n    FROM "docket_tasks""#;\n', 1)

    def test_raw_string_lower_case(self):
        self.sql_flagged('pub const Q: &str = r"select a.id\n    from t a";\n', 1)

    def test_sql_after_a_raw_string_ending_in_a_backslash(self):
        # `\"` ends a raw string: read as an escape, the quotes after it pair wrongly.
        self.sql_flagged('pub const P: &str = r"C:\\";\npub const Q: &str = "SELECT 1\n    FROM t";\n', 2)

    def test_sql_after_a_char_literal_quote(self):
        self.sql_flagged('pub const C: char = \'"\';\npub const Q: &str = "SELECT 1\n    FROM t";\n', 2)

    def test_sql_after_a_quote_in_a_comment(self):
        self.sql_flagged('// a " in a comment\npub const Q: &str = "SELECT 1\n    FROM t";\n', 2)

    def test_edge_names_docket_store(self):
        tree = dict(CLEAN)
        tree["crates/docket-server/src/routes.rs"] = "pub fn r() { let _ = docket_store::connect; }\n"
        self.flags(tree, "crates/docket-server/src/routes.rs:1: an edge names docket_store")

    def test_edge_depends_on_the_store(self):
        tree = dict(CLEAN)
        tree["crates/docket/Cargo.toml"] = SERVER_TOML.replace("docket-server", "docket").replace(
            "[dependencies]\n", '[dependencies]\ndocket-store = { path = "../docket-store" }\n')
        self.flags(tree, "crates/docket/Cargo.toml: depends on docket-store outside [dev-dependencies]")

    def test_loop_of_files(self):
        tree = dict(CLEAN)
        tree["crates/docket-store/src/a.rs"] = "pub fn g() { crate::b::f(); }\n" + CLEAN_RS
        self.flags(tree, "modules a and b use each other")


if __name__ == "__main__":
    unittest.main()
