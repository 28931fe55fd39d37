//! A pg_task table's schema: the server check, the columns and their defaults, the DDL
//! ([`bootstrap`]) and the statements run on the table (`sql/pgtask.sql`).

use super::CHANNEL;
use crate::target::{quote_ident, PgTaskConfig};
use sqlx::postgres::PgPool;
use std::collections::HashMap;

/// The oldest PostgreSQL the table's DDL runs on: 12 (the `hash` column is a stored generated
/// column; the trigger is dropped and created, not `CREATE OR REPLACE TRIGGER`, which needs 14).
pub const MIN_SERVER_VERSION: u32 = 120_000;

/// Refuses a server older than [`MIN_SERVER_VERSION`] (`server_version_num`), naming both.
pub(super) fn check_version(num: &str) -> Result<(), String> {
    let v: u32 = num
        .trim()
        .parse()
        .map_err(|_| format!("cannot read the server's version {num:?}"))?;
    if v < MIN_SERVER_VERSION {
        // server_version_num: major × 10000 + minor from 10 on, else major × 10000 + minor × 100 + patch.
        let shown = if v >= 100_000 {
            format!("{}.{}", v / 10_000, v % 10_000)
        } else {
            format!("{}.{}", v / 10_000, v % 10_000 / 100)
        };
        return Err(format!(
            "pg_task tables need PostgreSQL 12 or later (this server is {shown}): the hash column is a generated column"
        ));
    }
    Ok(())
}

/// The columns of pg_task's table, in pg_task's order, with their types, checks and defaults:
/// an explicit value, else the `pg_task.*` setting of the session, role or database, else
/// pg_task's default.
pub(super) fn column_defs(schema: &str) -> Vec<(&'static str, String)> {
    let setting = |name: &str, default: &str, ty: &str| {
        format!(
            "COALESCE(NULLIF(pg_catalog.current_setting('pg_task.{name}', true), ''), {default})::{ty}"
        )
    };
    let state = format!("{}.state", quote_ident(schema));
    vec![
        ("id", "bigserial PRIMARY KEY".into()),
        (
            "parent",
            "int8 DEFAULT NULLIF(pg_catalog.current_setting('pg_task.id', true), '')::int8".into(),
        ),
        ("plan", "timestamptz NOT NULL DEFAULT CURRENT_TIMESTAMP".into()),
        ("start", "timestamptz".into()),
        ("stop", "timestamptz".into()),
        (
            "active",
            format!(
                "interval NOT NULL DEFAULT {} CHECK (\"active\" > '0 sec')",
                setting("active", "'1 hour'", "interval")
            ),
        ),
        (
            "live",
            format!(
                "interval NOT NULL DEFAULT {} CHECK (\"live\" >= '0 sec')",
                setting("live", "'0 sec'", "interval")
            ),
        ),
        (
            "repeat",
            format!(
                "interval NOT NULL DEFAULT {} CHECK (\"repeat\" >= '0 sec')",
                setting("repeat", "'0 sec'", "interval")
            ),
        ),
        (
            "timeout",
            format!(
                "interval NOT NULL DEFAULT {} CHECK (\"timeout\" >= '0 sec')",
                setting("timeout", "'0 sec'", "interval")
            ),
        ),
        (
            "count",
            format!(
                "int4 NOT NULL DEFAULT {} CHECK (\"count\" >= 0)",
                setting("count", "'0'", "int4")
            ),
        ),
        (
            "hash",
            "int4 NOT NULL GENERATED ALWAYS AS (pg_catalog.hashtext(\"group\" || COALESCE(\"remote\", ''))) STORED".into(),
        ),
        (
            "max",
            format!("int4 NOT NULL DEFAULT {}", setting("max", "'0'", "int4")),
        ),
        ("pid", "int4".into()),
        ("state", format!("{state} NOT NULL DEFAULT 'PLAN'")),
        (
            "delete",
            format!("bool NOT NULL DEFAULT {}", setting("delete", "'true'", "bool")),
        ),
        (
            "drift",
            format!("bool NOT NULL DEFAULT {}", setting("drift", "'false'", "bool")),
        ),
        (
            "header",
            format!("bool NOT NULL DEFAULT {}", setting("header", "'true'", "bool")),
        ),
        (
            "string",
            format!("bool NOT NULL DEFAULT {}", setting("string", "'true'", "bool")),
        ),
        (
            "save",
            format!("bool NOT NULL DEFAULT {}", setting("save", "'true'", "bool")),
        ),
        (
            "delimiter",
            format!(
                "\"char\" NOT NULL DEFAULT {}",
                setting("delimiter", "E'\\t'", "\"char\"")
            ),
        ),
        (
            "escape",
            "\"char\" NOT NULL DEFAULT COALESCE(pg_catalog.current_setting('pg_task.escape', true), '')::\"char\"".into(),
        ),
        (
            "quote",
            "\"char\" NOT NULL DEFAULT COALESCE(pg_catalog.current_setting('pg_task.quote', true), '')::\"char\"".into(),
        ),
        ("data", "text".into()),
        ("error", "text".into()),
        (
            "group",
            format!("text NOT NULL DEFAULT {}", setting("group", "'group'", "text")),
        ),
        ("input", "text NOT NULL".into()),
        (
            "null",
            format!("text NOT NULL DEFAULT {}", setting("null", "'\\N'", "text")),
        ),
        ("output", "text".into()),
        ("remote", "text".into()),
    ]
}

