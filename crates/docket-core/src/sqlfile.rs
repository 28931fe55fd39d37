//! The format of docket's `.sql` files: named statements, so that SQL lives in SQL files and
//! code names what it runs. A file is a list of statements, each under a line
//! `-- name: <what it does>`; other `--` lines are comments (kept in the statement they
//! precede or follow — SQL ignores them). A trailing `;` is dropped. `{slot}`s are filled by
//! the caller ([`fill`]): parts sized or chosen at run time (a batch's placeholders, a table's
//! name). Used by the store's backends (`docket-store/src/<backend>/sql/`), the pg_task tables
//! (`docket-sql/src/sql/`) and the benchmark.

/// The statements of `text`, in order: `(name, statement)`.
///
/// # Errors
/// SQL before the first `-- name:` line, an empty name, or a name given twice.
pub fn statements(text: &'static str) -> Result<Vec<(&'static str, String)>, String> {
    let mut out: Vec<(&'static str, String)> = vec![];
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("-- name: ") {
            let name = name.trim();
            if name.is_empty() {
                return Err("a `-- name:` line without a name".into());
            }
            if out.iter().any(|(n, _)| *n == name) {
                return Err(format!("the name {name} is given twice"));
            }
            out.push((name, String::new()));
            continue;
        }
        match out.last_mut() {
            Some((_, body)) => {
                body.push_str(line);
                body.push('\n');
            }
            None if line.trim().is_empty() || line.starts_with("--") => {}
            None => return Err("SQL before the first `-- name:` line".into()),
        }
    }
    for (_, body) in &mut out {
        *body = body.trim().trim_end_matches(';').trim_end().to_string();
    }
    Ok(out)
}

/// `stmt` with each `{slot}` of `with` replaced by its value.
pub fn fill(stmt: &str, with: &[(&str, &str)]) -> String {
    let mut s = stmt.to_string();
    for (slot, v) in with {
        s = s.replace(&format!("{{{slot}}}"), v);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn named_statements_split_and_fill() {
        let s = statements("-- file comment\n\n-- name: one\nSELECT 1;\n\n-- name: two\n-- why\nSELECT {x}\n  FROM t\n").unwrap();
        assert_eq!(s[0], ("one", "SELECT 1".to_string()));
        assert_eq!(s[1], ("two", "-- why\nSELECT {x}\n  FROM t".to_string()));
        assert_eq!(
            fill(&s[1].1, &[("x", "a, b")]),
            "-- why\nSELECT a, b\n  FROM t"
        );
        assert!(statements("SELECT 1\n-- name: one\n").is_err());
        assert!(statements("-- name: one\nA\n-- name: one\nB\n").is_err());
        assert!(statements("-- name: \nA\n").is_err());
    }
}
