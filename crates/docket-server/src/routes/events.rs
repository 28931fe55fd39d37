//! `/v1/events`: process notifications as server-sent events.

use crate::prelude::*;

#[derive(Deserialize, utoipa::IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub(crate) struct EventsQuery {
    /// Only this namespace's notifications.
    namespace: Option<String>,
    /// Resume after this seq (else the `Last-Event-ID` header, else from the start).
    after: Option<i64>,
}

/// One `/v1/events` subscriber: its position, what it has to send, and whether it follows the
/// shared tail (`live`) or catches up from the database.
pub(crate) struct EventsState {
    cursor: i64,
    buf: std::collections::VecDeque<Arc<docket_core::process::Notification>>,
    live: bool,
    rx: tokio::sync::broadcast::Receiver<Arc<docket_core::process::Notification>>,
    s: AppState,
    ns: Option<String>,
    /// The stream's long-poll slot, released when the client goes away.
    _slot: Option<auth::LongPoll>,
}

/// Server-sent events of process notifications (events and lifecycle changes), in commit order,
/// resumable with `after` or the `Last-Event-ID` header (the SSE `id` is the notification's seq).
#[utoipa::path(
    get, path = "/v1/events",
    tag = "processes",
    params(EventsQuery),
    responses((status = 200, description = "text/event-stream; each data is a Notification {seq, namespace, process_id, kind, event_id, data, created_at}", content_type = "text/event-stream", body = crate::schemas::SseEvent)),
    summary = "Server-sent events of process notifications (event, created, failed, repaired, removed) in commit order; resumable with `after` or Last-Event-ID (the SSE id is the seq)"
)]
pub(crate) async fn events_stream(
    State(s): State<AppState>,
    headers: axum::http::HeaderMap,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
    q: Result<Query<EventsQuery>, QueryRejection>,
) -> ApiResult<Response> {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let q = query(q)?;
    let slot = auth::long_poll(&s, caller.as_ref().map(|c| &c.0))?;
    let last_id = headers
        .get("last-event-id")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<i64>().ok());
    let after = q.after.or(last_id).unwrap_or(0);
    // Subscribe before catching up, so nothing falls between the two (see events.rs).
    let rx = s.events.subscribe(&s.engine, &s.shutdown).await?;
    let st = EventsState {
        cursor: after,
        buf: std::collections::VecDeque::new(),
        live: false,
        rx,
        s,
        ns: q.namespace,
        _slot: slot,
    };
    let stream = futures::stream::unfold(st, |mut st| async move {
        loop {
            if let Some(n) = st.buf.pop_front() {
                let ev = Event::default()
                    .id(n.seq.to_string())
                    .event(n.kind.clone())
                    .json_data(&*n)
                    .expect("notification serialises");
                return Some((Ok::<_, std::convert::Infallible>(ev), st));
            }
            if st.s.shutdown.is_cancelled() {
                return None;
            }
            if !st.live {
                // Catching up from the database, from this subscriber's own position.
                match st
                    .s
                    .engine
                    .notification_list(st.ns.as_deref(), st.cursor, 500)
                    .await
                {
                    Ok(v) if !v.is_empty() => {
                        st.cursor = v.last().map_or(st.cursor, |n| n.seq);
                        st.buf.extend(v.into_iter().map(Arc::new));
                    }
                    Ok(_) => st.live = true,
                    Err(e) => {
                        tracing::warn!(error = %e, "reading notifications failed");
                        tokio::time::sleep(std::time::Duration::from_secs(1)).await;
                    }
                }
                continue;
            }
            let got = tokio::select! {
                r = st.rx.recv() => r,
                _ = st.s.shutdown.cancelled() => return None,
            };
            match got {
                Ok(n) if n.seq <= st.cursor => {}
                Ok(n) => {
                    st.cursor = n.seq;
                    if st.ns.as_deref().is_none_or(|ns| ns == n.namespace) {
                        st.buf.push_back(n);
                    }
                }
                // Fell behind the shared buffer: read the database again from here.
                Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => st.live = false,
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    });
    Ok(Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response())
}
