//! `docket workflow-run …`: durable functions' runs (issue 41).

use super::output::print_table;
use crate::cli::WorkflowRunCmd;
use anyhow::{bail, Context, Result};
use docket_client::Client;
use docket_core::durable::{
    Entry, EventRequest, RunListParams, RunState, StartRequest, WorkflowRun,
};

fn parse_json(what: &str, v: Option<String>) -> Result<serde_json::Value> {
    match v {
        None => Ok(serde_json::Value::Null),
        Some(s) => serde_json::from_str(&s).with_context(|| format!("{what} is not JSON: {s}")),
    }
}

fn time(t: Option<docket_core::Timestamp>) -> String {
    t.map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
        .unwrap_or_default()
}

fn runs(list: &[WorkflowRun]) {
    let rows = list
        .iter()
        .map(|r| {
            vec![
                r.id.clone(),
                r.workflow.clone(),
                r.state.as_str().to_string(),
                r.steps.to_string(),
                time(Some(r.created_at)),
                r.waiting_for.clone().unwrap_or_default(),
                time(r.wake_at),
            ]
        })
        .collect();
    print_table(
        &[
            "ID",
            "WORKFLOW",
            "STATE",
            "STEPS",
            "STARTED",
            "WAITING FOR",
            "WAKES",
        ],
        rows,
    );
}

fn show(r: &WorkflowRun, json: bool) -> Result<()> {
    if json {
        println!("{}", serde_json::to_string_pretty(r)?);
        return Ok(());
    }
    runs(std::slice::from_ref(r));
    if let Some(v) = &r.result {
        println!("result: {v}");
    }
    if let Some(e) = &r.error {
        println!("error: {e}");
    }
    Ok(())
}

fn entries(list: &[Entry]) {
    let rows = list
        .iter()
        .map(|e| {
            let value = match (&e.error, &e.output, &e.child_id) {
                (Some(err), _, _) => format!("error: {err}"),
                (None, _, Some(c)) if e.kind.as_str() == "child" => format!("child {c}"),
                (None, Some(v), _) => v.to_string(),
                _ => String::new(),
            };
            vec![
                e.seq.to_string(),
                e.kind.as_str().to_string(),
                e.name.clone(),
                e.state.as_str().to_string(),
                e.attempts.to_string(),
                time(Some(e.started_at)),
                time(e.finished_at.or(e.wake_at)),
                value,
            ]
        })
        .collect();
    print_table(
        &[
            "SEQ",
            "KIND",
            "NAME",
            "STATE",
            "ATTEMPTS",
            "STARTED",
            "ENDED/WAKES",
            "VALUE",
        ],
        rows,
    );
}

pub(crate) async fn workflow_run_cmd(c: Client, cmd: WorkflowRunCmd) -> Result<()> {
    match cmd {
        WorkflowRunCmd::Start {
            workflow,
            input,
            id,
            queue,
            json,
        } => {
            let out = c
                .run_start(&StartRequest {
                    workflow,
                    input: parse_json("INPUT", input)?,
                    id,
                    queue,
                    ..StartRequest::default()
                })
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&out)?);
            } else if out.created {
                println!("started {}", out.run.id);
            } else {
                println!(
                    "{} was started before ({})",
                    out.run.id,
                    out.run.state.as_str()
                );
            }
            Ok(())
        }
        WorkflowRunCmd::Show { id, json } => show(&c.run_get(&id).await?, json),
        WorkflowRunCmd::Steps { id, json } => {
            let list = c.run_steps(&id).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                entries(&list.steps);
            }
            Ok(())
        }
        WorkflowRunCmd::Result { id, wait, json } => {
            if wait > docket_core::durable::MAX_RESULT_WAIT {
                bail!("--wait is at most 60s");
            }
            let r = c.run_result(&id, wait).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&r)?);
            } else if let Some(v) = &r.result {
                println!("{v}");
            }
            match r.state {
                RunState::Completed => Ok(()),
                RunState::Failed | RunState::Cancelled => {
                    if !json {
                        eprintln!(
                            "run {} {}: {}",
                            r.id,
                            r.state.as_str(),
                            r.error.as_deref().unwrap_or("")
                        );
                    }
                    std::process::exit(1)
                }
                s => {
                    if !json {
                        eprintln!("run {} has not finished ({})", r.id, s.as_str());
                    }
                    std::process::exit(2)
                }
            }
        }
        WorkflowRunCmd::List {
            workflow,
            state,
            parent,
            limit,
            json,
        } => {
            let state = state
                .map(|s| RunState::parse(&s))
                .transpose()
                .map_err(anyhow::Error::msg)?;
            let list = c
                .run_list(&RunListParams {
                    workflow,
                    state,
                    parent_id: parent,
                    limit: Some(limit),
                    ..RunListParams::default()
                })
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&list)?);
            } else {
                runs(&list.runs);
            }
            Ok(())
        }
        WorkflowRunCmd::Send {
            id,
            name,
            payload,
            json,
        } => {
            let sent = c
                .run_send(
                    &id,
                    &EventRequest {
                        name,
                        payload: parse_json("PAYLOAD", payload)?,
                    },
                )
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&sent)?);
            } else if sent.delivered {
                println!("event {} delivered: the run was waiting for it", sent.id);
            } else {
                println!("event {} is in the run's mailbox", sent.id);
            }
            Ok(())
        }
        WorkflowRunCmd::Cancel { id, json } => show(&c.run_cancel(&id).await?, json),
        WorkflowRunCmd::Retry { id, json } => show(&c.run_retry(&id).await?, json),
    }
}
