//! pg_task's output and error text, byte for byte.
//!
//! Output (pg_task `dest.c`): every row on a line of its own; a header line of the column
//! names before the first row of a statement, only with `header` and more than one column;
//! values joined by `delimiter` (none when it is empty); SQL NULL written as `null`; a value
//! quoted with `quote` when its type is text-like or `string` is off, with `escape` written
//! before every quote and escape character inside; a statement that returns no rows writes its
//! command tag (`DELETE 0`, `INSERT 0 1`); a SELECT of no rows writes nothing.
//!
//! Errors (pg_task `task_error`, i.e. the server log's layout at the default verbosity):
//! `ERROR:  message[ at character N]`, then `DETAIL:  `, `HINT:  `, `QUERY:  `, `CONTEXT:  `
//! lines when present and `STATEMENT:  input`; a newline inside a field is followed by a tab.

use crate::wire::{Column, ReplySink, ServerError};

/// Most bytes of output a task keeps (pg_task's TASK_OUTPUT_MAX is of the same order); beyond
/// it the task fails with `task output exceeds … bytes`.
pub const OUTPUT_MAX: usize = 64 * 1024 * 1024;

/// The formatting columns of a pg_task row (and of a `sql` task's payload).
#[derive(Debug, Clone, PartialEq)]
pub struct Format {
    /// Header line for results of more than one column.
    pub header: bool,
    /// Quote only text-like columns (numbers, booleans, oids stay bare).
    pub string: bool,
    /// Column separator; `None` for none.
    pub delimiter: Option<char>,
    /// Escape character written before quote and escape characters of a quoted value.
    pub escape: Option<char>,
    /// Quote character; `None` for no quoting.
    pub quote: Option<char>,
    /// Text written for SQL NULL.
    pub null: String,
}

impl Default for Format {
    /// pg_task's defaults: header, string, tab, no escape, no quote, `\N`.
    fn default() -> Self {
        Format {
            header: true,
            string: true,
            delimiter: Some('\t'),
            escape: None,
            quote: None,
            null: "\\N".into(),
        }
    }
}

/// pg_task's list of types that are not "strings" (`init_oid_is_string`).
fn is_string_type(oid: u32) -> bool {
    // bit, bool, cid, float4, float8, int2, int4, int8, numeric, oid, tid, xid
    !matches!(
        oid,
        1560 | 16 | 29 | 700 | 701 | 21 | 23 | 20 | 1700 | 26 | 27 | 28
    )
}

/// Builds a task's output from the results of its input.
#[derive(Debug)]
pub struct Output {
    format: Format,
    text: String,
    /// Something was written (an output of only empty values is not NULL).
    any: bool,
    columns: Vec<Column>,
    rows: u64,
    overflow: bool,
    /// The statement under way is a COPY TO STDOUT that sent data.
    copied: bool,
}

impl Output {
    /// An empty output with `format`.
    pub fn new(format: Format) -> Self {
        Output {
            format,
            text: String::new(),
            any: false,
            columns: Vec::new(),
            rows: 0,
            overflow: false,
            copied: false,
        }
    }

    fn line(&mut self) {
        if self.any {
            self.text.push('\n');
        }
        self.any = true;
    }

    fn value(&mut self, v: &str, bare: bool) {
        let quote = match self.format.quote {
            Some(q) if !bare => q,
            _ => {
                self.text.push_str(v);
                return;
            }
        };
        self.text.push(quote);
        match self.format.escape {
            Some(e) => {
                for c in v.chars() {
                    if c == quote || c == e {
                        self.text.push(e);
                    }
                    self.text.push(c);
                }
            }
            None => self.text.push_str(v),
        }
        self.text.push(quote);
    }

    /// Appends one line of text (a command tag of pg_task's own, `COMMIT` say).
    pub fn push_line(&mut self, s: &str) {
        self.line();
        self.text.push_str(s);
    }

    /// The output: `None` when the input produced nothing (pg_task's NULL output, which lets
    /// `delete` remove the row).
    ///
    /// # Errors
    /// The output passed [`OUTPUT_MAX`]: the message to fail the task with.
    pub fn finish(self) -> Result<Option<String>, String> {
        if self.overflow {
            return Err(format!("task output exceeds {OUTPUT_MAX} bytes"));
        }
        Ok(self.any.then_some(self.text))
    }
}

impl ReplySink for Output {
    fn columns(&mut self, columns: &[Column]) {
        self.columns = columns.to_vec();
        self.rows = 0;
    }

    fn row(&mut self, values: &[Option<&str>]) {
        if self.overflow {
            return;
        }
        if self.rows == 0 && self.format.header && self.columns.len() > 1 {
            self.line();
            let names: Vec<String> = self.columns.iter().map(|c| c.name.clone()).collect();
            for (i, n) in names.iter().enumerate() {
                if i > 0 {
                    if let Some(d) = self.format.delimiter {
                        self.text.push(d);
                    }
                }
                self.value(n, false);
            }
        }
        self.line();
        for (i, v) in values.iter().enumerate() {
            if i > 0 {
                if let Some(d) = self.format.delimiter {
                    self.text.push(d);
                }
            }
            match v {
                None => {
                    let null = std::mem::take(&mut self.format.null);
                    self.text.push_str(&null);
                    self.format.null = null;
                }
                Some(v) => {
                    let oid = self.columns.get(i).map_or(25, |c| c.type_oid);
                    self.value(v, self.format.string && !is_string_type(oid));
                }
            }
        }
        self.rows += 1;
        if self.text.len() > OUTPUT_MAX {
            self.overflow = true;
            self.text.clear();
        }
    }

