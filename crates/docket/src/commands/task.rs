//! `docket task …`: add (one, many, from a file), list, get, watch, cancel, retry, bulk.

use super::output::{print_table, print_task, short, task_row, TASK_HEADERS};
use crate::cli::{BulkFilter, ServerBulkFilter, TaskAddArgs, TaskCmd};
use crate::on_signal;
use anyhow::{bail, Context, Result};
use docket_client::{Client, ListFilter};
use docket_core::NewTask;
use std::io::BufRead;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

pub(crate) async fn task_cmd(c: Client, cmd: TaskCmd) -> Result<()> {
    match cmd {
        TaskCmd::Add(a) => task_add(&c, *a).await,
        TaskCmd::List {
            queue,
            state,
            kind,
            limit,
            after,
            desc,
            text,
            user_id,
            trace_id,
            unique_key,
            tag,
            worker,
            json,
        } => {
            let page = c
                .task_list(&ListFilter {
                    queue,
                    state,
                    kind,
                    limit: Some(limit),
                    after,
                    descending: desc,
                    text,
                    user_id,
                    trace_id,
                    unique_key,
                    tag,
                    worker,
                })
                .await?;
            if json {
                println!("{}", serde_json::to_string_pretty(&page.tasks)?);
            } else {
                print_table(&TASK_HEADERS, page.tasks.iter().map(task_row).collect());
                if let Some(n) = page.next_after {
                    eprintln!("more: --after {n}");
                }
            }
            Ok(())
        }
        TaskCmd::Set {
            id,
            priority,
            run_at,
            run_in,
            payload,
            node,
            any_node,
            queue,
            max_attempts,
            stage,
            if_version,
            json,
        } => {
            let payload = payload
                .map(|p| serde_json::from_str(&p).context("--payload is not valid JSON"))
                .transpose()?;
            let patch = docket_core::patch::TaskPatch {
                priority,
                run_at,
                run_in,
                payload,
                node: if any_node { Some(None) } else { node.map(Some) },
                queue,
                max_attempts,
                stage,
                ..Default::default()
            };
            print_task(
                &c.task_update(id, &patch, if_version.as_deref()).await?,
                json,
            )
        }
        TaskCmd::Show { id, json: _ } => {
            // `show` prints every field: JSON is the clearest full view.
            let t = c.task_get(id).await?;
            println!("{}", serde_json::to_string_pretty(&t)?);
            Ok(())
        }
        TaskCmd::Cancel { id, filter, json } => match id {
            Some(id) if !filter.any() => print_task(&c.task_cancel(id).await?, json),
            None if filter.any() && filter.text.is_none() => {
                server_bulk(&c, "cancel", filter.into(), BulkRun::yes()).await
            }
            None if filter.any() => bulk(&c, filter, "cancel").await,
            _ => bail!("give a task id or a filter (--queue, --kind, --state, --text), not both"),
        },
        TaskCmd::Retry { id, filter, json } => match id {
            Some(id) if !filter.any() => print_task(&c.task_retry(id).await?, json),
            None if filter.any() && filter.text.is_none() => {
                server_bulk(&c, "retry", filter.into(), BulkRun::yes()).await
            }
            None if filter.any() => bulk(&c, filter, "retry").await,
            _ => bail!("give a task id or a filter (--queue, --kind, --state, --text), not both"),
        },
        TaskCmd::Bulk {
            action,
            filter,
            dry_run,
            yes,
            no_wait,
            json,
        } => {
            server_bulk(
                &c,
                &action,
                filter,
                BulkRun {
                    dry_run,
                    yes,
                    no_wait,
                    json,
                },
            )
            .await
        }
        TaskCmd::Watch { id, json } => watch(&c, id, json).await,
    }
}

