//! The statements of `bench.sql` (the pg_task and churn phases' SQL).

/// The statements of `bench.sql`, by name.
static STATEMENTS: std::sync::LazyLock<std::collections::HashMap<&'static str, String>> =
    std::sync::LazyLock::new(|| {
        docket_core::sqlfile::statements(include_str!("bench.sql"))
            .expect("bench.sql parses")
            .into_iter()
            .collect()
    });

/// The statement `name` of `bench.sql`.
///
/// # Panics
/// When there is none: the file is part of the binary.
pub(super) fn sql(name: &str) -> &'static str {
    STATEMENTS
        .get(name)
        .unwrap_or_else(|| panic!("no statement {name} in bench.sql"))
}