    fn command(&mut self, tag: &str, returned_rows: bool) {
        // A COPY TO STDOUT's tag is not output: its data is (pg_task's work.c).
        let copy_tag = self.copied && tag.starts_with("COPY");
        if !(returned_rows || self.overflow || copy_tag) {
            self.push_line(tag);
        }
        self.copied = false;
        self.columns.clear();
    }

    fn copy_data(&mut self, data: &[u8]) {
        if self.overflow {
            return;
        }
        self.any = true;
        self.copied = true;
        self.text.push_str(&String::from_utf8_lossy(data));
        if self.text.len() > OUTPUT_MAX {
            self.overflow = true;
            self.text.clear();
        }
    }
}

fn push_with_tabs(out: &mut String, s: &str) {
    for (i, part) in s.split('\n').enumerate() {
        if i > 0 {
            out.push_str("\n\t");
        }
        out.push_str(part);
    }
}

/// pg_task's error of a statement it refuses itself (a COPY in a local task, dest.c): the
/// message and the `STATEMENT:` line, as the server would format its own.
pub fn statement_error(message: &str, input: &str) -> String {
    let mut out = plain_error(message);
    out.push_str("\nSTATEMENT:  ");
    push_with_tabs(&mut out, input);
    out
}

/// Formats a server error as pg_task writes it into `error`; `input` adds the `STATEMENT:`
/// line (pg_task adds it for errors of the input, not for its own such as `task not active`).
pub fn format_error(e: &ServerError, input: Option<&str>) -> String {
    let mut out = String::new();
    out.push_str(e.severity());
    out.push_str(":  ");
    push_with_tabs(&mut out, e.message());
    if let Some(p) = e.field(b'P').or(e.field(b'p')) {
        out.push_str(" at character ");
        out.push_str(p);
    }
    for (code, label) in [
        (b'D', "DETAIL"),
        (b'H', "HINT"),
        (b'q', "QUERY"),
        (b'W', "CONTEXT"),
    ] {
        if let Some(v) = e.field(code) {
            out.push('\n');
            out.push_str(label);
            out.push_str(":  ");
            push_with_tabs(&mut out, v);
        }
    }
    if let Some(input) = input {
        out.push_str("\nSTATEMENT:  ");
        push_with_tabs(&mut out, input);
    }
    out
}

/// `ERROR:  message` for an error of docket's own (connection refused, task not active).
pub fn plain_error(message: &str) -> String {
    let mut out = String::from("ERROR:  ");
    push_with_tabs(&mut out, message);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn col(name: &str, oid: u32) -> Column {
        Column {
            name: name.into(),
            type_oid: oid,
        }
    }

    #[test]
    fn header_only_for_several_columns_and_rows_on_lines() {
        let mut o = Output::new(Format::default());
        o.columns(&[col("a", 23), col("b", 23)]);
        o.row(&[Some("1"), Some("2")]);
        o.command("SELECT 1", true);
        o.columns(&[col("c", 23)]);
        o.row(&[Some("3")]);
        o.command("SELECT 1", true);
        assert_eq!(o.finish().unwrap().unwrap(), "a\tb\n1\t2\n3");
    }

    #[test]
    fn empty_values_keep_their_lines_and_tags_follow() {
        let mut o = Output::new(Format::default());
        o.columns(&[col("u", 25)]);
        o.row(&[Some("")]);
        o.row(&[Some("a")]);
        o.command("SELECT 2", true);
        o.command("DELETE 0", false);
        o.columns(&[col("x", 25)]);
        o.command("SELECT 0", true);
        assert_eq!(o.finish().unwrap().unwrap(), "\na\nDELETE 0");
    }

    #[test]
    fn nothing_is_none() {
        let mut o = Output::new(Format::default());
        o.columns(&[col("x", 25)]);
        o.command("SELECT 0", true);
        assert_eq!(o.finish().unwrap(), None);
    }

    #[test]
    fn quote_escape_and_string() {
        let f = Format {
            quote: Some('"'),
            escape: Some('\\'),
            delimiter: Some(','),
            null: "NULL".into(),
            ..Format::default()
        };
        let mut o = Output::new(f.clone());
        o.columns(&[col("a", 25), col("n", 23), col("z", 25)]);
        o.row(&[Some("a\"b\\c"), Some("5"), None]);
        o.command("SELECT 1", true);
        assert_eq!(
            o.finish().unwrap().unwrap(),
            "\"a\",\"n\",\"z\"\n\"a\\\"b\\\\c\",5,NULL"
        );
        let mut o = Output::new(Format { string: false, ..f });
        o.columns(&[col("n", 23)]);
        o.row(&[Some("5")]);
        o.command("SELECT 1", true);
        assert_eq!(o.finish().unwrap().unwrap(), "\"5\"");
    }

    #[test]
    fn errors_as_the_server_log() {
        let mut e = ServerError::synthetic("22012", "division by zero");
        assert_eq!(
            format_error(&e, Some("SELECT 1/0")),
            "ERROR:  division by zero\nSTATEMENT:  SELECT 1/0"
        );
        e = ServerError::synthetic("P0001", "boom");
        e = e.with(b'D', "two\nlines");
        assert_eq!(
            format_error(&e, None),
            "ERROR:  boom\nDETAIL:  two\n\tlines"
        );
        assert_eq!(plain_error("task not active"), "ERROR:  task not active");
    }
}