pub(crate) fn spec_from_args(a: &TaskAddArgs) -> Result<NewTask> {
    if let Some(sql) = &a.sql {
        let target = a.target.clone().context("--sql needs --target")?;
        return Ok(NewTask {
            payload: serde_json::json!({"input": sql, "target": target}),
            kind: docket_sql::SQL_KIND.into(),
            ..spec_fields(a, String::new())?
        });
    }
    let kind = a
        .kind
        .clone()
        .context("--kind is required (or use --sql or --file)")?;
    spec_fields(a, kind)
}

pub(crate) fn spec_fields(a: &TaskAddArgs, kind: String) -> Result<NewTask> {
    let payload = match &a.payload {
        Some(p) => {
            serde_json::from_str(p).with_context(|| format!("--payload is not valid JSON: {p}"))?
        }
        None => serde_json::Value::Null,
    };
    let backoff = match &a.backoff {
        Some(b) => Some(
            serde_json::from_str(b).with_context(|| format!("--backoff is not a backoff: {b}"))?,
        ),
        None => None,
    };
    Ok(NewTask {
        queue: a.queue.clone(),
        kind,
        payload,
        priority: a.priority,
        run_at: a.run_at,
        run_in: a.run_in,
        expires_at: a.expires_at,
        expires_in: a.expires_in,
        max_attempts: a.max_attempts,
        timeout: a.timeout,
        backoff,
        unique_key: a.unique_key.clone(),
        tags: a.tags.clone(),
        requires: (!a.requires.is_empty()).then(|| a.requires.iter().cloned().collect()),
        prefer: a.prefer_for.map(|for_| docket_core::labels::Prefer {
            labels: a.prefer.iter().cloned().collect(),
            for_,
        }),
        debounce: match (&a.debounce_key, a.debounce_period) {
            (Some(key), Some(period)) => Some(docket_core::debounce::Debounce {
                key: key.clone(),
                period,
                max_wait: a.debounce_max_wait,
            }),
            _ => None,
        },
        concurrency_key: a.concurrency_key.clone(),
        rate_limit: a.rate_limit.clone(),
        partition_key: a.partition_key.clone(),
        concurrency_limit: a.concurrency_limit,
        node: a.node.clone(),
        user_id: a.user_id.clone(),
        stage: a.stage.clone(),
        ..NewTask::default()
    })
}

pub(crate) async fn task_add(c: &Client, a: TaskAddArgs) -> Result<()> {
    let Some(path) = &a.file else {
        let t = c.task_add(&spec_from_args(&a)?).await?;
        return print_task(&t, a.json);
    };
    // One spec per line; every line is checked before anything is sent, so a bad line
    // enqueues nothing.
    let reader: Box<dyn BufRead> = if path == "-" {
        Box::new(std::io::stdin().lock())
    } else {
        Box::new(std::io::BufReader::new(
            std::fs::File::open(path).with_context(|| format!("cannot open {path}"))?,
        ))
    };
    let mut specs = vec![];
    for (i, line) in reader.lines().enumerate() {
        let line = line?;
        if line.trim().is_empty() {
            continue;
        }
        let mut t: NewTask = serde_json::from_str(&line)
            .with_context(|| format!("{path}:{}: not a task spec", i + 1))?;
        if t.queue.is_none() {
            t.queue = a.queue.clone();
        }
        specs.push(t);
    }
    if specs.is_empty() {
        bail!("{path} holds no task specs");
    }
    let bar = indicatif::ProgressBar::new(specs.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{bar:40} {pos}/{len} tasks  {per_sec}  eta {eta}")
            .expect("template"),
    );
    // Ctrl-C stops between batches: each batch is one transaction, so what was sent is whole
    // and the summary says where to resume.
    let stop = CancellationToken::new();
    on_signal(stop.clone());
    let mut inserted = 0;
    let mut existing = 0;
    let mut sent = 0;
    for chunk in specs.chunks(a.batch.max(1)) {
        if stop.is_cancelled() {
            bar.abandon();
            println!(
                "interrupted: the first {sent} of {} task specs were sent ({inserted} enqueued, {existing} matched an existing unique_key); the rest were not",
                specs.len()
            );
            std::process::exit(130);
        }
        let got = c.task_add_many(chunk).await.map_err(|e| {
            anyhow::anyhow!(
                "{e} (tasks before this batch of {} were enqueued: {inserted})",
                chunk.len()
            )
        })?;
        for t in &got {
            if t.inserted == Some(false) {
                existing += 1;
            } else {
                inserted += 1;
            }
        }
        sent += chunk.len();
        bar.inc(chunk.len() as u64);
    }
    bar.finish_and_clear();
    println!("enqueued {inserted} tasks ({existing} matched an existing unique_key)");
    Ok(())
}

