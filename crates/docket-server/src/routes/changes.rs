//! `GET /v1/changes`: the engine's change feed as server-sent events (debounced, no payload).

use crate::prelude::*;

/// One `changed` event per burst of engine changes (at most about 3 a second): `GET
/// /v1/changes` for clients (`docket task watch`), and the dashboard's `/ui/events`, on which
/// htmx refreshes a page's live part.
#[utoipa::path(
    get, path = "/v1/changes",
    tag = "status",
    responses((status = 200, description = "text/event-stream", content_type = "text/event-stream", body = crate::schemas::SseEvent)),
    summary = "Server-sent events: `changed` whenever tasks changed (debounced, no payload)"
)]
pub(crate) async fn changes(
    State(s): State<AppState>,
    caller: Option<axum::Extension<docket_engine::auth::Caller>>,
) -> Response {
    use axum::response::sse::{Event, KeepAlive, Sse};
    let slot = match crate::auth::long_poll(&s, caller.as_ref().map(|c| &c.0)) {
        Ok(slot) => slot,
        Err(e) => return e.into_response(),
    };
    let rx = s.engine.waker.changes();
    let stop = s.shutdown.clone();
    let stream = futures::stream::unfold((rx, stop, slot), |(mut rx, stop, slot)| async move {
        use tokio::sync::broadcast::error::RecvError;
        tokio::select! {
            _ = stop.cancelled() => return None,
            r = rx.recv() => if let Err(RecvError::Closed) = r { return None },
        }
        tokio::time::sleep(std::time::Duration::from_millis(300)).await;
        while let Ok(()) | Err(tokio::sync::broadcast::error::TryRecvError::Lagged(_)) =
            rx.try_recv()
        {}
        Some((
            Ok::<_, std::convert::Infallible>(Event::default().event("changed").data("1")),
            (rx, stop, slot),
        ))
    });
    Sse::new(stream)
        .keep_alive(KeepAlive::default())
        .into_response()
}
