//! Who may do what (docs: operations/security.md): API tokens (`Authorization: Bearer …`) checked against
//! the scope each route needs, the dashboard's login session (a cookie holding the token), and
//! the dashboard's defences against cross-site requests (Origin / Sec-Fetch-Site checks and a
//! CSRF token in every form).

use crate::error::{ApiError, Code};
use crate::state::AppState;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Redirect, Response};
use docket_core::auth::{hash_token, needed_scope, Scope};
use docket_engine::auth::{Caller, TokenCheck};

pub(crate) mod limits;
pub use limits::{AuthMode, Limits, LongPoll};

/// The dashboard's session cookie: it holds the token the operator logged in with, so every
/// request is checked against the database (a revoked token ends the session at once).
pub const SESSION_COOKIE: &str = "docket_session";

/// The CSRF token a dashboard form must carry, for the session it was rendered for.
#[derive(Debug, Clone)]
pub struct Csrf(pub String);

/// Whether the request may take dashboard actions (auth off, or an `admin` token).
#[derive(Debug, Clone, Copy)]
pub struct CanAct(pub bool);

/// The name of the form field that carries the CSRF token.
pub const CSRF_FIELD: &str = "csrf";

/// The CSRF token of a session: derived from the session's token (so it is the same on every
/// node and unknown to anyone without the cookie), or, with auth off, from a secret of this
/// process.
pub(crate) fn csrf_token(s: &AppState, session: Option<&str>) -> String {
    match session {
        Some(t) => hash_token(&format!("csrf:{}", hash_token(t))),
        None => hash_token(&format!("csrf:{}", s.csrf_secret)),
    }
}

fn bearer(h: &HeaderMap) -> Option<String> {
    let v = h.get(header::AUTHORIZATION)?.to_str().ok()?;
    let (scheme, t) = v.split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then(|| t.trim().to_string())
        .filter(|t| !t.is_empty())
}

pub(crate) fn cookie(h: &HeaderMap, name: &str) -> Option<String> {
    h.get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .filter_map(|kv| kv.trim().split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v.to_string())
        .filter(|v| !v.is_empty())
}

/// A browser's request from another site: `Sec-Fetch-Site` says so, or `Origin` names
/// another host than the one asked. Requests without either (curl, old browsers) pass: they
/// carry no ambient cookie of another site's making, and the CSRF token still has to match.
fn cross_site(h: &HeaderMap) -> bool {
    if let Some(site) = h.get("sec-fetch-site").and_then(|v| v.to_str().ok()) {
        if !matches!(site, "same-origin" | "none") {
            return true;
        }
    }
    let host = h.get(header::HOST).and_then(|v| v.to_str().ok());
    match (h.get(header::ORIGIN).and_then(|v| v.to_str().ok()), host) {
        (Some("null"), _) => true,
        (Some(origin), Some(host)) => origin
            .split_once("://")
            .map(|(_, rest)| rest)
            .is_none_or(|o| o != host),
        _ => false,
    }
}

fn is_dashboard(path: &str) -> bool {
    path == "/" || path.starts_with("/ui/") || path == "/ui"
}

fn unauthenticated(ui_get: bool, msg: &str) -> Response {
    if ui_get {
        return Redirect::to("/ui/login").into_response();
    }
    ApiError::new(Code::Unauthenticated, msg).into_response()
}

/// The host part of a `Host` header: `name`, `1.2.3.4` or `[::1]` without the port.
fn host_name(h: &str) -> &str {
    if let Some(rest) = h.strip_prefix('[') {
        return rest.split(']').next().unwrap_or(rest);
    }
    h.rsplit_once(':').map_or(h, |(n, _)| n)
}

