//! Opening a store from a database URL: the one place that reads a URL's scheme
//! ([`backend_of`]) and picks the backend, for [`connect`] and for the scratch databases of
//! benchmarks and tests ([`create_scratch`], [`drop_scratch`]). The engine's
//! `DatabaseOptions` is [`ConnectOptions`].

use crate::{mysql, postgres, sqlite, Backend, Result, Store, StoreError};
use std::sync::Arc;

/// Where docket keeps its tables and how to reach them.
#[derive(Debug, Clone)]
pub struct ConnectOptions {
    /// `sqlite://FILE` (created if missing), `postgres://…` or `mysql://…` / `mariadb://…`.
    pub url: String,
    /// PostgreSQL: the schema of docket's tables (created if missing) [`public`].
    pub schema: Option<String>,
    /// Pool size [10 on PostgreSQL and MySQL; 4 readers + 1 writer on SQLite].
    pub max_connections: Option<u32>,
    /// PostgreSQL: claims and completions wait for the WAL flush like enqueues do (`serve
    /// --strict-commit`) [false: they commit with `synchronous_commit = off`, see
    /// `PgStore::begin_hot`]. Enqueues always wait for durability.
    pub strict_commit: bool,
}

impl ConnectOptions {
    /// Options for `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        ConnectOptions {
            url: url.into(),
            schema: None,
            max_connections: None,
            strict_commit: false,
        }
    }

    /// These options for the `i`th of several nodes: with several hosts in the URL (a Galera
    /// cluster's nodes), its host list turned by `i`, so node `i` works through host `i` first
    /// and the nodes spread over the hosts; one host: unchanged.
    ///
    /// # Errors
    /// [`StoreError::Invalid`] for an empty host in the list.
    pub fn for_node(&self, i: usize) -> Result<ConnectOptions> {
        if crate::failover::hosts(&self.url)?.len() < 2 {
            return Ok(self.clone());
        }
        // scheme://[userinfo@]h1,h2,…/rest: the list lies between the userinfo and the path.
        let u = &self.url;
        let start = u.find("://").map_or(0, |x| x + 3);
        let end = start + u[start..].find(['/', '?']).unwrap_or(u.len() - start);
        let from = start + u[start..end].rfind('@').map_or(0, |x| x + 1);
        let list: Vec<&str> = u[from..end].split(',').collect();
        let n = list.len();
        let turned: Vec<&str> = (0..n).map(|k| list[(i + k) % n]).collect();
        Ok(ConnectOptions {
            url: format!("{}{}{}", &u[..from], turned.join(","), &u[end..]),
            ..self.clone()
        })
    }
}

/// The database a URL names by its scheme: `postgres://` / `postgresql://`, `sqlite:`,
/// `mysql://` / `mariadb://`.
///
/// # Errors
/// [`StoreError::Invalid`] for another scheme.
pub fn backend_of(url: &str) -> Result<Backend> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Backend::Postgres)
    } else if url.starts_with("sqlite:") {
        Ok(Backend::Sqlite)
    } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
        Ok(Backend::MySql)
    } else {
        Err(StoreError::Invalid(format!(
            "unsupported database URL {url:?}: use postgres://user@host/db, \
             mysql://user@host/db (MySQL 8.0+, MariaDB 10.6+; also mariadb://) or sqlite://path/to/file.db"
        )))
    }
}

/// Opens the store for `opts.url` (see [`backend_of`]); a missing SQLite file, PostgreSQL
/// schema or MySQL database is created. Migrations are [`Store::migrate`]'s.
///
/// # Errors
/// [`StoreError::Invalid`] for another scheme; database errors when it cannot connect.
pub async fn connect(opts: &ConnectOptions) -> Result<Arc<dyn Store>> {
    Ok(match backend_of(&opts.url)? {
        Backend::Postgres => Arc::new(postgres::PgStore::connect(opts).await?),
        Backend::Sqlite => Arc::new(sqlite::SqliteStore::connect(opts).await?),
        Backend::MySql => Arc::new(mysql::MySqlStore::connect(opts).await?),
    })
}

/// A fresh, empty place for docket's tables on the server of `url`, named `name`, for a
/// benchmark or a test run: a schema on PostgreSQL (made when first opened), a database on
/// MySQL; SQLite URLs are used as they are. Drop it with [`drop_scratch`].
///
/// # Errors
/// [`StoreError::Invalid`] for an unknown scheme; the server refused to create the database.
pub async fn create_scratch(url: &str, name: &str) -> Result<ConnectOptions> {
    Ok(match backend_of(url)? {
        Backend::Postgres => ConnectOptions {
            schema: Some(name.to_string()),
            ..ConnectOptions::new(url)
        },
        Backend::MySql => ConnectOptions::new(mysql::MySqlStore::create_database(url, name).await?),
        Backend::Sqlite => ConnectOptions::new(url),
    })
}

/// Drops what [`create_scratch`] made on the server of `url` (the URL it was given) under
/// `name`.
///
/// # Errors
/// [`StoreError::Invalid`] for an unknown scheme; the server refused.
pub async fn drop_scratch(url: &str, name: &str) -> Result<()> {
    match backend_of(url)? {
        Backend::Postgres => {
            let s = postgres::PgStore::connect(&ConnectOptions::new(url)).await?;
            s.drop_schema(name).await?;
        }
        Backend::MySql => mysql::MySqlStore::drop_database(url, name).await?,
        Backend::Sqlite => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_starts_on_its_own_host() {
        let o = ConnectOptions::new("mysql://root@a:1,b:2,c:3/db?x=1");
        let urls: Vec<String> = (0..4).map(|i| o.for_node(i).unwrap().url).collect();
        assert_eq!(
            urls,
            [
                "mysql://root@a:1,b:2,c:3/db?x=1",
                "mysql://root@b:2,c:3,a:1/db?x=1",
                "mysql://root@c:3,a:1,b:2/db?x=1",
                "mysql://root@a:1,b:2,c:3/db?x=1",
            ]
        );
        let one = ConnectOptions::new("postgres://u@h/db");
        assert_eq!(one.for_node(5).unwrap().url, "postgres://u@h/db");
        assert!(ConnectOptions::new("mysql://r@a,,b/db")
            .for_node(1)
            .is_err());
    }

    #[test]
    fn the_scheme_names_the_backend() {
        assert_eq!(backend_of("postgresql://h/db").unwrap(), Backend::Postgres);
        assert_eq!(backend_of("sqlite::memory:").unwrap(), Backend::Sqlite);
        assert_eq!(backend_of("mariadb://h/db").unwrap(), Backend::MySql);
        assert!(backend_of("oracle://h/db").is_err());
    }
}
