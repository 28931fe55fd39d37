//! Where SQL runs: a PostgreSQL connection string plus, for pg_task tables, the table's
//! options. One struct serves `[[pg_task]]` config entries, `--pg-task URL` flags and the
//! named targets of `sql` tasks.

use crate::wire::{parse_conninfo, WireError};
use serde::{Deserialize, Deserializer};
use std::time::Duration;

/// One pg_task table docket serves (pg_task.json's entry). TOML shape of `[[pg_task]]`:
/// `url` (libpq string or `postgres://` URL; required), `database` and `user` (override the
/// URL's), `schema` [public], `table` [task], `sleep` [1000 ms], `reset` [1 hour],
/// `run` [unlimited]. Durations are milliseconds (pg_task) or humantime strings ("1h").
#[derive(Debug, Clone, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct PgTaskConfig {
    /// Connection string of the database holding the table.
    pub url: String,
    /// Database name, instead of the URL's (pg_task.json `data`/`database`).
    #[serde(default, alias = "data")]
    pub database: Option<String>,
    /// Role, instead of the URL's (pg_task.json `user`).
    #[serde(default)]
    pub user: Option<String>,
    /// Schema of the table [public].
    #[serde(default = "default_schema")]
    pub schema: String,
    /// Table name [task].
    #[serde(default = "default_table")]
    pub table: String,
    /// Longest wait between looks at the table when no trigger wakes docket [1000 ms].
    #[serde(default = "default_sleep", deserialize_with = "de_duration")]
    pub sleep: Duration,
    /// How often tasks whose connection died (TAKE/WORK with nobody holding them) are put back
    /// to PLAN [1 hour].
    #[serde(default = "default_reset", deserialize_with = "de_duration")]
    pub reset: Duration,
    /// Most tasks of this table this node runs at once [unlimited].
    #[serde(default)]
    pub run: Option<usize>,
    /// Most task rows one look at the table takes (pg_task.limit) [the `pg_task.limit` setting
    /// of docket's session on the table's database — database or role level — else 1000]; 0
    /// takes none.
    #[serde(default)]
    pub limit: Option<usize>,
    /// Task rows one claim statement takes; a look runs statements of this many until `limit`
    /// or the free slots are taken (pg_task.fetch) [the `pg_task.fetch` setting, else 100].
    #[serde(default)]
    pub fetch: Option<usize>,
}

/// pg_task's defaults of `limit` and `fetch` (init.c).
pub const DEFAULT_LIMIT: usize = 1000;
/// See [`DEFAULT_LIMIT`].
pub const DEFAULT_FETCH: usize = 100;

fn default_schema() -> String {
    "public".into()
}
fn default_table() -> String {
    "task".into()
}
fn default_sleep() -> Duration {
    Duration::from_millis(1000)
}
fn default_reset() -> Duration {
    Duration::from_secs(3600)
}

fn de_duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Ms(u64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Ms(ms) => Ok(Duration::from_millis(ms)),
        Raw::Text(s) => parse_duration(&s).map_err(serde::de::Error::custom),
    }
}

/// Milliseconds (`250`) or a humantime duration (`"5s"`, `"1h"`).
///
/// # Errors
/// A message naming the bad value.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    if let Ok(ms) = s.trim().parse::<u64>() {
        return Ok(Duration::from_millis(ms));
    }
    humantime::parse_duration(s.trim()).map_err(|e| format!("bad duration {s:?}: {e}"))
}

impl PgTaskConfig {
    /// A table at `url` with every option at pg_task's default.
    pub fn new(url: impl Into<String>) -> Self {
        PgTaskConfig {
            url: url.into(),
            database: None,
            user: None,
            schema: default_schema(),
            table: default_table(),
            sleep: default_sleep(),
            reset: default_reset(),
            run: None,
            limit: None,
            fetch: None,
        }
    }

