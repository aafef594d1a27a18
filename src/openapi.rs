//! The OpenAPI document, generated from the handlers (utoipa), and Swagger UI
//! at `/docs`, served from the copy embedded in the binary: the page loads
//! nothing from any other host.

use std::sync::{Arc, LazyLock};

use axum::extract::Path;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use utoipa::openapi::security::{HttpAuthScheme, HttpBuilder, SecurityScheme};
use utoipa::{Modify, OpenApi};
use utoipa_swagger_ui::Config;

use crate::domain::Kind;
use crate::routes::kind_doc::acquire_schema_name;
use crate::routes::{self, AppError};
use crate::wire::{Problem, ProblemType};

#[derive(OpenApi)]
#[openapi(
    info(
        title = "baton",
        description = "Distributed locks and fair counting semaphores over HTTP, with all state in Redis.\n\n\
            Acquire with `POST`, keep the lease alive with `PATCH`, release with `DELETE`. \
            Every error is `application/problem+json` (RFC 9457). Durations are integers in milliseconds.\n\n\
            Live view: the [dashboard](../) shows every held lock and semaphore, its holders and waiting line, \
            updated from `GET /events`.",
        license(name = "MIT OR Apache-2.0", identifier = "MIT OR Apache-2.0")
    ),
    tags(
        (name = "locks", description = "At most one holder per name, with fencing tokens"),
        (name = "semaphores", description = "At most `limit` holders per name, served in line order (priority, then first come, first served)"),
        (name = "watching", description = "Live changes as server-sent events; the dashboard at `/` follows them"),
        (name = "holders", description = "A holder's own stream of its lease, and asking holders to yield"),
        (name = "history", description = "Who held a name, from when to when, and how each lease ended"),
        (name = "service", description = "Health, readiness and metrics"),
    ),
    components(schemas(Problem)),
    modifiers(&ProblemsAndBearer)
)]
pub struct ApiDoc;

/// Every problem type as a response component, and the bearer scheme.
struct ProblemsAndBearer;

impl Modify for ProblemsAndBearer {
    fn modify(&self, openapi: &mut utoipa::openapi::OpenApi) {
        let components = openapi.components.get_or_insert_with(Default::default);
        for &kind in ProblemType::ALL {
            components
                .responses
                .insert(kind.component_name(), kind.openapi_response());
        }
        components.add_security_scheme(
            "bearer",
            SecurityScheme::Http(
                HttpBuilder::new()
                    .scheme(HttpAuthScheme::Bearer)
                    .description(Some(
                        "One of BATON_API_TOKENS (or BATON_ADMIN_TOKENS). Not needed when the service has no tokens.",
                    ))
                    .build(),
            ),
        );
    }
}

/// The OpenAPI document of the whole API, as the service serves it.
pub fn document() -> utoipa::openapi::OpenApi {
    let mut doc = ApiDoc::openapi();
    doc.merge(routes::api::api().into_openapi());
    doc
}

/// The document as committed in `openapi/openapi.json`: as served with the
/// default `BATON_MAX_WAIT_MS` and `BATON_MAX_KEEP_PLACE_MS`, and turn
/// notices on for `ci.example.com` (so that `notify` is documented; a
/// service serves it only with its own `BATON_WEBHOOK_HOSTS`).
pub fn document_json() -> String {
    document_json_with_max_wait(
        crate::config::DEFAULT_MAX_WAIT_MS,
        crate::config::DEFAULT_MAX_KEEP_PLACE_MS,
        &["ci.example.com".to_owned()],
    )
}

/// The document as a service serves it: `wait_ms` bounded by its configured
/// `BATON_MAX_WAIT_MS` (unless the request keeps its place: then a longer
/// wait is cut to it), `keep_place_ms` by its `BATON_MAX_KEEP_PLACE_MS`.
///
/// # Panics
/// Never: the document always serializes.
pub fn document_json_with_max_wait(
    max_wait_ms: u64,
    max_keep_place_ms: u64,
    webhook_hosts: &[String],
) -> String {
    let doc = document();
    let mut doc = serde_json::to_value(doc).expect("the OpenAPI document serializes");
    bound_wait(&mut doc, max_wait_ms, max_keep_place_ms);
    bound_notify(&mut doc, webhook_hosts);
    polish(&mut doc);
    let mut json = serde_json::to_string_pretty(&doc).expect("the OpenAPI document serializes");
    json.push('\n');
    json
}