/// Cancels or retries every task matching `f`, one by one with a progress bar; Ctrl-C stops
/// after the task in hand.
/// How `docket task bulk` runs.
pub(crate) struct BulkRun {
    dry_run: bool,
    yes: bool,
    no_wait: bool,
    json: bool,
}

impl BulkRun {
    /// `task cancel/retry` with a filter: no question (as before the server did it).
    fn yes() -> Self {
        BulkRun {
            dry_run: false,
            yes: true,
            no_wait: false,
            json: false,
        }
    }
}

impl From<BulkFilter> for ServerBulkFilter {
    fn from(f: BulkFilter) -> Self {
        ServerBulkFilter {
            queue: f.queue,
            kind: f.kind,
            state: f.state,
            user_id: None,
            unique_key: None,
            tag: None,
        }
    }
}

/// `docket task bulk`: counts, asks, asks the server, follows the progress with a bar; exits
/// non-zero when the bulk action did not complete.
pub(crate) async fn server_bulk(
    c: &Client,
    action: &str,
    f: ServerBulkFilter,
    run: BulkRun,
) -> Result<()> {
    use docket_core::bulk::{BulkAction, BulkFilter as Filter};
    use std::io::{BufRead, IsTerminal, Write};
    let action = BulkAction::parse(action)
        .with_context(|| format!("no bulk action {action:?}: cancel, retry, run-now or delete"))?;
    let states = match &f.state {
        None => vec![],
        Some(s) => docket_core::state::parse_filter(s)
            .with_context(|| format!("--state {s:?} names no task state"))?,
    };
    let filter = Filter {
        queue: f.queue,
        states,
        kind: f.kind,
        user_id: f.user_id,
        unique_key: f.unique_key,
        concurrency_key: None,
        tag: f.tag,
    };
    let verb = action.as_str();
    let (total, more) = c.task_bulk_count(action, &filter).await?;
    let count = if more {
        format!("more than {total}")
    } else {
        total.to_string()
    };
    if run.dry_run {
        if run.json {
            println!(
                "{}",
                serde_json::json!({"action": verb, "total": total, "more": more})
            );
        } else {
            println!("{verb}: {count} matching tasks");
        }
        return Ok(());
    }
    if total == 0 {
        println!("{verb}: 0 done, 0 refused (nothing matches)");
        return Ok(());
    }
    if !run.yes {
        if !std::io::stdin().is_terminal() {
            bail!("{verb} {count} matching tasks: confirm with --yes (no terminal to ask on)");
        }
        eprint!("{verb} {count} matching tasks? [y/N] ");
        std::io::stderr().flush()?;
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line)?;
        if !matches!(line.trim(), "y" | "Y" | "yes") {
            bail!("not confirmed: nothing done");
        }
    }
    let mut job = c.task_bulk(action, &filter).await?;
    if run.no_wait {
        if run.json {
            println!("{}", serde_json::to_string_pretty(&job)?);
        } else {
            println!("{}", job.id);
        }
        return Ok(());
    }
    let bar = indicatif::ProgressBar::new(total.max(1) as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} ({eta})")
            .expect("template"),
    );
    bar.set_message(format!("{verb} (bulk action {}):", job.id));
    while !job.state.is_finished() {
        tokio::time::sleep(Duration::from_millis(250)).await;
        job = c.task_bulk_get(job.id).await?;
        bar.set_position(job.done.saturating_add(job.skipped).max(0) as u64);
    }
    bar.finish_and_clear();
    if run.json {
        println!("{}", serde_json::to_string_pretty(&job)?);
    } else {
        println!(
            "{verb}: {} done, {} refused (state changed meanwhile)",
            job.done, job.skipped
        );
    }
    if job.state != docket_core::TaskState::Completed {
        bail!(
            "bulk action {} ended {}{}",
            job.id,
            job.state,
            job.error.map(|e| format!(": {e}")).unwrap_or_default()
        );
    }
    Ok(())
}