/// Authenticates and authorises every request (see the module doc), and checks dashboard posts
/// for cross-site origin and the CSRF token.
pub(crate) async fn authorize(State(s): State<AppState>, req: Request, next: Next) -> Response {
    if let Some(allowed) = &s.allowed_hosts {
        if let Some(host) = req
            .headers()
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
        {
            let name = host_name(host);
            if !allowed.iter().any(|a| a.eq_ignore_ascii_case(name)) {
                return ApiError::new(
                    Code::Forbidden,
                    format!("Host {host:?} is not a name of this server (DNS rebinding defence); allow it with --allowed-host"),
                )
                .into_response();
            }
        }
    }
    let path = req.uri().path().to_string();
    let method = req.method().clone();
    let ui = is_dashboard(&path);
    let ui_post = ui && method == Method::POST;
    if ui_post && cross_site(req.headers()) {
        return ApiError::new(Code::Forbidden, "cross-site request refused").into_response();
    }
    let reads = method == Method::GET || method == Method::HEAD;
    let session = cookie(req.headers(), SESSION_COOKIE);
    // The cookie counts for reads and for dashboard posts (which also need the CSRF token);
    // an API write needs the Authorization header, so a cookie alone can never make one.
    let token = bearer(req.headers()).or_else(|| session.clone().filter(|_| reads || ui_post));
    let need = needed_scope(method.as_str(), &path);
    let mut req = req;
    let mut can_act = true;
    if s.auth == AuthMode::Required && need.is_some() {
        let need = need.unwrap_or(Scope::Admin);
        let Some(token) = token.as_deref() else {
            return unauthenticated(
                ui && reads,
                "this server requires an API token: send Authorization: Bearer <token> (see `docket token create`)",
            );
        };
        let caller = match s.engine.token_check(token).await {
            Err(e) => return ApiError::from(e).into_response(),
            Ok(TokenCheck::Valid(c)) => c,
            Ok(TokenCheck::Unknown) => return unauthenticated(ui && reads, "unknown token"),
            Ok(TokenCheck::Revoked) => {
                return unauthenticated(ui && reads, "this token was revoked")
            }
            Ok(TokenCheck::Expired) => return unauthenticated(ui && reads, "this token expired"),
        };
        if !caller.grant.allows(need) {
            return ApiError::new(
                Code::Forbidden,
                format!(
                    "token {:?} lacks the `{need}` scope this request needs",
                    caller.name
                ),
            )
            .into_response();
        }
        if let Err(secs) = s.limiters.check_rate(&caller.name) {
            return rate_limited(
                format!(
                    "token {:?} is over its rate limit ({}/s); retry after {secs} s",
                    caller.name, s.limiters.limits.rate_per_second
                ),
                secs,
            );
        }
        can_act = caller.grant.allows(Scope::Admin);
        // The audit log records the token's name; a client cannot claim another actor.
        if let Ok(v) = HeaderValue::from_str(&format!("token:{}", caller.name)) {
            req.headers_mut().insert("x-docket-actor", v);
        }
        req.extensions_mut().insert(caller);
    }
    // The API never renders or checks forms: the CSRF token (two SHA-256s) is for dashboard
    // requests only.
    if !ui {
        return next.run(req).await;
    }
    let session_for_csrf = (s.auth == AuthMode::Required)
        .then_some(session.as_deref())
        .flatten();
    let csrf = csrf_token(&s, session_for_csrf);
    if ui_post && path != "/ui/login" {
        let (parts, body) = req.into_parts();
        let Ok(bytes) = axum::body::to_bytes(body, 64 * 1024).await else {
            return ApiError::new(Code::PayloadTooLarge, "form too large").into_response();
        };
        let sent = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&bytes)
            .ok()
            .and_then(|f| f.into_iter().find(|(k, _)| k == CSRF_FIELD).map(|(_, v)| v));
        if sent.as_deref() != Some(csrf.as_str()) {
            return ApiError::new(
                Code::Forbidden,
                "missing or wrong CSRF token: reload the page and try again",
            )
            .into_response();
        }
        req = Request::from_parts(parts, Body::from(bytes));
    }
    req.extensions_mut().insert(Csrf(csrf));
    req.extensions_mut().insert(CanAct(can_act));
    next.run(req).await
}

/// Headers of every dashboard page: no inline script may run, no other site may frame it, no
/// content sniffing, no referrer to other sites.
pub(crate) async fn security_headers(mut r: Response) -> Response {
    let h = r.headers_mut();
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; \
             img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; \
             base-uri 'none'; form-action 'self'",
        ),
    );
    h.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    h.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    h.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    r
}