    /// Parses `--pg-task postgres://user@host/db?schema=s&table=t&sleep=100&reset=1h&run=4`:
    /// docket's options are taken out of the query string, the rest stays the connection's.
    ///
    /// # Errors
    /// A message naming the bad option.
    pub fn from_flag(flag: &str) -> Result<Self, String> {
        let (base, query) = match flag.split_once('?') {
            Some((b, q)) => (b, q),
            None => (flag, ""),
        };
        let mut cfg = PgTaskConfig::new(base);
        let mut rest = Vec::new();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            match k {
                "schema" => cfg.schema = v.to_string(),
                "table" => cfg.table = v.to_string(),
                "sleep" => cfg.sleep = parse_duration(v)?,
                "reset" => cfg.reset = parse_duration(v)?,
                "run" => {
                    cfg.run = Some(
                        v.parse()
                            .map_err(|_| format!("run must be a positive number, not {v:?}"))?,
                    )
                }
                "limit" => {
                    cfg.limit =
                        Some(v.parse().map_err(|_| {
                            format!("limit must be a number (0 or more), not {v:?}")
                        })?)
                }
                "fetch" => {
                    cfg.fetch = Some(
                        v.parse()
                            .map_err(|_| format!("fetch must be a positive number, not {v:?}"))?,
                    )
                }
                "data" | "database" => cfg.database = Some(v.to_string()),
                "user" => cfg.user = Some(v.to_string()),
                _ => rest.push(pair),
            }
        }
        if !rest.is_empty() {
            cfg.url = format!("{base}?{}", rest.join("&"));
        }
        cfg.validate()?;
        Ok(cfg)
    }

    /// Checks the options.
    ///
    /// # Errors
    /// A message naming the bad option.
    pub fn validate(&self) -> Result<(), String> {
        self.connection().map_err(|e| e.to_string())?;
        if self.schema.is_empty() || self.table.is_empty() {
            return Err("schema and table must not be empty".into());
        }
        if self.sleep.is_zero() || self.reset.is_zero() {
            return Err("sleep and reset must be positive".into());
        }
        if self.run == Some(0) {
            return Err("run must be at least 1".into());
        }
        if self.fetch == Some(0) {
            return Err("fetch must be at least 1".into());
        }
        if self.database.as_deref() == Some("") || self.user.as_deref() == Some("") {
            return Err("data and user must not be empty".into());
        }
        Ok(())
    }

    /// The connection settings, with `database` and `user` applied. As in pg_task.json, each
    /// stands in for the other when only one is given (`COALESCE(user, data)` and
    /// `COALESCE(data, user)` in pg_task's conf.c): `{"data": "shop"}` connects as role `shop`
    /// to database `shop`. With neither, the URL's own database and user.
    ///
    /// # Errors
    /// The URL does not parse.
    pub fn connection(&self) -> Result<crate::wire::ConnInfo, WireError> {
        let mut c = crate::wire::with_env_password(parse_conninfo(&self.url)?);
        if let Some(d) = self.database.as_ref().or(self.user.as_ref()) {
            c.dbname(d);
        }
        if let Some(u) = self.user.as_ref().or(self.database.as_ref()) {
            c.user(u);
        }
        Ok(c)
    }

    /// `schema.table`, for logs.
    pub fn name(&self) -> String {
        format!("{}.{}", self.schema, self.table)
    }
}

/// sqlx options for the same server as `c` (docket's own bookkeeping connections).
pub fn sqlx_options(c: &crate::wire::ConnInfo) -> sqlx::postgres::PgConnectOptions {
    use crate::tls::SslMode;
    use sqlx::postgres::PgSslMode;
    use tokio_postgres::config::Host;
    let mut o = sqlx::postgres::PgConnectOptions::new_without_pgpass().ssl_mode(match c.tls.mode {
        SslMode::Disable => PgSslMode::Disable,
        SslMode::Prefer => PgSslMode::Prefer,
        SslMode::Require => PgSslMode::Require,
        SslMode::VerifyCa => PgSslMode::VerifyCa,
        SslMode::VerifyFull => PgSslMode::VerifyFull,
    });
    if let Some(root) = &c.tls.root_cert {
        o = o.ssl_root_cert(root);
    }
    match c.get_hosts().first() {
        Some(Host::Tcp(h)) => o = o.host(h),
        #[cfg(unix)]
        Some(Host::Unix(p)) => o = o.socket(p),
        None =>
        {
            #[cfg(unix)]
            if std::path::Path::new("/var/run/postgresql").exists() {
                o = o.socket("/var/run/postgresql");
            }
        }
    }
    if let Some(p) = c.get_ports().first() {
        o = o.port(*p);
    }
    let user = c
        .get_user()
        .map(str::to_string)
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| "postgres".into());
    o = o.username(&user);
    o = o.database(c.get_dbname().unwrap_or(&user));
    if let Some(pw) = c.get_password() {
        o = o.password(&String::from_utf8_lossy(pw));
    }
    o.application_name("docket pg_task")
}

