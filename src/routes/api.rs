//! Every documented route in one router: `/locks` and `/semaphores` behind
//! the bearer-token check, with what all guarded operations share added to
//! their OpenAPI operations in one place; the service endpoints open.

use utoipa::openapi::path::Operation;
use utoipa::openapi::security::SecurityRequirement;
use utoipa::openapi::OpenApi;
use utoipa_axum::router::OpenApiRouter;

use super::{claims, events, freezes, health, history, holder, kind, AppState, RequireToken};
use crate::domain::Kind;
use crate::wire::ProblemType;

/// Every documented route, without state or layers: `/locks` and
/// `/semaphores` behind the bearer-token check, the service endpoints open.
pub fn api() -> OpenApiRouter<AppState> {
    // The routes of each kind, one router per resource, each made from the
    // kind and tagged by resource: the kind's own (its plural), its
    // holders' and its history.
    let mut guarded = Kind::ALL
        .into_iter()
        .fold(OpenApiRouter::new(), |router, kind| {
            router
                .merge(tagged(kind::router(kind), kind.plural()))
                .merge(tagged(holder::router(kind), "holders"))
                .merge(tagged(history::router(kind), "history"))
        })
        .merge(tagged(claims::router(), "claims"))
        .merge(tagged(events::router(), "watching"))
        .merge(tagged(freezes::router(), "freezes"))
        .layer(RequireToken);
    document_guard(guarded.get_openapi_mut());
    OpenApiRouter::new()
        .merge(guarded)
        .merge(tagged(health::router(), "service"))
}

/// Puts every operation of `router` under `tag`.
fn tagged(mut router: OpenApiRouter<AppState>, tag: &str) -> OpenApiRouter<AppState> {
    for_each_operation(router.get_openapi_mut(), |op| {
        op.tags = Some(vec![tag.to_owned()]);
    });
    router
}

/// What every guarded operation may answer besides its own responses: a bad
/// path, query or body (400), no valid token (401), a name outside the
/// token's scopes (403, for the operations on one name), Redis out of reach
/// (503), and, with a body, one over the limit (413); an operation's own
/// answer for a status wins. Its security: a bearer token, or none on a
/// service without tokens.
fn document_guard(doc: &mut OpenApi) {
    use crate::wire::ProblemType::{
        Forbidden, InvalidRequest, PayloadTooLarge, RedisUnavailable, Unauthorized,
    };
    for (path, item) in &mut doc.paths.paths {
        // A claim's operations act on names too (`write` on each).
        let on_a_name = path.contains("{name}") || path.starts_with("/claims");
        for_each_operation_of(item, |op| {
            let mut shared = vec![InvalidRequest, Unauthorized, RedisUnavailable];
            if on_a_name {
                shared.push(Forbidden);
            }
            if op.request_body.is_some() {
                shared.push(PayloadTooLarge);
            }
            add_responses(op, &shared);
        });
    }
}

/// Adds `shared` problem responses to `op`, and its security.
fn add_responses(op: &mut Operation, shared: &[ProblemType]) {
    for kind in shared {
        let reference = kind.response_ref();
        // An operation's own answer for a status wins (e.g. /events' 503).
        op.responses
            .responses
            .entry(kind.facts().status.to_string())
            .or_insert_with(|| reference.into());
    }
    op.security = Some(vec![
        SecurityRequirement::default(),
        SecurityRequirement::new("bearer", Vec::<String>::new()),
    ]);
}

fn for_each_operation(doc: &mut OpenApi, mut f: impl FnMut(&mut Operation)) {
    for item in doc.paths.paths.values_mut() {
        for_each_operation_of(item, &mut f);
    }
}

fn for_each_operation_of(item: &mut utoipa::openapi::PathItem, mut f: impl FnMut(&mut Operation)) {
    let operations = [
        &mut item.get,
        &mut item.put,
        &mut item.post,
        &mut item.delete,
        &mut item.options,
        &mut item.head,
        &mut item.patch,
        &mut item.trace,
    ];
    for op in operations.into_iter().flatten() {
        f(op);
    }
}
