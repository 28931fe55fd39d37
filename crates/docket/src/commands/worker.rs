//! `docket worker`: turns a command into a task handler over the HTTP API.

use crate::*;

pub(crate) async fn worker(a: WorkerArgs) -> Result<()> {
    let telemetry = telemetry::init(a.log_format, "info", a.otlp_endpoint.as_deref())?;
    let r = worker_inner(a).await;
    // The batch exporter's blocking flush must not run on a runtime thread.
    tokio::task::spawn_blocking(move || telemetry.shutdown()).await?;
    r
}

pub(crate) async fn worker_inner(a: WorkerArgs) -> Result<()> {
    let cancel = CancellationToken::new();
    on_signal(cancel.clone());
    let name = a
        .name
        .unwrap_or_else(|| format!("worker-{}", default_node_name()));
    let opts = docket_client::command_worker::WorkerOptions {
        queue: a.queue,
        kinds: a.kinds,
        concurrency: a.concurrency,
        lease: a.lease,
        name,
        command: a.command,
        grace: a.grace,
        kill_grace: a.kill_grace,
    };
    tracing::info!(queue = %opts.queue, concurrency = opts.concurrency, server = %a.server.server, "worker started");
    docket_client::command_worker::run(a.server.client()?, opts, cancel)
        .await
        .map_err(anyhow::Error::msg)
}
