//! Opening docket's database from an edge (the CLI, a program embedding docket): where it is,
//! its schema, migrations. The engine is the store's only owner; an edge holds a [`Database`]
//! and hands it to [`crate::Engine::new`] without naming the store's types.

use crate::EngineError;
use docket_core::api::Backend;
use docket_store::Store;
use std::sync::Arc;

/// Where docket keeps its tables and how to reach them: the store's options (URL, schema,
/// pool size, `strict_commit`), one struct under the name edges use.
pub use docket_store::ConnectOptions as DatabaseOptions;

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
        let store = docket_store::connect(opts).await?;
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
        Ok(docket_store::create_scratch(url, name).await?)
    }

    /// Drops what [`Database::create_scratch`] made on the server of `url` (the URL it was
    /// given) under `name`.
    ///
    /// # Errors
    /// The server refused.
    pub async fn drop_scratch(url: &str, name: &str) -> Result<(), EngineError> {
        Ok(docket_store::drop_scratch(url, name).await?)
    }
}

impl From<Arc<dyn Store>> for Database {
    fn from(store: Arc<dyn Store>) -> Self {
        Database { store }
    }
}
