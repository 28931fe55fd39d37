//! The OpenAPI document of the API, generated with utoipa from the handlers' `#[utoipa::path]`
//! attributes and the request/response types (`docket_core::api` and the domain types), so
//! the document cannot drift from the code. Served at `/openapi.json`; a copy is checked in as
//! `crates/docket-server/openapi.json` for review, and a test fails when the two differ
//! (`UPDATE_OPENAPI=1 cargo test -p docket-server --lib openapi` rewrites it).

use crate::error::ErrorBody;
use crate::routes::{
    batches::*, changes::*, events::*, leases::*, namespaces::*, processes::*, queues::*,
    rate_limits::*, schedules::*, system::*, tasks::*, tokens::*, workers::*, workflow_runs::*,
    workflows::*,
};
use crate::schemas::ProcessorError;
use axum::response::IntoResponse;
use std::sync::OnceLock;
use utoipa::openapi::{RefOr, Response};
use utoipa::{Modify, OpenApi, ToSchema};

/// Every status code every operation can answer besides its own: 400 (a malformed request)
/// and 503 (the database is unreachable).
const COMMON_ERRORS: &[(&str, &str)] = &[
    (
        "400",
        "invalid_json, invalid_request, invalid_duration, invalid_text, …",
    ),
    ("503", "unavailable: the database did not answer"),
];

#[derive(OpenApi)]
#[openapi(
    info(
        title = "docket",
        description = "Durable tasks over HTTP. Times are RFC 3339 UTC; durations humantime strings (at most 36500 days). Errors: {\"error\": {\"code\", \"message\", \"details\"?}}; each code has exactly one status (see the Code schema and the docs, api/index.md)."
    ),
    paths(
        healthz,
        openapi,
        metrics_text,
        task_add,
        task_list,
        task_complete_batch,
        task_fail_batch,
        task_release_batch,
        task_get,
        task_cancel,
        task_retry,
        task_bulk,
        task_bulk_get,
        task_run_now,
        task_patch,
        worker_report,
        worker_list,
        task_heartbeat,
        task_complete,
        task_fail,
        queue_list,
        queue_get,
        queue_put,
        queue_pause,
        queue_resume,
        queue_claim,
        claim_release,
        node_list,
        node_drain,
        node_resume,
        namespace_list,
        namespace_get,
        namespace_put,
        process_init,
        process_list,
        process_get,
        process_put,
        process_call,
        process_repair,
        process_simple_repair,
        process_trace,
        events_stream,
        schedule_put,
        schedule_list,
        schedule_get,
        schedule_delete,
        schedule_pause,
        schedule_resume,
        batch_create,
        batch_list,
        batch_get,
        batch_add,
        batch_seal,
        rate_limit_put,
        rate_limit_list,
        rate_limit_get,
        rate_limit_delete,
        workflow_create,
        workflow_get,
        workflow_cancel,
        workflow_retry,
        workflow_add,
        run_start,
        run_list,
        run_get,
        run_steps,
        run_result,
        run_send,
        run_cancel,
        run_retry,
        run_record,
        run_suspend,
        run_finish,
        run_resume,
        audit_list,
        status,
        changes,
        token_create,
        token_list,
        token_revoke,
    ),
    components(schemas(
        docket_core::process::Notification,
        crate::error::Code,
        docket_core::process::ProcessorRequest,
        docket_core::process::ProcessorResult,
        ProcessorError,
    )),
    modifiers(&CommonErrors)
)]
struct ApiDoc;

/// Adds [`COMMON_ERRORS`] to every operation.
struct CommonErrors;

impl Modify for CommonErrors {
    fn modify(&self, doc: &mut utoipa::openapi::OpenApi) {
        let error = |d: &str| -> RefOr<Response> {
            utoipa::openapi::ResponseBuilder::new()
                .description(d)
                .content(
                    "application/json",
                    utoipa::openapi::ContentBuilder::new()
                        .schema(Some(RefOr::Ref(utoipa::openapi::Ref::from_schema_name(
                            ErrorBody::name(),
                        ))))
                        .build(),
                )
                .into()
        };
        for item in doc.paths.paths.values_mut() {
            for op in [
                &mut item.get,
                &mut item.put,
                &mut item.post,
                &mut item.delete,
                &mut item.patch,
            ]
            .into_iter()
            .flatten()
            {
                for (status, d) in COMMON_ERRORS {
                    op.responses
                        .responses
                        .entry((*status).to_string())
                        .or_insert_with(|| error(d));
                }
            }
        }
    }
}

#[utoipa::path(
    get, path = "/openapi.json",
    tag = "service",
    responses((status = 200, description = "OpenAPI document", body = Object)),
    summary = "This document (generated from the server code with utoipa)"
)]
pub(crate) async fn openapi() -> axum::response::Response {
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        document(),
    )
        .into_response()
}

/// The document as JSON (built once).
pub fn document() -> &'static str {
    static DOC: OnceLock<String> = OnceLock::new();
    DOC.get_or_init(|| {
        let mut v = serde_json::to_value(ApiDoc::openapi()).expect("the document serialises");
        v["info"]["version"] = env!("CARGO_PKG_VERSION").into();
        open_all_of(&mut v);
        secure(&mut v);
        optional_bodies(&mut v);
        serde_json::to_string_pretty(&v).expect("the document serialises") + "\n"
    })
}