/// Under auth, a task whose kind hook names a scope (`sql` tasks: `sql`) needs it besides
/// `enqueue`.
pub(crate) fn check_kind_scope(
    engine: &docket_engine::Engine,
    caller: Option<&Caller>,
    tasks: &[&docket_core::NewTask],
) -> Result<(), ApiError> {
    let Some(c) = caller else { return Ok(()) };
    for t in tasks {
        if let Some(scope) = engine.kind_scope(&t.kind) {
            if !c.grant.allows(scope) {
                return Err(ApiError::new(
                    Code::Forbidden,
                    format!(
                        "token {:?} lacks the `{}` scope a {} task needs",
                        c.name,
                        scope.as_str(),
                        t.kind
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Under auth, a `work` token limited to some queues may claim only from those.
pub(crate) fn check_queue(caller: Option<&Caller>, queue: &str) -> Result<(), ApiError> {
    match caller {
        Some(c) if !c.grant.allows_queue(queue) => Err(ApiError::new(
            Code::Forbidden,
            format!("token {:?} may not work queue {queue:?}", c.name),
        )),
        _ => Ok(()),
    }
}

/// What a masked payload, result or progress shows (queue setting `mask_payload`).
pub const MASKED: &str = "***";

/// Whether a caller sees the payloads of `mask_payload` queues masked: under auth, any token
/// without `admin` (auth off: nobody; the dashboard: always, see [`mask_tasks`]).
pub(crate) fn masks_for(caller: Option<&Caller>) -> bool {
    caller.is_some_and(|c| !c.grant.allows(Scope::Admin))
}

/// Replaces payload, result and progress of the tasks whose queue has `mask_payload` with
/// [`MASKED`]. Reads the settings of the distinct queues once (no counts).
pub(crate) async fn mask_tasks<'a>(
    s: &AppState,
    tasks: impl IntoIterator<Item = &'a mut docket_core::Task>,
) -> Result<(), ApiError> {
    let tasks: Vec<&mut docket_core::Task> = tasks.into_iter().collect();
    let mut names: Vec<String> = tasks.iter().map(|t| t.queue.clone()).collect();
    names.sort();
    names.dedup();
    let settings = s.engine.queue_settings(&names).await?;
    for t in tasks {
        if settings.get(&t.queue).is_some_and(|q| q.mask_payload) {
            t.payload = MASKED.into();
            t.result = t.result.as_ref().map(|_| MASKED.into());
            t.progress = t.progress.as_ref().map(|_| MASKED.into());
        }
    }
    Ok(())
}

fn rate_limited(msg: String, retry_after: u64) -> Response {
    ApiError::new(Code::RateLimited, msg)
        .retry_after(retry_after)
        .into_response()
}

/// Takes one of the caller's long-poll slots: `Ok(None)` when there is no caller (auth off)
/// or no cap; 429 `rate_limited` when the token already holds [`Limits::long_polls`].
pub(crate) fn long_poll(
    s: &AppState,
    caller: Option<&Caller>,
) -> Result<Option<LongPoll>, ApiError> {
    let (Some(c), max) = (caller, s.limiters.limits.long_polls) else {
        return Ok(None);
    };
    if max == 0 {
        return Ok(None);
    }
    let mut m = s
        .limiters
        .polls
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let n = m.entry(c.name.clone()).or_insert(0);
    if *n >= max {
        return Err(ApiError::new(
            Code::RateLimited,
            format!(
                "token {:?} already holds {max} long-polls open (claims with wait, event streams); close one or raise --max-long-polls",
                c.name
            ),
        )
        .retry_after(1));
    }
    *n += 1;
    Ok(Some(LongPoll {
        limiters: s.limiters.clone(),
        token: c.name.clone(),
    }))
}

/// Whether a request body's `Content-Type` is JSON (`application/json`, `application/*+json`).
fn is_json(ct: &str) -> bool {
    let mt = ct
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase();
    mt == "application/json" || (mt.starts_with("application/") && mt.ends_with("+json"))
}

/// Whether `path` is one of asyncflow's (`--compat asyncflow`): `/api` or under it.
pub(crate) fn under_api(path: &str) -> bool {
    path == "/api" || path.starts_with("/api/")
}

/// Guards the JSON API — docket's `/v1` and, with `--compat asyncflow`, asyncflow's `/api` —
/// against browsers: a write from another site's page is refused (403) unless its origin is
/// allowed by `--cors-origin`, and a body must be declared JSON (415): `text/plain` and form
/// posts are what a page can send without a CORS preflight. (Under `/api` the refusal is
/// written in asyncflow's envelope.)
pub(crate) async fn api_guard(State(s): State<AppState>, req: Request, next: Next) -> Response {
    let path = req.uri().path();
    let write = !matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS);
    let api = path.starts_with("/v1/") || (s.compat_asyncflow && under_api(path));
    if !write || !api {
        return next.run(req).await;
    }
    let h = req.headers();
    let allowed_origin = h
        .get(header::ORIGIN)
        .and_then(|o| o.to_str().ok())
        .is_some_and(|o| s.cors_origins.iter().any(|a| a == o));
    if !allowed_origin && cross_site(h) {
        return ApiError::new(
            Code::Forbidden,
            "cross-site request refused: a page of another site may not write to this API (allow its origin with --cors-origin)",
        )
        .into_response();
    }
    match h
        .get(header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap_or(""))
    {
        Some(ct) if !is_json(ct) => {
            return ApiError::new(
                Code::UnsupportedMediaType,
                format!("the body must be JSON: send Content-Type: application/json, not {ct:?}"),
            )
            .into_response()
        }
        Some(_) => {}
        None => {
            let has_body = h
                .get(header::CONTENT_LENGTH)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|v| v.trim() != "0")
                || h.contains_key(header::TRANSFER_ENCODING);
            if has_body {
                return ApiError::new(
                    Code::UnsupportedMediaType,
                    "the body must be JSON: send Content-Type: application/json",
                )
                .into_response();
            }
        }
    }
    next.run(req).await
}
