//! A read-only look at a pg_task table for the dashboard ([`TableView`]).

use super::schema::sql;
use super::PgTaskError;
use crate::target::{quote_ident, sqlx_options, PgTaskConfig};
use sqlx::postgres::{PgPool, PgPoolOptions};
use sqlx::Row;

/// A read-only look at a pg_task table, for the dashboard: counts by state, the next planned
/// tasks and the last finished ones.
#[derive(Clone)]
pub struct TableView {
    name: String,
    table: String,
    pool: PgPool,
}

/// One row of a [`TableSummary`].
#[derive(Debug, Clone, serde::Serialize)]
pub struct RowBrief {
    /// Task id.
    pub id: i64,
    /// Group.
    pub group: String,
    /// Input (first 200 characters).
    pub input: String,
    /// State.
    pub state: String,
    /// Planned start.
    pub plan: chrono::DateTime<chrono::Utc>,
    /// Actual end.
    pub stop: Option<chrono::DateTime<chrono::Utc>>,
    /// Error, if any (first line).
    pub error: Option<String>,
}

/// What a pg_task table looks like now.
#[derive(Debug, Clone, serde::Serialize)]
pub struct TableSummary {
    /// `schema.table`.
    pub name: String,
    /// Tasks per state.
    pub counts: Vec<(String, i64)>,
    /// The next planned tasks, soonest first.
    pub next: Vec<RowBrief>,
    /// The last finished tasks, newest first.
    pub last: Vec<RowBrief>,
}

impl TableView {
    /// A view of `cfg`'s table (connects lazily, one connection at most).
    ///
    /// # Errors
    /// Bad options.
    pub fn new(cfg: &PgTaskConfig) -> Result<Self, PgTaskError> {
        let conn = cfg
            .connection()
            .map_err(|e| PgTaskError::Config(e.to_string()))?;
        let opts = sqlx_options(&conn).application_name(&format!("docket view {}", cfg.name()));
        Ok(TableView {
            name: cfg.name(),
            table: format!("{}.{}", quote_ident(&cfg.schema), quote_ident(&cfg.table)),
            pool: PgPoolOptions::new()
                .max_connections(1)
                .min_connections(0)
                .connect_lazy_with(opts),
        })
    }

    /// `schema.table`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reads the summary.
    ///
    /// # Errors
    /// The database failed.
    pub async fn summary(&self, rows: i64) -> Result<TableSummary, sqlx::Error> {
        let t = &self.table;
        let counts: Vec<(String, i64)> = sqlx::query_as(&sql("counts", &[("table", t)]))
            .fetch_all(&self.pool)
            .await?;
        let brief = |order: &str, filter: &str| {
            sql(
                "brief",
                &[("table", t), ("filter", filter), ("order", order)],
            )
        };
        let decode = |r: sqlx::postgres::PgRow| RowBrief {
            id: r.get(0),
            group: r.get(1),
            input: r.get(2),
            state: r.get(3),
            plan: r.get(4),
            stop: r.get(5),
            error: r.get(6),
        };
        let next = sqlx::query(&brief("\"plan\", \"id\"", "\"state\" = 'PLAN'"))
            .bind(rows)
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(decode)
            .collect();
        let last = sqlx::query(&brief("\"stop\" DESC", "\"stop\" IS NOT NULL"))
            .bind(rows)
            .fetch_all(&self.pool)
            .await?
            .into_iter()
            .map(decode)
            .collect();
        Ok(TableSummary {
            name: self.name.clone(),
            counts,
            next,
            last,
        })
    }
}

/// A pg_task table as a dashboard panel (section `pg_task tables`): counts by state, the next
/// planned rows and the last finished ones.
#[async_trait::async_trait]
impl docket_engine::panels::Panel for TableView {
    fn section(&self) -> &str {
        "pg_task tables"
    }

    fn title(&self) -> String {
        self.name.clone()
    }

    async fn view(&self) -> Result<docket_engine::panels::View, String> {
        use docket_engine::panels::{Cell, Table, View};
        let sum = self.summary(5).await.map_err(|e| e.to_string())?;
        let cols = |c: &[&str]| c.iter().map(|s| s.to_string()).collect();
        Ok(View {
            counts: sum.counts,
            tables: vec![
                Table {
                    columns: cols(&["next planned", "group", "input", "plan"]),
                    rows: sum
                        .next
                        .into_iter()
                        .map(|r| {
                            vec![
                                Cell::Text(r.id.to_string()),
                                Cell::Text(r.group),
                                Cell::Code {
                                    text: r.input,
                                    max: 80,
                                },
                                Cell::Time(Some(r.plan)),
                            ]
                        })
                        .collect(),
                },
                Table {
                    columns: cols(&["last finished", "group", "state", "input", "stop", "error"]),
                    rows: sum
                        .last
                        .into_iter()
                        .map(|r| {
                            vec![
                                Cell::Text(r.id.to_string()),
                                Cell::Text(r.group),
                                Cell::State(r.state),
                                Cell::Code {
                                    text: r.input,
                                    max: 60,
                                },
                                Cell::Time(r.stop),
                                Cell::Error(r.error.unwrap_or_default()),
                            ]
                        })
                        .collect(),
                },
            ],
        })
    }
}
