//! Names: the one rule every name field follows (queues, kinds, keys, nodes, namespaces,
//! process ids, tags, debounce keys).

/// Longest accepted `queue`, `kind`, `unique_key`, `concurrency_key`, `node` (characters).
pub const MAX_NAME_LEN: usize = 256;

/// Checks a name (queue, kind, keys, node, namespace, process id): 1 to [`MAX_NAME_LEN`]
/// characters, none of them a control character (U+0000–U+001F, U+007F–U+009F). Any other
/// character, `/` included, is allowed: clients percent-encode names in URL paths.
///
/// # Errors
/// A message naming the field.
pub fn check_name(field: &str, v: &str) -> Result<(), String> {
    if v.is_empty() {
        return Err(format!("{field} must not be empty"));
    }
    if v.chars().count() > MAX_NAME_LEN {
        return Err(format!("{field} is longer than {MAX_NAME_LEN} characters"));
    }
    if v.chars().any(char::is_control) {
        return Err(format!("{field} must not contain control characters"));
    }
    Ok(())
}
