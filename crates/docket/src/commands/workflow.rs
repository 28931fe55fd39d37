//! `docket workflow …`.

use super::batch::read_json;
use super::output::print_table;
use crate::cli::WorkflowCmd;
use anyhow::Result;
use docket_client::Client;
use docket_core::workflow::{NewWorkflow, Workflow, WorkflowAddition};

fn table(w: &Workflow) {
    let rows = w
        .tasks
        .iter()
        .map(|n| {
            vec![
                n.reference.clone(),
                n.id.to_string(),
                n.kind.clone(),
                if n.waiting {
                    "waiting".to_string()
                } else {
                    n.state.as_str().to_string()
                },
                n.depends_on
                    .iter()
                    .map(|d| {
                        if d.ignore_failure() {
                            format!("{} (ignore failure)", d.target())
                        } else {
                            d.target().to_string()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", "),
            ]
        })
        .collect();
    println!(
        "workflow {}{}: {}/{} finished{}",
        w.batch.id,
        w.batch
            .name
            .as_deref()
            .map(|n| format!(" ({n})"))
            .unwrap_or_default(),
        w.batch.done,
        w.batch.total,
        if w.batch.settled_at.is_some() {
            ", settled"
        } else {
            ""
        }
    );
    print_table(&["REF", "ID", "KIND", "STATE", "DEPENDS ON"], rows);
}

fn show(w: &Workflow, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(w)?);
    } else {
        table(w);
    }
    Ok(())
}

pub(crate) async fn workflow_cmd(c: Client, cmd: WorkflowCmd) -> Result<()> {
    match cmd {
        WorkflowCmd::Create { file, json } => {
            let spec: NewWorkflow = read_json(&file, "a workflow spec")?;
            let out = c.workflow_create(&spec).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(());
            }
            table(&out.workflow);
            Ok(())
        }
        WorkflowCmd::Show { id, json } => show(&c.workflow_get(id).await?, json),
        WorkflowCmd::Cancel { id, json } => show(&c.workflow_cancel(id).await?, json),
        WorkflowCmd::Retry { id, json } => show(&c.workflow_retry(id).await?, json),
        WorkflowCmd::Add { id, file, json } => {
            let spec: WorkflowAddition = read_json(&file, "tasks to add to a workflow")?;
            let out = c.workflow_add(id, &spec).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
                return Ok(());
            }
            println!("added {} task(s)", out.tasks.len());
            table(&out.workflow);
            Ok(())
        }
    }
}
