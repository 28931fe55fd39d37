//! Opening docket's database from an edge (the CLI, a program embedding docket): where it is,
//! its schema, migrations. The engine is the store's only owner; an edge holds a [`Database`]
//! and hands it to [`crate::Engine::new`] without naming the store's types.

use crate::EngineError;
use docket_core::api::Backend;
use docket_store::Store;
use std::sync::Arc;

/// Where docket keeps its tables and how to reach them.
#[derive(Debug, Clone)]
pub struct DatabaseOptions {
    /// `sqlite://FILE` (created if missing), `postgres://…` or `mysql://…` / `mariadb://…`.
    pub url: String,
    /// PostgreSQL: the schema of docket's tables (created if missing) [`public`].
    pub schema: Option<String>,
    /// Pool size [10 on PostgreSQL and MySQL; 4 readers + 1 writer on SQLite].
    pub max_connections: Option<u32>,
    /// PostgreSQL: claims and completions wait for the WAL flush like enqueues do (`serve
    /// --strict-commit`) [false: they commit with `synchronous_commit = off`].
    pub strict_commit: bool,
}

impl DatabaseOptions {
    /// Options for `url` with the defaults.
    pub fn new(url: impl Into<String>) -> Self {
        DatabaseOptions {
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
    /// [`EngineError::Invalid`] for an empty host in the list.
    pub fn for_node(&self, i: usize) -> Result<DatabaseOptions, EngineError> {
        if docket_store::failover::hosts(&self.url)?.len() < 2 {
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
        Ok(DatabaseOptions {
            url: format!("{}{}{}", &u[..from], turned.join(","), &u[end..]),
            ..self.clone()
        })
    }
}

/// An open database: the store an [`crate::Engine`] runs on.
#[derive(Debug, Clone)]
pub struct Database {
    pub(crate) store: Arc<dyn Store>,
}

impl Database {
    /// Connects (a missing SQLite file, PostgreSQL schema or MySQL database is created);
    /// migrations are [`Database::migrate`]'s.
    ///
    /// # Errors
    /// [`EngineError::Invalid`] for an unknown URL scheme; [`EngineError::Unavailable`] when the
    /// database cannot be reached.
    pub async fn open(opts: &DatabaseOptions) -> Result<Database, EngineError> {
        let store = docket_store::connect(&docket_store::ConnectOptions {
            url: opts.url.clone(),
            schema: opts.schema.clone(),
            max_connections: opts.max_connections,
            relaxed_commit: !opts.strict_commit,
        })
        .await?;
        Ok(Database { store })
    }

    /// Applies docket's migrations; several nodes may run them at once (they take turns).
    ///
    /// # Errors
    /// The database refused a migration, or another node held the migration lock too long.
    pub async fn migrate(&self) -> Result<(), EngineError> {
        Ok(self.store.migrate().await?)
    }

    /// Which database this is.
    pub fn backend(&self) -> Backend {
        self.store.backend()
    }

    /// Closes the pool.
    pub async fn close(&self) {
        self.store.close().await;
    }

    /// A fresh, empty place for docket's tables on the server of `url`, named `name`, for a
    /// benchmark or a test run: a schema on PostgreSQL (made when first opened), a database on
    /// MySQL; SQLite URLs are used as they are. Drop it with [`Database::drop_scratch`].
    ///
    /// # Errors
    /// The server refused to create the database.
    pub async fn create_scratch(url: &str, name: &str) -> Result<DatabaseOptions, EngineError> {
        if url.starts_with("postgres") {
            Ok(DatabaseOptions {
                schema: Some(name.to_string()),
                ..DatabaseOptions::new(url)
            })
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            let url = docket_store::mysql::MySqlStore::create_database(url, name).await?;
            Ok(DatabaseOptions::new(url))
        } else {
            Ok(DatabaseOptions::new(url))
        }
    }

    /// Drops what [`Database::create_scratch`] made on the server of `url` (the URL it was
    /// given) under `name`.
    ///
    /// # Errors
    /// The server refused.
    pub async fn drop_scratch(url: &str, name: &str) -> Result<(), EngineError> {
        if url.starts_with("postgres") {
            let s =
                docket_store::postgres::PgStore::connect(&docket_store::ConnectOptions::new(url))
                    .await?;
            s.drop_schema(name).await?;
        } else if url.starts_with("mysql://") || url.starts_with("mariadb://") {
            docket_store::mysql::MySqlStore::drop_database(url, name).await?;
        }
        Ok(())
    }
}

impl From<Arc<dyn Store>> for Database {
    fn from(store: Arc<dyn Store>) -> Self {
        Database { store }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_node_starts_on_its_own_host() {
        let o = DatabaseOptions::new("mysql://root@a:1,b:2,c:3/db?x=1");
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
        let one = DatabaseOptions::new("postgres://u@h/db");
        assert_eq!(one.for_node(5).unwrap().url, "postgres://u@h/db");
        assert!(DatabaseOptions::new("mysql://r@a,,b/db")
            .for_node(1)
            .is_err());
    }
}