/// Bounds `wait_ms` in the acquire body of every kind by `max_wait_ms`, but
/// only when the body has no `keep_place_ms` (with one, a longer wait is cut
/// to the maximum, and the place kept: JSON Schema's `if`/`else`), and
/// every `keep_place_ms` (an acquire's, a ticket's wait) by
/// `max_keep_place_ms`.
fn bound_wait(doc: &mut Value, max_wait_ms: u64, max_keep_place_ms: u64) {
    if let Some(schemas) = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
    {
        for body in schemas.values_mut() {
            if let Some(keep) = body
                .as_object_mut()
                .and_then(|b| property(b, "keep_place_ms"))
            {
                keep.insert("maximum".into(), json!(max_keep_place_ms));
            }
        }
    }
    for kind in Kind::ALL {
        let Some(body) = acquire_body(doc, kind) else {
            continue;
        };
        if let Some(wait) = property(body, "wait_ms") {
            wait.remove("maximum");
        }
        // (Each part says it allows the body's other members: it only adds a
        // condition, and a linter must not read it as a closed schema.)
        body.insert(
            "if".into(),
            json!({
                "properties": {"keep_place_ms": {"type": "integer"}},
                "required": ["keep_place_ms"],
                "additionalProperties": true
            }),
        );
        body.insert(
            "else".into(),
            json!({
                "properties": {"wait_ms": {"maximum": max_wait_ms}},
                "additionalProperties": true
            }),
        );
    }
}

/// The acquire body's schema of `kind` in `doc`.
fn acquire_body(doc: &mut Value, kind: Kind) -> Option<&mut serde_json::Map<String, Value>> {
    doc.pointer_mut(&format!(
        "/components/schemas/{}",
        acquire_schema_name(kind)
    ))
    .and_then(Value::as_object_mut)
}

/// The schema of `body`'s property `name`.
fn property<'a>(
    body: &'a mut serde_json::Map<String, Value>,
    name: &str,
) -> Option<&'a mut serde_json::Map<String, Value>> {
    body.get_mut("properties")
        .and_then(|properties| properties.get_mut(name))
        .and_then(Value::as_object_mut)
}

/// `notify` as this service takes it: absent when its turn notices are off
/// (no `BATON_WEBHOOK_HOSTS`: any `notify` is refused), else an http(s) URL
/// on one of its hosts, and only with `keep_place_ms`.
fn bound_notify(doc: &mut Value, webhook_hosts: &[String]) {
    for kind in Kind::ALL {
        let Some(body) = acquire_body(doc, kind) else {
            continue;
        };
        let Some(properties) = body.get_mut("properties").and_then(Value::as_object_mut) else {
            continue;
        };
        if webhook_hosts.is_empty() {
            properties.remove("notify");
            continue;
        }
        if let Some(notify) = properties.get_mut("notify").and_then(Value::as_object_mut) {
            let hosts: Vec<String> = webhook_hosts.iter().map(|h| regex_escape(h)).collect();
            notify.insert(
                "pattern".into(),
                json!(format!("^https?://({})(:[0-9]+)?(/.*)?$", hosts.join("|"))),
            );
            body.insert(
                "dependentRequired".into(),
                json!({"notify": ["keep_place_ms"]}),
            );
        }
    }
}

/// `text` with the characters a regular expression gives a meaning escaped.
fn regex_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if "\\.+*?()|[]{}^$".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// What the generated document lacks for readers and linters: a server (the
/// service's root, or the proxy's prefix when served behind one), the open
/// service endpoints marked as needing no token, every problem `type` listed,
/// only the response components that operations use, and the operations of
/// each group in the order a client uses them: acquire first.
fn polish(doc: &mut Value) {
    doc["servers"] =
        json!([{"url": "/", "description": "This service (behind a proxy: its path prefix)"}]);
    let Some(paths) = doc.get_mut("paths").and_then(Value::as_object_mut) else {
        return;
    };
    for operation in paths
        .values_mut()
        .filter_map(Value::as_object_mut)
        .flat_map(|item| item.values_mut())
    {
        if operation.get("security").is_none() && operation.is_object() {
            operation["security"] = json!([{}]);
        }
    }
    // Paths: /x/{name} (acquire, status) before /x/{name}/{id} before /x;
    // methods: post, patch, get, delete.
    let path_rank = |path: &str| {
        if path.contains("{id}") {
            1
        } else if path.contains("{name}") {
            0
        } else {
            2
        }
    };
    let method_rank = |method: &str| {
        ["post", "patch", "get", "delete"]
            .iter()
            .position(|m| *m == method)
            .unwrap_or(4)
    };
    let mut sorted: Vec<(String, Value)> = std::mem::take(paths).into_iter().collect();
    sorted.sort_by_key(|(path, _)| (path_rank(path), path.clone()));
    for (path, mut item) in sorted {
        if let Some(methods) = item.as_object_mut() {
            let mut entries: Vec<(String, Value)> = std::mem::take(methods).into_iter().collect();
            entries.sort_by_key(|(method, _)| method_rank(method));
            methods.extend(entries);
        }
        paths.insert(path, item);
    }

    let used = serde_json::to_string(&doc["paths"]).unwrap_or_default();
    if let Some(responses) = doc
        .pointer_mut("/components/responses")
        .and_then(Value::as_object_mut)
    {
        responses.retain(|name, _| used.contains(&format!("\"#/components/responses/{name}\"")));
    }
    if let Some(kind) = doc.pointer_mut("/components/schemas/Problem/properties/type") {
        let listed: Vec<String> = ProblemType::ALL
            .iter()
            .map(|t| format!("- `{}`: {}", t.uri(), t.facts().title))
            .collect();
        kind["enum"] = ProblemType::ALL.iter().map(|t| t.uri()).collect();
        kind["description"] = format!(
            "The problem type: a URI where `GET` describes it. One of:\n{}",
            listed.join("\n")
        )
        .into();
    }
}

