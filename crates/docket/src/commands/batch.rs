//! `docket batch …`.

use super::output::print_table;
use crate::cli::BatchCmd;
use anyhow::{Context, Result};
use docket_client::Client;
use docket_core::batch::{Batch, BatchAdd, NewBatch};
use docket_core::NewTask;

/// Reads a JSON document from `path` (`-`: stdin).
pub(crate) fn read_json<T: serde::de::DeserializeOwned>(path: &str, what: &str) -> Result<T> {
    let text = if path == "-" {
        std::io::read_to_string(std::io::stdin().lock())?
    } else {
        std::fs::read_to_string(path).with_context(|| format!("cannot read {path}"))?
    };
    serde_json::from_str(&text).with_context(|| format!("{path}: not {what}"))
}

fn progress(b: &Batch) -> String {
    let by_state = b
        .counts
        .iter()
        .map(|(s, n)| format!("{}={n}", s.as_str()))
        .collect::<Vec<_>>()
        .join(" ");
    format!("{}/{} ({by_state})", b.done, b.total)
}

fn table(all: &[Batch]) {
    let rows = all
        .iter()
        .map(|b| {
            vec![
                b.id.to_string(),
                b.name.clone().unwrap_or_else(|| "-".into()),
                progress(b),
                if b.settled_at.is_some() {
                    "settled"
                } else if b.open {
                    "open"
                } else {
                    "running"
                }
                .into(),
                if b.fired.is_empty() {
                    "-".into()
                } else {
                    b.fired
                        .iter()
                        .map(|(c, id)| format!("{c}→{id}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                },
            ]
        })
        .collect();
    print_table(&["ID", "NAME", "DONE", "STATE", "CALLBACKS"], rows);
}

fn show(b: &Batch, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(b)?);
    } else {
        table(std::slice::from_ref(b));
    }
    Ok(())
}

pub(crate) async fn batch_cmd(c: Client, cmd: BatchCmd) -> Result<()> {
    match cmd {
        BatchCmd::Create { file, json } => {
            let spec: NewBatch = read_json(&file, "a batch spec")?;
            let out = c.batch_create(&spec).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(());
            }
            table(std::slice::from_ref(&out.batch));
            Ok(())
        }
        BatchCmd::Add {
            id,
            file,
            seal,
            json,
        } => {
            let tasks: Vec<NewTask> = read_json(&file, "a JSON array of task specs")?;
            let out = c.batch_add(id, &BatchAdd { tasks, seal }).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(());
            }
            table(std::slice::from_ref(&out.batch));
            Ok(())
        }
        BatchCmd::Seal { id, json } => show(&c.batch_seal(id).await?, json),
        BatchCmd::Show { id, json } => show(&c.batch_get(id).await?, json),
        BatchCmd::List { limit, json } => {
            let all = c.batch_list(None, limit).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&all)?);
            } else {
                table(&all);
            }
            Ok(())
        }
    }
}
