//! Dashboard panels that other crates contribute (docket-sql shows its pg_task tables), as
//! plain data the dashboard renders, so the dashboard needs not know what they show.

use docket_core::Timestamp;

/// One cell of a panel's table.
#[derive(Debug, Clone, PartialEq)]
pub enum Cell {
    /// Plain text.
    Text(String),
    /// Code (SQL, an input), shown monospace and cut to `max` characters.
    Code {
        /// The text.
        text: String,
        /// Characters shown at most.
        max: usize,
    },
    /// A state, shown as a badge.
    State(String),
    /// A time, shown relative to now.
    Time(Option<Timestamp>),
    /// An error message.
    Error(String),
}

/// A table of a panel.
#[derive(Debug, Clone, PartialEq)]
pub struct Table {
    /// Column headers.
    pub columns: Vec<String>,
    /// Rows of cells.
    pub rows: Vec<Vec<Cell>>,
}

/// What a panel shows now.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct View {
    /// Counts by state, shown as badges.
    pub counts: Vec<(String, i64)>,
    /// Tables under them.
    pub tables: Vec<Table>,
}

/// A panel: a titled section of a dashboard page.
#[async_trait::async_trait]
pub trait Panel: Send + Sync {
    /// The page section it belongs to (panels of one section are shown together), e.g.
    /// `pg_task tables`.
    fn section(&self) -> &str;
    /// Its title.
    fn title(&self) -> String;
    /// What it shows now.
    ///
    /// # Errors
    /// A message shown in its place (its source cannot be read).
    async fn view(&self) -> Result<View, String>;
}
