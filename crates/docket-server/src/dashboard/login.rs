//! The dashboard's login and logout (auth required): a token pasted once becomes the session
//! cookie ([`crate::auth::SESSION_COOKIE`]), checked against the database on every request.

use super::prelude::*;
use crate::auth::SESSION_COOKIE;
use axum::http::HeaderValue;
use docket_engine::auth::TokenCheck;

/// The login page (auth required): a token field; `error` says why the last try failed.
pub(crate) fn login_form(error: Option<&str>) -> Response {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { "Log in — docket" }
                style { (maud::PreEscaped(STYLE)) }
            }
            body {
                header { b { "docket" } }
                main {
                    h1 { "Log in" }
                    @if let Some(e) = error { p class="err" id="login-error" { (e) } }
                    p { "Paste an API token (" code { "docket token create NAME --scope read" } "). A "
                        code { "read" } " token shows everything; actions need " code { "admin" } "." }
                    form method="post" action="/ui/login" class="f" {
                        input type="password" name="token" id="token" autocomplete="off" placeholder="dkt_…" required;
                        button type="submit" id="login" { "Log in" }
                    }
                }
            }
        }
    }
    .into_response()
}

/// `GET /ui/login`.
pub(crate) async fn login_page() -> Response {
    login_form(None)
}

/// `POST /ui/login` (form `token=…`): checks the token and starts a session (a cookie holding
/// it: HttpOnly, SameSite=Strict, 12 hours; Secure when served over TLS).
pub(crate) async fn login(State(s): State<AppState>, body: axum::body::Bytes) -> Response {
    let token = serde_urlencoded::from_bytes::<Vec<(String, String)>>(&body)
        .ok()
        .and_then(|f| f.into_iter().find(|(k, _)| k == "token").map(|(_, v)| v))
        .map(|t| t.trim().to_string())
        .unwrap_or_default();
    let why = match s.engine.token_check(&token).await {
        Ok(TokenCheck::Valid(_)) => None,
        Ok(TokenCheck::Unknown) => Some("unknown token"),
        Ok(TokenCheck::Revoked) => Some("this token was revoked"),
        Ok(TokenCheck::Expired) => Some("this token expired"),
        Err(e) => return ApiError::from(e).into_response(),
    };
    if let Some(why) = why {
        let mut r = login_form(Some(why));
        *r.status_mut() = StatusCode::UNAUTHORIZED;
        return r;
    }
    // Tokens are hex with a prefix: nothing in them needs escaping in a cookie.
    if !token
        .bytes()
        .all(|b| b.is_ascii_alphanumeric() || b == b'_')
    {
        return login_form(Some("unknown token"));
    }
    let secure = if s.tls { "; Secure" } else { "" };
    let c = format!(
        "{SESSION_COOKIE}={token}; Path=/; HttpOnly; SameSite=Strict; Max-Age=43200{secure}"
    );
    let mut r = Redirect::to("/").into_response();
    if let Ok(v) = HeaderValue::from_str(&c) {
        r.headers_mut().insert(header::SET_COOKIE, v);
    }
    r
}

/// `GET /ui/logout`: ends the session (harmless if forged: it only logs out).
pub(crate) async fn logout() -> Response {
    let mut r = Redirect::to("/ui/login").into_response();
    r.headers_mut().insert(
        header::SET_COOKIE,
        HeaderValue::from_static("docket_session=; Path=/; HttpOnly; SameSite=Strict; Max-Age=0"),
    );
    r
}
