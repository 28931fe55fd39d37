//! `docket queue …`.

use super::output::print_table;
use crate::cli::QueueCmd;
use anyhow::Result;
use docket_client::Client;
use docket_core::QueueSettings;

pub(crate) async fn queue_cmd(c: Client, cmd: QueueCmd) -> Result<()> {
    let print = |qs: Vec<docket_core::QueueStats>, json: bool| -> Result<()> {
        if json {
            println!("{}", serde_json::to_string_pretty(&qs)?);
            return Ok(());
        }
        let rows = qs
            .iter()
            .map(|q| {
                let n = |s| q.counts.get(&s).copied().unwrap_or(0).to_string();
                use docket_core::TaskState::*;
                vec![
                    q.name.clone(),
                    if q.settings.paused {
                        "paused"
                    } else {
                        "active"
                    }
                    .to_string(),
                    q.settings
                        .concurrency_limit
                        .map(|l| l.to_string())
                        .unwrap_or("-".into()),
                    n(Scheduled),
                    n(Available),
                    n(Running),
                    n(Retryable),
                    n(Completed),
                    n(Discarded),
                    n(Cancelled),
                ]
            })
            .collect();
        print_table(
            &[
                "QUEUE",
                "STATUS",
                "LIMIT",
                "SCHEDULED",
                "AVAILABLE",
                "RUNNING",
                "RETRYABLE",
                "COMPLETED",
                "DISCARDED",
                "CANCELLED",
            ],
            rows,
        );
        Ok(())
    };
    match cmd {
        QueueCmd::List { json } => print(c.queue_list().await?, json),
        QueueCmd::Show { queue, json } => {
            let q = c.queue_get(&queue).await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&q)?);
                Ok(())
            } else {
                println!("{}", serde_json::to_string_pretty(&q.settings)?);
                print(vec![q], false)
            }
        }
        QueueCmd::Set(a) => {
            let mut s: QueueSettings = c.queue_get(&a.queue).await?.settings;
            if let Some(v) = a.concurrency_limit {
                s.concurrency_limit = (v > 0).then_some(v);
            }
            if let Some(v) = a.fair {
                s.fair = v;
            }
            if let Some(v) = a.partition_limit {
                s.partition_limit = (v > 0).then_some(v);
            }
            for w in &a.partition_weight {
                let (p, n) = w.rsplit_once('=').ok_or_else(|| {
                    anyhow::anyhow!("--partition-weight takes PARTITION=WEIGHT, got {w:?}")
                })?;
                let n: i32 = n.parse().map_err(|_| {
                    anyhow::anyhow!("--partition-weight {w:?}: the weight is not a number")
                })?;
                s.partition_weights
                    .get_or_insert_with(Default::default)
                    .insert(p.to_string(), n);
            }
            if let Some(v) = &a.rate_limit {
                s.rate_limit = (!v.is_empty()).then(|| v.clone());
            }
            if let Some(v) = &a.dead_letter {
                s.dead_letter = (!v.is_empty()).then(|| v.clone());
            }
            if let Some(v) = a.max_attempts {
                s.max_attempts = (v > 0).then_some(v);
            }
            if let Some(v) = a.timeout {
                s.timeout = Some(v);
            }
            if let Some(v) = a.schedule_limit {
                s.schedule_limit = (v > 0).then_some(v);
            }
            if let Some(v) = a.schedule_interval {
                s.schedule_interval = (!v.is_zero()).then_some(v);
            }
            if let Some(v) = a.retention_completed {
                s.retention_completed = Some(v);
            }
            if let Some(v) = a.retention_failed {
                s.retention_failed = Some(v);
            }
            if a.backoff_kind.is_some()
                || a.backoff_initial.is_some()
                || a.backoff_max.is_some()
                || a.backoff_coefficient.is_some()
                || a.backoff_jitter.is_some()
            {
                let mut b = s.backoff.unwrap_or_default();
                if let Some(k) = &a.backoff_kind {
                    b.kind = k.parse().map_err(anyhow::Error::msg)?;
                }
                if let Some(v) = a.backoff_initial {
                    b.initial = v;
                }
                if let Some(v) = a.backoff_max {
                    b.max = v;
                }
                if let Some(v) = a.backoff_coefficient {
                    b.coefficient = v;
                }
                if let Some(v) = a.backoff_jitter {
                    b.jitter = v;
                }
                s.backoff = Some(b);
            }
            let q = c.queue_put(&a.queue, &s).await?;
            println!("{}", serde_json::to_string_pretty(&q.settings)?);
            Ok(())
        }
        QueueCmd::Pause { queue } => {
            c.queue_set_paused(&queue, true).await?;
            println!("queue {queue} paused");
            Ok(())
        }
        QueueCmd::Resume { queue } => {
            c.queue_set_paused(&queue, false).await?;
            println!("queue {queue} resumed");
            Ok(())
        }
    }
}