/// Declares the bearer-token scheme and, on every operation, the scope it needs
/// ([`docket_core::auth::needed_scope`], the rule the server applies; also as
/// `x-docket-scope`) and the answers auth and the request guards add: 401, 403 and 429 where a
/// token is needed, 415 on every write.
fn secure(v: &mut serde_json::Value) {
    use serde_json::json;
    let err = |d: &str| json!({"description": d, "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}}});
    let r = |name: &str| json!({"$ref": format!("#/components/responses/{name}")});
    v["components"]["responses"] = json!({
        "Unauthenticated": err("unauthenticated: no token, or an unknown, revoked or expired one"),
        "Forbidden": err("forbidden: the token lacks the scope (or queue) this needs, or a cross-site browser request"),
        "RateLimited": err("rate_limited: over the token's request rate or long-poll cap; see Retry-After"),
        "UnsupportedMediaType": err("unsupported_media_type: a body not declared application/json"),
    });
    v["components"]["securitySchemes"] = json!({"bearer": {
        "type": "http",
        "scheme": "bearer",
        "description": "An API token (`docket token create`). Needed when the server runs with `--auth required`, the default on any address but loopback; see the docs, operations/security.md."
    }});
    let Some(paths) = v["paths"].as_object_mut() else {
        return;
    };
    for (path, item) in paths.iter_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for (method, op) in item.iter_mut() {
            let m = method.to_ascii_uppercase();
            if !matches!(m.as_str(), "GET" | "PUT" | "POST" | "DELETE" | "PATCH") {
                continue;
            }
            let scope = docket_core::auth::needed_scope(&m, path);
            match scope {
                Some(sc) => {
                    op["security"] = json!([{"bearer": []}]);
                    op["x-docket-scope"] = sc.as_str().into();
                    let d = op["description"].as_str().unwrap_or("").to_string();
                    let sep = if d.is_empty() { "" } else { "\n\n" };
                    op["description"] = format!("{d}{sep}Scope: `{sc}`.").into();
                    let responses = &mut op["responses"];
                    responses["401"] = r("Unauthenticated");
                    responses["403"] = r("Forbidden");
                    responses["429"] = r("RateLimited");
                }
                None => {
                    op["security"] = json!([]);
                }
            }
            if m != "GET" && path.starts_with("/v1/") {
                op["responses"]["415"] = r("UnsupportedMediaType");
            }
        }
    }
}

/// Marks a request body not required where the server reads its absence as `{}`
/// ([`crate::extract::parse`]: an empty body is an empty object) and the schema takes `{}`: an
/// object type none of whose properties is required. Elsewhere a missing body is refused, as
/// `required: true` says.
fn optional_bodies(v: &mut serde_json::Value) {
    let schemas = v["components"]["schemas"].clone();
    let takes_empty = |s: &serde_json::Value| -> bool {
        let s = match s["$ref"].as_str() {
            Some(r) => &schemas[r.trim_start_matches("#/components/schemas/")],
            None => s,
        };
        s["type"] == "object"
            && s["required"].as_array().is_none_or(Vec::is_empty)
            && ["oneOf", "anyOf", "allOf"]
                .iter()
                .all(|k| s.get(k).is_none())
    };
    let Some(paths) = v["paths"].as_object_mut() else {
        return;
    };
    for item in paths.values_mut() {
        let Some(item) = item.as_object_mut() else {
            continue;
        };
        for op in item.values_mut() {
            let Some(body) = op.get_mut("requestBody") else {
                continue;
            };
            if body["required"] == true
                && takes_empty(&body["content"]["application/json"]["schema"])
            {
                body["required"] = false.into();
            }
        }
    }
}

/// A `#[serde(flatten)]` of a `deny_unknown_fields` type becomes an `allOf` whose member says
/// `additionalProperties: false`, which no object with the other members' properties can
/// match (JSON Schema checks each member alone). The members of an `allOf` are opened; the
/// flattened type must be inlined (`#[schema(inline)]`) for this to reach it.
fn open_all_of(v: &mut serde_json::Value) {
    // An inlined member may come wrapped in a one-element `oneOf` (to carry a description).
    fn open(member: &mut serde_json::Value) {
        if let Some(o) = member.as_object_mut() {
            o.remove("additionalProperties");
            if let Some(serde_json::Value::Array(one)) = o.get_mut("oneOf") {
                if one.len() == 1 {
                    open(&mut one[0]);
                }
            }
        }
    }
    match v {
        serde_json::Value::Object(m) => {
            if let Some(serde_json::Value::Array(members)) = m.get_mut("allOf") {
                members.iter_mut().for_each(open);
            }
            m.values_mut().for_each(open_all_of);
        }
        serde_json::Value::Array(a) => a.iter_mut().for_each(open_all_of),
        _ => {}
    }
}

#[cfg(test)]
mod tests {
    /// The checked-in `openapi.json` is the generated document.
    #[test]
    fn openapi_json_is_generated() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");
        let doc = super::document();
        if std::env::var_os("UPDATE_OPENAPI").is_some() {
            std::fs::write(path, doc).unwrap();
        }
        let v: serde_json::Value = serde_json::from_str(doc).unwrap();
        // The processor contract (docs: concepts/processes.md) is in the document.
        for name in [
            "ProcessorRequest",
            "ProcessorResult",
            "ProcessorError",
            "Code",
        ] {
            assert!(v["components"]["schemas"][name].is_object(), "{name}");
        }
        let on_disk = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            on_disk == doc,
            "{path} is not the generated document: run UPDATE_OPENAPI=1 cargo test -p docket-server --lib openapi"
        );
    }
}
