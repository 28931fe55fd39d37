//! `docket schedule …`.

use super::output::print_table;
use super::task::spec_from_args;
use crate::cli::ScheduleCmd;
use anyhow::Result;
use docket_client::Client;

pub(crate) async fn schedule_cmd(c: Client, cmd: ScheduleCmd) -> Result<()> {
    let table = |all: &[serde_json::Value]| {
        let rows = all
            .iter()
            .map(|s| {
                let when = match (&s["every"], &s["cron"]) {
                    (serde_json::Value::String(e), _) => format!(
                        "every {e}{}",
                        if s["drift"] == true { " (drift)" } else { "" }
                    ),
                    (_, serde_json::Value::String(c)) => format!(
                        "cron {c}{}",
                        s["timezone"]
                            .as_str()
                            .map(|z| format!(" {z}"))
                            .unwrap_or_default()
                    ),
                    _ => "-".into(),
                };
                vec![
                    s["name"].as_str().unwrap_or_default().to_string(),
                    when,
                    s["task"]["kind"].as_str().unwrap_or_default().to_string(),
                    if s["paused"] == true {
                        "paused"
                    } else {
                        "active"
                    }
                    .to_string(),
                    s["next_run_at"].as_str().unwrap_or("-").to_string(),
                    s["last_task_id"]
                        .as_i64()
                        .map(|i| i.to_string())
                        .unwrap_or("-".into()),
                ]
            })
            .collect();
        print_table(
            &["NAME", "WHEN", "KIND", "STATE", "NEXT RUN", "LAST TASK"],
            rows,
        );
    };
    let show = |v: serde_json::Value, json: bool| -> Result<()> {
        if json {
            println!("{}", serde_json::to_string_pretty(&v)?);
        } else {
            table(std::slice::from_ref(&v));
        }
        Ok(())
    };
    match cmd {
        ScheduleCmd::Add(a) => {
            let json = a.task.json;
            let spec = docket_core::ScheduleSpec {
                name: a.name,
                task: spec_from_args(&a.task)?,
                every: a.every,
                drift: a.drift,
                after_end: a.after_end,
                cron: a.cron,
                timezone: a.timezone,
                start_at: a.start_at,
            };
            show(serde_json::to_value(c.schedule_put(&spec).await?)?, json)
        }
        ScheduleCmd::List { json } => {
            let v = serde_json::to_value(c.schedule_list().await?)?;
            if json {
                println!("{}", serde_json::to_string_pretty(&v)?);
            } else {
                table(v.as_array().map_or(&[][..], |a| a.as_slice()));
            }
            Ok(())
        }
        ScheduleCmd::Show { name, json } => {
            show(serde_json::to_value(c.schedule_get(&name).await?)?, json)
        }
        ScheduleCmd::Pause { name } => show(
            serde_json::to_value(c.schedule_set_paused(&name, true).await?)?,
            false,
        ),
        ScheduleCmd::Resume { name } => show(
            serde_json::to_value(c.schedule_set_paused(&name, false).await?)?,
            false,
        ),
        ScheduleCmd::Remove { name } => {
            c.schedule_delete(&name).await?;
            println!("removed schedule {name}");
            Ok(())
        }
    }
}