/// The statements run on a task table (`sql/pgtask.sql`), by name.
pub(super) static STATEMENTS: std::sync::LazyLock<HashMap<&'static str, String>> =
    std::sync::LazyLock::new(|| {
        docket_core::sqlfile::statements(include_str!("../sql/pgtask.sql"))
            .expect("sql/pgtask.sql parses")
            .into_iter()
            .collect()
    });

/// Statement `name` of `sql/pgtask.sql` with its slots filled (`{copied}` always).
pub(super) fn sql(name: &str, with: &[(&str, &str)]) -> String {
    let s = STATEMENTS
        .get(name)
        .unwrap_or_else(|| panic!("no statement {name} in sql/pgtask.sql"));
    docket_core::sqlfile::fill(&docket_core::sqlfile::fill(s, with), &[("copied", COPIED)])
}

/// The columns a repeat copies into its successor.
pub(super) const COPIED: &str = "\"active\", \"live\", \"repeat\", \"timeout\", \"count\", \"max\", \"delete\", \"drift\", \"header\", \"string\", \"save\", \"delimiter\", \"escape\", \"quote\", \"data\", \"group\", \"input\", \"null\", \"remote\"";

pub(super) const STATES: [&str; 7] = ["PLAN", "TAKE", "WORK", "DONE", "FAIL", "GONE", "STOP"];