/// `"name"` with inner quotes doubled.
pub fn quote_ident(s: &str) -> String {
    format!("\"{}\"", s.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flag_options_come_out_of_the_url() {
        let c = PgTaskConfig::from_flag(
            "postgres://postgres@127.0.0.1:5432/db?schema=s&table=t&sleep=100&reset=1h&run=4&connect_timeout=5",
        )
        .unwrap();
        assert_eq!(c.schema, "s");
        assert_eq!(c.table, "t");
        assert_eq!(c.sleep, Duration::from_millis(100));
        assert_eq!(c.reset, Duration::from_secs(3600));
        assert_eq!(c.run, Some(4));
        assert_eq!(
            c.url,
            "postgres://postgres@127.0.0.1:5432/db?connect_timeout=5"
        );
        assert!(PgTaskConfig::from_flag("postgres://x/db?run=0").is_err());
        assert!(PgTaskConfig::from_flag("postgres://x/db?sleep=soon").is_err());
        assert!(PgTaskConfig::from_flag("host=x port=notaport").is_err());
    }

    #[test]
    fn toml_entries_take_ms_or_humantime() {
        #[derive(Deserialize)]
        struct F {
            pg_task: Vec<PgTaskConfig>,
        }
        let f: F = toml_like(
            r#"{"pg_task":[{"url":"host=h","sleep":100,"reset":"2s"},{"url":"host=h","data":"d"}]}"#,
        );
        assert_eq!(f.pg_task[0].sleep, Duration::from_millis(100));
        assert_eq!(f.pg_task[0].reset, Duration::from_secs(2));
        assert_eq!(f.pg_task[1].database.as_deref(), Some("d"));
        assert_eq!(f.pg_task[1].table, "task");
    }

    #[test]
    fn data_and_user_stand_in_for_each_other() {
        let mut c = PgTaskConfig::new("postgres://me@h/urldb");
        let conn = c.connection().unwrap();
        assert_eq!(
            (conn.get_dbname(), conn.get_user()),
            (Some("urldb"), Some("me"))
        );
        c.database = Some("shop".into());
        let conn = c.connection().unwrap();
        assert_eq!(
            (conn.get_dbname(), conn.get_user()),
            (Some("shop"), Some("shop"))
        );
        c.user = Some("clerk".into());
        let conn = c.connection().unwrap();
        assert_eq!(
            (conn.get_dbname(), conn.get_user()),
            (Some("shop"), Some("clerk"))
        );
        c.database = None;
        let conn = c.connection().unwrap();
        assert_eq!(
            (conn.get_dbname(), conn.get_user()),
            (Some("clerk"), Some("clerk"))
        );
        let f = PgTaskConfig::from_flag("postgres://h/x?limit=5&fetch=2&data=d").unwrap();
        assert_eq!(
            (f.limit, f.fetch, f.database.as_deref()),
            (Some(5), Some(2), Some("d"))
        );
        assert!(PgTaskConfig::from_flag("postgres://h/x?fetch=0").is_err());
        assert!(PgTaskConfig::from_flag("postgres://h/x?limit=-1").is_err());
        assert!(PgTaskConfig::from_flag("postgres://h/x?user=").is_err());
    }

    fn toml_like<T: serde::de::DeserializeOwned>(json: &str) -> T {
        serde_json::from_str(json).unwrap()
    }
}