/// `GET /openapi.json`: the document, with its server set to the path prefix
/// a reverse proxy sends in `X-Forwarded-Prefix`, so that "Try it out" calls
/// go through the proxy.
pub fn serve_document(document: &bytes::Bytes, headers: &HeaderMap) -> Response {
    let body = match forwarded_prefix(headers) {
        None => document.clone(),
        Some(prefix) => {
            let mut doc: Value =
                serde_json::from_slice(document).expect("the OpenAPI document parses");
            doc["servers"][0]["url"] = prefix.into();
            serde_json::to_vec_pretty(&doc)
                .expect("the OpenAPI document serializes")
                .into()
        }
    };
    ([(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// The path prefix under which a reverse proxy serves baton, from
/// `X-Forwarded-Prefix` (`/baton`, no trailing slash); `None` when absent or
/// not a plain path.
fn forwarded_prefix(headers: &HeaderMap) -> Option<String> {
    let prefix = headers.get("x-forwarded-prefix")?.to_str().ok()?.trim();
    let prefix = prefix.trim_end_matches('/');
    let plain = prefix.starts_with('/')
        && prefix.len() <= 200
        && !prefix.contains("//")
        && prefix
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/-._~".contains(&b));
    plain.then(|| prefix.to_owned())
}

static SWAGGER_CONFIG: LazyLock<Arc<Config<'static>>> = LazyLock::new(|| {
    Arc::new(
        // Relative to the page's base (/docs/, or a proxy's prefix + /docs/).
        Config::new(["../openapi.json"])
            .validator_url("none")
            .try_it_out_enabled(true)
            // A bearer token is never kept in the browser's localStorage:
            // it is gone with the page.
            .persist_authorization(false)
            .display_request_duration(true),
    )
});

/// `GET /docs`: Swagger UI's page, with its assets under `/docs/`.
pub async fn swagger_index(headers: HeaderMap) -> Response {
    swagger_file("index.html", &headers)
}

/// `GET /docs/{*file}`: Swagger UI's assets.
pub async fn swagger_asset(Path(file): Path<String>, headers: HeaderMap) -> Response {
    swagger_file(&file, &headers)
}

fn swagger_file(path: &str, headers: &HeaderMap) -> Response {
    match utoipa_swagger_ui::serve(path, SWAGGER_CONFIG.clone()) {
        Ok(Some(file)) => {
            let mut bytes = file.bytes.into_owned();
            if path == "index.html" && !file.gzpipped {
                // Served at /docs as well as /docs/, and perhaps behind a
                // proxy's path prefix: resolve the relative links (assets,
                // ../openapi.json) against the prefix's /docs/ either way.
                let prefix = forwarded_prefix(headers).unwrap_or_default();
                let html = String::from_utf8_lossy(&bytes)
                    .replacen(
                        "<head>",
                        &format!("<head>\n    <base href=\"{prefix}/docs/\" />"),
                        1,
                    )
                    .replacen("<title>Swagger UI</title>", "<title>baton</title>", 1);
                bytes = html.into_bytes();
            }
            let mut response = ([(header::CONTENT_TYPE, file.content_type)], bytes).into_response();
            if file.gzpipped {
                response.headers_mut().insert(
                    header::CONTENT_ENCODING,
                    header::HeaderValue::from_static("gzip"),
                );
            }
            response
        }
        Ok(None) => AppError::from(ProblemType::NotFound).into_response(),
        Err(err) => {
            tracing::error!(%err, "cannot serve Swagger UI");
            StatusCode::INTERNAL_SERVER_ERROR.into_response()
        }
    }
}