/// Creates (or completes) the schema, the state type, the table, its indexes and the wake-up
/// trigger; several nodes may do it at once. Returns the table's oid.
///
/// # Errors
/// The database refused a statement (no right to create the schema, say).
pub async fn bootstrap(pool: &PgPool, cfg: &PgTaskConfig) -> Result<u32, sqlx::Error> {
    let schema = quote_ident(&cfg.schema);
    let table = format!("{schema}.{}", quote_ident(&cfg.table));
    let state = format!("{schema}.state");
    let lock = "SELECT pg_catalog.pg_advisory_xact_lock(7235446089170183168)";
    let mut tx = pool.begin().await?;
    sqlx::query(lock).execute(&mut *tx).await?;
    sqlx::query(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
        .execute(&mut *tx)
        .await?;
    let labels = STATES.map(|s| format!("'{s}'")).join(", ");
    sqlx::query(&format!(
        "DO $$ BEGIN CREATE TYPE {state} AS ENUM ({labels}); EXCEPTION WHEN duplicate_object THEN NULL; END $$"
    ))
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    // A type made by an older pg_task may lack labels; they must be committed before use.
    for s in STATES {
        sqlx::query(&format!("ALTER TYPE {state} ADD VALUE IF NOT EXISTS '{s}'"))
            .execute(pool)
            .await?;
    }
    let mut tx = pool.begin().await?;
    sqlx::query(lock).execute(&mut *tx).await?;
    let defs = column_defs(&cfg.schema);
    let existing: Vec<String> = sqlx::query_scalar(&sql("columns", &[]))
        .bind(&cfg.schema)
        .bind(&cfg.table)
        .fetch_all(&mut *tx)
        .await?;
    if existing.is_empty() {
        let cols: Vec<String> = defs
            .iter()
            .map(|(n, d)| format!("{} {d}", quote_ident(n)))
            .collect();
        sqlx::query(&format!("CREATE TABLE {table} ({})", cols.join(", ")))
            .execute(&mut *tx)
            .await?;
    } else {
        // A table made by hand or by an older pg_task: add what it lacks, keep what it has
        // (columns of its own, rows). Generated columns go last, in a statement of their own:
        // `hash` reads `group` and `remote`, which one ALTER cannot add and use at once.
        let missing: Vec<&(&str, String)> = defs
            .iter()
            .filter(|(n, _)| !existing.iter().any(|e| e == n))
            .collect();
        for generated in [false, true] {
            let adds: Vec<String> = missing
                .iter()
                .filter(|(_, d)| d.contains("GENERATED") == generated)
                .map(|(n, d)| format!("ADD COLUMN {} {d}", quote_ident(n)))
                .collect();
            if !adds.is_empty() {
                sqlx::query(&format!("ALTER TABLE {table} {}", adds.join(", ")))
                    .execute(&mut *tx)
                    .await?;
            }
        }
    }
    let ix = |suffix: &str| quote_ident(&format!("{}_{suffix}", cfg.table));
    for (name, def) in [
        (
            "plan_idx",
            "(\"plan\") WHERE \"state\" = 'PLAN'".to_string(),
        ),
        (
            "hash_idx",
            "(\"hash\") WHERE \"state\" IN ('TAKE', 'WORK')".to_string(),
        ),
        ("parent_idx", "(\"parent\")".to_string()),
        ("state_idx", "(\"state\")".to_string()),
    ] {
        sqlx::query(&format!(
            "CREATE INDEX IF NOT EXISTS {} ON {table} {def}",
            ix(name)
        ))
        .execute(&mut *tx)
        .await?;
    }
    let func = format!("{schema}.{}", ix("docket_wake"));
    sqlx::query(&sql(
        "wake_function",
        &[("func", &func), ("channel", CHANNEL)],
    ))
    .execute(&mut *tx)
    .await?;
    // DROP + CREATE rather than CREATE OR REPLACE TRIGGER, which needs PostgreSQL 14.
    sqlx::query(&format!(
        "DROP TRIGGER IF EXISTS {} ON {table}",
        ix("docket_wake")
    ))
    .execute(&mut *tx)
    .await?;
    sqlx::query(&sql(
        "wake_trigger",
        &[
            ("trigger", &ix("docket_wake")),
            ("table", &table),
            ("func", &func),
        ],
    ))
    .execute(&mut *tx)
    .await?;
    let oid: i64 = sqlx::query_scalar("SELECT $1::regclass::oid::int8")
        .bind(&table)
        .fetch_one(&mut *tx)
        .await?;
    tx.commit().await?;
    Ok(oid as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn servers_before_12_are_refused_by_name() {
        assert!(check_version("120000").is_ok());
        assert!(check_version("150004").is_ok());
        let e = check_version("110022").unwrap_err();
        assert!(e.contains("PostgreSQL 12") && e.contains("11.22"), "{e}");
        assert!(check_version("90624").unwrap_err().contains("9.6"));
        assert!(check_version("x").is_err());
    }
}