pub(crate) async fn bulk(c: &Client, f: BulkFilter, verb: &str) -> Result<()> {
    let mut ids = vec![];
    let mut after = None;
    loop {
        let page = c
            .task_list(&docket_client::ListFilter {
                queue: f.queue.clone(),
                state: f.state.clone(),
                kind: f.kind.clone(),
                text: f.text.clone(),
                limit: Some(1000),
                after,
                ..Default::default()
            })
            .await?;
        ids.extend(page.tasks.iter().map(|t| t.id));
        match page.next_after {
            Some(a) => after = Some(a),
            None => break,
        }
    }
    let stop = CancellationToken::new();
    on_signal(stop.clone());
    let bar = indicatif::ProgressBar::new(ids.len() as u64);
    bar.set_style(
        indicatif::ProgressStyle::with_template("{msg} {bar:40} {pos}/{len} ({eta})")
            .expect("template"),
    );
    bar.set_message(format!("{verb}:"));
    let (mut done, mut refused) = (0, 0);
    for id in &ids {
        if stop.is_cancelled() {
            break;
        }
        let r = if verb == "cancel" {
            c.task_cancel(*id).await
        } else {
            c.task_retry(*id).await
        };
        match r {
            Ok(_) => done += 1,
            // A task that finished (or was taken) meanwhile is not an error of the batch.
            Err(e) if matches!(e.code(), Some("invalid_state" | "not_found")) => refused += 1,
            Err(e) => {
                bar.abandon();
                return Err(e.into());
            }
        }
        bar.inc(1);
    }
    bar.finish_and_clear();
    let left = ids.len() - done - refused;
    println!(
        "{verb}: {done} done, {refused} refused (state changed meanwhile){}",
        if left > 0 {
            format!(", {left} left (interrupted)")
        } else {
            String::new()
        }
    );
    Ok(())
}

/// Prints the task, then each change, until it finishes; woken by the server's change feed
/// (`GET /v1/changes`), with a look every 2 s as a fallback.
pub(crate) async fn watch(c: &Client, id: i64, json: bool) -> Result<()> {
    use futures::StreamExt;
    let mut changes = c.changes().await.ok();
    let mut last: Option<String> = None;
    loop {
        let t = c.task_get(id).await?;
        let line = format!(
            "{}  {}  attempt {}/{}{}{}",
            chrono::Utc::now().format("%H:%M:%S"),
            t.state,
            t.attempt,
            t.max_attempts,
            t.progress
                .as_ref()
                .map(|p| format!("  progress {p}"))
                .unwrap_or_default(),
            t.errors
                .last()
                .map(|e| format!("  last error: {}", short(&e.message, 100)))
                .unwrap_or_default()
        );
        if last.as_deref() != Some(&line[10..]) {
            if json {
                println!("{}", serde_json::to_string(&t)?);
            } else {
                println!("{line}");
            }
            last = Some(line[10..].to_string());
        }
        if t.state.is_finished() {
            if t.state != docket_core::TaskState::Completed {
                std::process::exit(1);
            }
            if let (false, Some(r)) = (json, &t.result) {
                println!("result: {r}");
            }
            return Ok(());
        }
        let wait = tokio::time::sleep(Duration::from_secs(2));
        match changes.as_mut() {
            Some(s) => {
                tokio::select! {
                    n = s.next() => if n.is_none() { changes = None },
                    _ = wait => {}
                }
            }
            None => wait.await,
        }
    }
}
