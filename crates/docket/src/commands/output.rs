//! Tables and task lines as the CLI prints them.

use anyhow::Result;
use docket_core::Task;

pub(crate) fn print_table(headers: &[&str], rows: Vec<Vec<String>>) {
    let mut w: Vec<usize> = headers.iter().map(|h| h.len()).collect();
    for r in &rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.chars().count());
        }
    }
    let line = |cells: Vec<String>| {
        let s: Vec<String> = cells
            .iter()
            .enumerate()
            .map(|(i, c)| format!("{c:<width$}", width = w[i]))
            .collect();
        println!("{}", s.join("  ").trim_end());
    };
    line(headers.iter().map(|h| h.to_string()).collect());
    for r in rows {
        line(r);
    }
}

pub(crate) fn short(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!("{}…", s.chars().take(n - 1).collect::<String>())
    }
}

pub(crate) fn task_row(t: &Task) -> Vec<String> {
    vec![
        t.id.to_string(),
        t.queue.clone(),
        t.kind.clone(),
        t.state.to_string(),
        format!("{}/{}", t.attempt, t.max_attempts),
        t.priority.to_string(),
        t.run_at.format("%Y-%m-%d %H:%M:%S").to_string(),
        short(
            &t.errors
                .last()
                .map(|e| e.message.clone())
                .unwrap_or_default(),
            40,
        ),
    ]
}

pub(crate) const TASK_HEADERS: [&str; 8] = [
    "ID",
    "QUEUE",
    "KIND",
    "STATE",
    "ATTEMPT",
    "PRIO",
    "RUN_AT",
    "LAST_ERROR",
];

pub(crate) fn print_task(t: &Task, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(t)?);
    } else {
        print_table(&TASK_HEADERS, vec![task_row(t)]);
    }
    Ok(())
}
