//! Scoped tokens (`BATON_TOKENS_FILE`): a team's token touches only its own
//! names; a read token reads; listings and `/events` show only readable
//! names; the variables' tokens keep their meaning beside the file.

use std::path::PathBuf;
use std::time::Duration;

use reqwest::Method;
use serde_json::Value;

use baton_testkit::events::{open_events, SseStream};
use baton_testkit::{problem, settings_for, shared_redis, unique_prefix, RedisServer, TestApp};

const TEAM_A: &str = "team-a-token-5d1e";
const READER: &str = "reader-token-c07b";
const TEAM_A_ADMIN: &str = "team-a-admin-9a3f";
const API: &str = "plain-api-token";
const ADMIN: &str = "plain-admin-token";
/// Reads three names that share a prefix with others it may not read.
const PICKY: &str = "picky-reader-e4a2";

/// A token file in the temp dir, removed when dropped.
struct TokenFile(PathBuf);

impl TokenFile {
    fn new(text: &str) -> Self {
        let path = std::env::temp_dir().join(format!("baton-scopes-{}.toml", unique_prefix()));
        std::fs::write(&path, text).unwrap();
        Self(path)
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

/// A service with the file's three tokens (`team-a-ci` writes, and so
/// reads, `team-a-*` only; `auditor` reads every name; `team-a-ops`
/// administers `team-a-*`; `picky` reads `team-a-1`, `team-a-3` and
/// `team-a-5*`) and one token of each variable.
async fn scoped_app() -> (TestApp, TokenFile) {
    scoped_app_on(&shared_redis().url()).await
}

/// The same on the Redis at `redis_url`.
async fn scoped_app_on(redis_url: &str) -> (TestApp, TokenFile) {
    let file = TokenFile::new(&format!(
        r#"
        [[token]]
        name = "team-a-ci"
        value = "{TEAM_A}"
        allow = ["write:team-a-*"]

        [[token]]
        name = "auditor"
        sha256 = "{}"
        allow = ["read:*"]

        [[token]]
        name = "team-a-ops"
        value = "{TEAM_A_ADMIN}"
        allow = ["admin:team-a-*"]

        [[token]]
        name = "picky"
        value = "{PICKY}"
        allow = ["read:team-a-1", "read:team-a-3", "read:team-a-5*"]
        "#,
        sha256_hex(READER)
    ));
    let mut settings = settings_for(redis_url, &unique_prefix());
    settings.tokens_file = Some(file.0.clone());
    settings.api_tokens = vec![API.into()];
    settings.admin_tokens = vec![ADMIN.into()];
    (TestApp::spawn_with(settings).await, file)
}

fn sha256_hex(token: &str) -> String {
    use sha2::Digest;
    sha2::Sha256::digest(token.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

async fn send(
    app: &TestApp,
    method: Method,
    path: &str,
    token: &str,
    body: &str,
) -> reqwest::Response {
    app.client
        .request(method, format!("{}{path}", app.base))
        .bearer_auth(token)
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

/// Acquires `path` with `token`; the lease body, after checking the 201.
async fn acquired(app: &TestApp, path: &str, token: &str, body: &str) -> Value {
    let response = send(app, Method::POST, path, token, body).await;
    assert_eq!(response.status(), 201, "POST {path}");
    response.json().await.unwrap()
}

/// Checks a 403 naming `scope` and `name`.
async fn forbidden(response: reqwest::Response, scope: &str, name: &str) {
    let body = problem(response, 403, "forbidden").await;
    assert_eq!(body["scope"], scope, "{body}");
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains(&format!("it needs {scope} on that name")) && detail.contains(name),
        "{detail}"
    );
}

#[tokio::test]
async fn a_team_token_acquires_its_own_names_and_gets_403_on_another_team_s() {
    let (app, _file) = scoped_app().await;
    for (kind, body) in [("locks", "{}"), ("semaphores", r#"{"limit": 2}"#)] {
        let mine = acquired(&app, &format!("/{kind}/team-a-x"), TEAM_A, body).await;
        assert_eq!(mine["name"], "team-a-x");

        let theirs = send(
            &app,
            Method::POST,
            &format!("/{kind}/team-b-x"),
            TEAM_A,
            body,
        )
        .await;
        forbidden(theirs, "write", "\"team-b-x\"").await;
        // Refused before Redis was asked: nothing is held there.
        let status: Value = send(&app, Method::GET, &format!("/{kind}/team-b-x"), ADMIN, "")
            .await
            .json()
            .await
            .unwrap();
        assert_eq!(status["waiting"], 0, "{status}");
        assert!(
            status["holders"] == 0 || status["held"] == false,
            "{kind}: {status}"
        );

        // Its own lease: refreshed, checked and released with the same token.
        let path = format!("/{kind}/team-a-x/{}", mine["id"].as_str().unwrap());
        assert_eq!(
            send(&app, Method::PATCH, &path, TEAM_A, "").await.status(),
            200
        );
        assert_eq!(
            send(&app, Method::GET, &path, TEAM_A, "").await.status(),
            200
        );
        assert_eq!(
            send(&app, Method::DELETE, &path, TEAM_A, "").await.status(),
            204
        );
    }
}

#[tokio::test]
async fn a_lease_of_another_team_cannot_be_touched_even_with_its_id() {
    let (app, _file) = scoped_app().await;
    let lease = acquired(&app, "/locks/team-b-deploy", API, "{}").await;
    let path = format!("/locks/team-b-deploy/{}", lease["id"].as_str().unwrap());
    for method in [Method::PATCH, Method::GET, Method::DELETE] {
        let response = send(&app, method.clone(), &path, TEAM_A, "").await;
        forbidden(response, "write", "team-b-deploy").await;
    }
    // Still held by its holder.
    assert_eq!(send(&app, Method::GET, &path, API, "").await.status(), 200);
}

#[tokio::test]
async fn a_read_token_reads_status_but_cannot_acquire_release_or_force_release() {
    let (app, _file) = scoped_app().await;
    let lease = acquired(&app, "/locks/team-a-read", TEAM_A, r#"{"owner": "job 7"}"#).await;

    let status = send(&app, Method::GET, "/locks/team-a-read", READER, "").await;
    assert_eq!(status.status(), 200);
    let status: Value = status.json().await.unwrap();
    assert_eq!(status["held"], true);
    assert_eq!(status["owner"], "job 7");
    let sem = send(&app, Method::GET, "/semaphores/anything", READER, "").await;
    assert_eq!(sem.status(), 200);
    // History (GET /locks/{name}/history) is read the same way once it exists.

    let acquire = send(&app, Method::POST, "/locks/team-a-other", READER, "{}").await;
    forbidden(acquire, "write", "team-a-other").await;
    let acquire = send(
        &app,
        Method::POST,
        "/semaphores/s",
        READER,
        r#"{"limit": 1}"#,
    )
    .await;
    forbidden(acquire, "write", "\"s\"").await;
    let path = format!("/locks/team-a-read/{}", lease["id"].as_str().unwrap());
    forbidden(
        send(&app, Method::DELETE, &path, READER, "").await,
        "write",
        "team-a-read",
    )
    .await;
    let force = send(&app, Method::DELETE, "/locks/team-a-read", READER, "").await;
    forbidden(force, "admin", "team-a-read").await;
    // The team's write token reads its own names but not another team's.
    let own = send(&app, Method::GET, "/locks/team-a-read", TEAM_A, "").await;
    assert_eq!(own.status(), 200);
    let other = send(&app, Method::GET, "/locks/team-b-x", TEAM_A, "").await;
    forbidden(other, "read", "team-b-x").await;
}

#[tokio::test]
async fn force_release_needs_admin_on_that_name() {
    let (app, _file) = scoped_app().await;
    acquired(&app, "/locks/team-a-stuck", TEAM_A, "{}").await;
    acquired(&app, "/semaphores/team-b-stuck", API, r#"{"limit": 1}"#).await;

    let mine = send(
        &app,
        Method::DELETE,
        "/locks/team-a-stuck",
        TEAM_A_ADMIN,
        "",
    )
    .await;
    assert_eq!(mine.status(), 204);
    let theirs = send(
        &app,
        Method::DELETE,
        "/semaphores/team-b-stuck",
        TEAM_A_ADMIN,
        "",
    )
    .await;
    forbidden(theirs, "admin", "team-b-stuck").await;
    let writer = send(&app, Method::DELETE, "/semaphores/team-b-stuck", TEAM_A, "").await;
    forbidden(writer, "admin", "team-b-stuck").await;
    // An admin token of the variable administers every name.
    let admin = send(&app, Method::DELETE, "/semaphores/team-b-stuck", ADMIN, "").await;
    assert_eq!(admin.status(), 204);
}

/// The names of a listing page, and its cursor.
async fn page(app: &TestApp, query: &str, token: &str) -> (Vec<String>, Option<String>) {
    let response = send(app, Method::GET, &format!("/locks?{query}"), token, "").await;
    assert_eq!(response.status(), 200, "{query}");
    let body: Value = response.json().await.unwrap();
    let names = body["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|status| status["name"].as_str().unwrap().to_owned())
        .collect();
    (names, body["next_cursor"].as_str().map(str::to_owned))
}

#[tokio::test]
async fn a_listing_shows_only_the_names_the_token_may_read_and_pages_through_them() {
    // A Redis of its own: on the one the other tests share, keys come and go
    // by the thousand, and SCAN may return a key twice while Redis shrinks
    // its table (the listing's one allowance, listing.rs).
    let redis = RedisServer::start();
    let (app, _file) = scoped_app_on(&redis.url()).await;
    let mine = ["team-a-1", "team-a-2", "team-a-3", "team-a-4", "team-a-5"];
    for name in mine {
        acquired(&app, &format!("/locks/{name}"), TEAM_A, "{}").await;
    }
    for name in ["team-b-1", "team-b-2", "other", "team-a"] {
        acquired(&app, &format!("/locks/{name}"), API, "{}").await;
    }

    let (all, _) = page(&app, "", TEAM_A).await;
    assert_eq!(all, mine, "the team token sees only its names");
    let (everything, _) = page(&app, "", READER).await;
    assert_eq!(everything.len(), 9, "{everything:?}");

    // Pages of one: every readable name once, in order, nothing else; also
    // for a token whose names share their prefix with names it may not read.
    for (token, readable) in [
        (TEAM_A, &mine[..]),
        (PICKY, &["team-a-1", "team-a-3", "team-a-5"][..]),
    ] {
        let (mut seen, mut cursor) = (Vec::new(), None::<String>);
        for _ in 0..20 {
            let query = match &cursor {
                None => "limit=1".to_owned(),
                Some(cursor) => format!("limit=1&cursor={cursor}"),
            };
            let (names, next) = page(&app, &query, token).await;
            assert!(names.len() <= 1, "{names:?}");
            seen.extend(names);
            cursor = next;
            if cursor.is_none() {
                break;
            }
        }
        assert_eq!(cursor, None, "the listing ended");
        assert_eq!(seen, readable);
        assert_eq!(page(&app, "", token).await.0, readable);
    }

    // A prefix it may read nothing under: an empty page, and no cursor.
    assert_eq!(page(&app, "prefix=team-b", TEAM_A).await, (vec![], None));
    let (narrowed, _) = page(&app, "prefix=team-a-3", TEAM_A).await;
    assert_eq!(narrowed, ["team-a-3"]);
}

#[tokio::test]
async fn events_carry_only_the_names_the_token_may_read() {
    let (app, _file) = scoped_app().await;
    let mut team = SseStream::new(open_events(&app, "", Some(TEAM_A)).await);
    let mut reader = SseStream::new(open_events(&app, "", Some(READER)).await);
    let mut picky = SseStream::new(open_events(&app, "team-a-", Some(PICKY)).await);

    acquired(&app, "/locks/team-b-secret", API, "{}").await;
    acquired(&app, "/locks/team-a-2", TEAM_A, "{}").await;
    acquired(&app, "/locks/team-a-3", TEAM_A, "{}").await;

    let first = picky.next_within(Duration::from_secs(5)).await.unwrap();
    assert_eq!(first.data["name"], "team-a-3", "{first:?}");
    let first = reader.next_within(Duration::from_secs(5)).await.unwrap();
    assert_eq!(first.data["name"], "team-b-secret", "{first:?}");
    let first = team.next_within(Duration::from_secs(5)).await.unwrap();
    assert_eq!(
        (first.name.as_str(), &first.data["name"]),
        ("acquired", &Value::from("team-a-2")),
        "the other team's change never reaches the team's stream"
    );
}

#[tokio::test]
async fn the_variables_tokens_keep_working_beside_the_file() {
    let (app, _file) = scoped_app().await;
    for token in [API, ADMIN] {
        acquired(&app, &format!("/locks/anything-{token}"), token, "{}").await;
    }
    let refused = send(&app, Method::DELETE, "/locks/anything-x", API, "").await;
    forbidden(refused, "admin", "anything-x").await;
    for token in [None, Some("nope"), Some(&TEAM_A[1..])] {
        let mut request = app.client.post(format!("{}/locks/team-a-x", app.base));
        if let Some(token) = token {
            request = request.bearer_auth(token);
        }
        problem(request.send().await.unwrap(), 401, "unauthorized").await;
    }
}

#[tokio::test]
async fn a_token_file_alone_turns_authentication_on() {
    let file = TokenFile::new(&format!(
        "[[token]]\nname = \"only\"\nvalue = \"{TEAM_A}\"\nallow = [\"read:*\"]\n"
    ));
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.tokens_file = Some(file.0.clone());
    let app = TestApp::spawn_with(settings).await;
    problem(app.get("/locks").await, 401, "unauthorized").await;
    assert_eq!(
        send(&app, Method::GET, "/locks", TEAM_A, "").await.status(),
        200
    );
    assert_eq!(app.get("/healthz").await.status(), 200);
}

#[tokio::test]
async fn a_claim_needs_write_on_every_one_of_its_names() {
    let (app, _file) = scoped_app().await;
    let mixed = r#"{"locks": [{"name": "team-a-x"}, {"name": "team-b-x"}]}"#;
    let refused = send(&app, Method::POST, "/claims", TEAM_A, mixed).await;
    forbidden(refused, "write", "\"team-b-x\"").await;
    let status: Value = send(&app, Method::GET, "/locks/team-a-x", ADMIN, "")
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(status["held"], false, "nothing taken: {status}");

    let mine =
        r#"{"locks": [{"name": "team-a-x"}], "semaphores": [{"name": "team-a-y", "limit": 1}]}"#;
    let claim = acquired(&app, "/claims", TEAM_A, mine).await;
    let path = format!("/claims/{}", claim["id"].as_str().unwrap());
    // A token that may only read those names may not touch it, even
    // knowing its id.
    forbidden(
        send(&app, Method::DELETE, &path, PICKY, "").await,
        "write",
        "team-a-x",
    )
    .await;
    assert_eq!(
        send(&app, Method::PATCH, &path, TEAM_A, "").await.status(),
        200
    );
    assert_eq!(
        send(&app, Method::DELETE, &path, TEAM_A, "").await.status(),
        204
    );
}

/// A force-release's history entry names the token that ended it
/// (`ended_by`) beside the one that took it (`by`); a release's has none.
#[tokio::test]
async fn a_force_release_s_history_entry_names_the_token_that_ended_it() {
    let (app, _file) = scoped_app().await;
    acquired(&app, "/locks/team-a-forced", TEAM_A, "{}").await;
    acquired(&app, "/semaphores/team-a-pool", TEAM_A, r#"{"limit": 2}"#).await;
    for path in ["/locks/team-a-forced", "/semaphores/team-a-pool"] {
        let ended = send(&app, Method::DELETE, path, TEAM_A_ADMIN, "").await;
        assert_eq!(ended.status(), 204, "{path}");
        let history = format!("{path}/history");
        let page: Value = send(&app, Method::GET, &history, READER, "")
            .await
            .json()
            .await
            .unwrap();
        let entry = &page["entries"][0];
        assert_eq!(entry["end"], "force-released", "{page}");
        assert_eq!(entry["by"], "team-a-ci", "{page}");
        assert_eq!(entry["ended_by"], "team-a-ops", "{page}");
    }
    let lease = acquired(&app, "/locks/team-a-forced", TEAM_A, "{}").await;
    let path = format!("/locks/team-a-forced/{}", lease["id"].as_str().unwrap());
    assert_eq!(
        send(&app, Method::DELETE, &path, TEAM_A, "").await.status(),
        204
    );
    let page: Value = send(
        &app,
        Method::GET,
        "/locks/team-a-forced/history",
        READER,
        "",
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(page["entries"][0]["end"], "released", "{page}");
    assert!(page["entries"][0].get("ended_by").is_none(), "{page}");
    assert_eq!(page["entries"][1]["ended_by"], "team-a-ops", "{page}");
}

/// A name's history needs `read` on it: the auditor reads it (with the
/// token's name as `by`), a team token reads its own names only, and no
/// token is 401.
#[tokio::test]
async fn history_needs_read_and_shows_the_token_s_name() {
    let (app, _file) = scoped_app().await;
    let lease = acquired(&app, "/locks/team-a-hist", TEAM_A, r#"{"owner": "job"}"#).await;
    let path = format!("/locks/team-a-hist/{}", lease["id"].as_str().unwrap());
    assert_eq!(
        send(&app, Method::DELETE, &path, TEAM_A, "").await.status(),
        204
    );
    for token in [READER, TEAM_A] {
        let response = send(&app, Method::GET, "/locks/team-a-hist/history", token, "").await;
        assert_eq!(response.status(), 200, "{token}");
        let page: Value = response.json().await.unwrap();
        assert_eq!(page["entries"][0]["by"], "team-a-ci", "{page}");
        assert_eq!(page["entries"][0]["end"], "released", "{page}");
    }
    let other = send(
        &app,
        Method::GET,
        "/semaphores/team-b-x/history",
        TEAM_A,
        "",
    )
    .await;
    forbidden(other, "read", "team-b-x").await;
    let anonymous = app.get("/locks/team-a-hist/history").await;
    problem(anonymous, 401, "unauthorized").await;
}

#[tokio::test]
async fn a_token_sees_only_the_freezes_that_can_match_a_name_it_may_read() {
    let (app, _file) = scoped_app().await;
    let mut ids = std::collections::BTreeMap::new();
    for pattern in [
        "team-*",
        "team-a-7",
        "team-a-5x",
        "team-b-*",
        "ops-prod",
        "*",
    ] {
        let body = serde_json::json!({"match": pattern, "freeze_start": "0 23 * * 5",
                                      "freeze_end": "0 7 * * 1", "reason": format!("about {pattern}")});
        let made = send(&app, Method::POST, "/freezes", ADMIN, &body.to_string()).await;
        assert_eq!(made.status(), 201, "{pattern}");
        let made: Value = made.json().await.unwrap();
        ids.insert(pattern, made["id"].as_str().unwrap().to_owned());
    }
    let seen = |token: &'static str| {
        let app = &app;
        async move {
            let listed: Value = send(app, Method::GET, "/freezes", token, "")
                .await
                .json()
                .await
                .unwrap();
            let mut seen: Vec<String> = listed["freezes"]
                .as_array()
                .unwrap()
                .iter()
                .map(|f| f["match"].as_str().unwrap().to_owned())
                .collect();
            seen.sort();
            seen
        }
    };
    // `write:team-a-*`: a prefix that holds its names (`team-*`, `*`) and a
    // name under its own; not another team's, not ops'.
    assert_eq!(seen(TEAM_A).await, ["*", "team-*", "team-a-5x", "team-a-7"]);
    // `read:team-a-1`, `read:team-a-3`, `read:team-a-5*`.
    assert_eq!(seen(PICKY).await, ["*", "team-*", "team-a-5x"]);
    assert_eq!(seen(READER).await.len(), 6);

    // One it may not see is not there for it, with its reason and maker.
    let foreign = format!("/freezes/{}", ids["team-b-*"]);
    let hidden = send(&app, Method::GET, &foreign, TEAM_A, "").await;
    problem(hidden, 404, "freeze-not-found").await;
    let shown = send(&app, Method::GET, &foreign, READER, "").await;
    assert_eq!(shown.status(), 200);
    let own = format!("/freezes/{}", ids["team-a-7"]);
    assert_eq!(
        send(&app, Method::GET, &own, TEAM_A, "").await.status(),
        200
    );
    // Deleting: 404 for one it may not see, 403 for one it sees but does
    // not administer whole.
    let hidden = send(&app, Method::DELETE, &foreign, TEAM_A_ADMIN, "").await;
    problem(hidden, 404, "freeze-not-found").await;
    let wider = format!("/freezes/{}", ids["team-*"]);
    let refused = send(&app, Method::DELETE, &wider, TEAM_A_ADMIN, "").await;
    problem(refused, 403, "forbidden").await;
    assert_eq!(
        send(&app, Method::DELETE, &own, TEAM_A_ADMIN, "")
            .await
            .status(),
        204
    );
}

/// A service whose caps are 4 waiters and 4 event streams, with the file's
/// tokens (and `max_priority = 4` for `team-a-ci`).
async fn capped_app() -> (TestApp, TokenFile) {
    let file = TokenFile::new(&format!(
        r#"
        [[token]]
        name = "team-a-ci"
        value = "{TEAM_A}"
        allow = ["write:team-a-*"]
        max_priority = 4

        [[token]]
        name = "auditor"
        value = "{READER}"
        allow = ["read:*"]

        [[token]]
        name = "team-a-ops"
        value = "{TEAM_A_ADMIN}"
        allow = ["admin:team-a-*"]
        "#
    ));
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.tokens_file = Some(file.0.clone());
    settings.max_waiters = 4;
    settings.max_event_streams = 4;
    (TestApp::spawn_with(settings).await, file)
}

fn stream_request(app: &TestApp, path: &str, token: &str) -> reqwest::RequestBuilder {
    app.client
        .get(format!("{}{path}", app.base))
        .header("accept", "text/event-stream")
        .bearer_auth(token)
}

#[tokio::test]
async fn a_token_holds_at_most_half_of_the_event_streams_holders_streams_included() {
    let (app, _file) = capped_app().await;
    // A prefix the reader may read nothing of still takes a slot of its own share.
    let first = stream_request(&app, "/events?prefix=zzz", READER)
        .send()
        .await
        .unwrap();
    let second = stream_request(&app, "/events?prefix=zzz", READER)
        .send()
        .await
        .unwrap();
    assert_eq!(
        (first.status().as_u16(), second.status().as_u16()),
        (200, 200)
    );
    let third = stream_request(&app, "/events?prefix=zzz", READER)
        .send()
        .await
        .unwrap();
    let body = problem(third, 503, "too-many-streams").await;
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.contains("this token") && detail.contains("half of BATON_MAX_EVENT_STREAMS"),
        "{detail}"
    );
    // Another token is still served.
    let other = stream_request(&app, "/events", TEAM_A)
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200);

    // The holder's stream counts as an event stream.
    let lease = acquired(&app, "/locks/team-a-h", TEAM_A, r#"{"ttl_ms": 60000}"#).await;
    let path = format!("/locks/team-a-h/{}/events", lease["id"].as_str().unwrap());
    let own = stream_request(&app, &path, TEAM_A).send().await.unwrap();
    assert_eq!(own.status(), 200);
    let over = stream_request(&app, &path, TEAM_A).send().await.unwrap();
    problem(over, 503, "too-many-streams").await;
    // A stream closed gives its slot back.
    drop(own);
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let again = stream_request(&app, &path, TEAM_A).send().await.unwrap();
        if again.status() == 200 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the slot never came back"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    drop((first, second, other));
}

#[tokio::test]
async fn a_token_holds_at_most_half_of_the_waiters_and_the_others_still_wait() {
    let (app, _file) = capped_app().await;
    acquired(
        &app,
        "/locks/team-a-w",
        TEAM_A_ADMIN,
        r#"{"ttl_ms": 60000}"#,
    )
    .await;
    let wait = r#"{"ttl_ms": 60000, "wait_ms": 60000}"#;
    let mut waits = Vec::new();
    for _ in 0..2 {
        let request = app
            .client
            .post(format!("{}/locks/team-a-w", app.base))
            .bearer_auth(TEAM_A)
            .body(wait);
        waits.push(tokio::spawn(request.send()));
    }
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status: Value = send(&app, Method::GET, "/locks/team-a-w", READER, "")
            .await
            .json()
            .await
            .unwrap();
        if status["waiting"] == 2 {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{status}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let third = send(&app, Method::POST, "/locks/team-a-w", TEAM_A, wait).await;
    let body = problem(third, 503, "too-many-waiters").await;
    assert!(
        body["detail"]
            .as_str()
            .unwrap()
            .contains("half of BATON_MAX_WAITERS"),
        "{body}"
    );
    // Another token still waits (answered 409 after a short wait).
    let other = send(
        &app,
        Method::POST,
        "/locks/team-a-w",
        TEAM_A_ADMIN,
        r#"{"wait_ms": 200}"#,
    )
    .await;
    assert_eq!(other.status(), 409);
    // A claim waits as one waiter, counted the same.
    let claim = send(
        &app,
        Method::POST,
        "/claims",
        TEAM_A,
        r#"{"locks": [{"name": "team-a-w"}], "wait_ms": 60000}"#,
    )
    .await;
    problem(claim, 503, "too-many-waiters").await;
    for wait in waits {
        wait.abort();
    }
}

#[tokio::test]
async fn a_priority_above_the_token_s_max_priority_is_refused_naming_priority() {
    let (app, _file) = capped_app().await;
    let refused = send(
        &app,
        Method::POST,
        "/locks/team-a-p",
        TEAM_A,
        r#"{"priority": 9}"#,
    )
    .await;
    let body = problem(refused, 403, "forbidden").await;
    let detail = body["detail"].as_str().unwrap();
    assert!(
        detail.starts_with("priority:") && detail.contains("at most 4"),
        "{detail}"
    );
    acquired(&app, "/locks/team-a-p", TEAM_A, r#"{"priority": 4}"#).await;
    // Without max_priority: up to 9.
    acquired(&app, "/locks/team-a-q", TEAM_A_ADMIN, r#"{"priority": 9}"#).await;
    let claim = send(
        &app,
        Method::POST,
        "/claims",
        TEAM_A,
        r#"{"locks": [{"name": "team-a-r"}], "priority": 5}"#,
    )
    .await;
    problem(claim, 403, "forbidden").await;
}

#[tokio::test]
async fn a_yield_is_by_the_asking_token_and_told_once_per_asker_every_ten_seconds() {
    let (app, _file) = capped_app().await;
    let lease = acquired(
        &app,
        "/locks/team-a-y",
        TEAM_A_ADMIN,
        r#"{"ttl_ms": 60000}"#,
    )
    .await;
    let path = format!("/locks/team-a-y/{}/events", lease["id"].as_str().unwrap());
    let mut own = SseStream::new(
        stream_request(&app, &path, TEAM_A_ADMIN)
            .send()
            .await
            .unwrap(),
    );
    assert_eq!(
        own.next_within(Duration::from_secs(10)).await.unwrap().name,
        "held"
    );

    let ask = r#"{"owner": "someone-else", "reason": "deploy"}"#;
    let first: Value = send(&app, Method::POST, "/locks/team-a-y/yield", TEAM_A, ask)
        .await
        .json()
        .await
        .unwrap();
    assert_eq!(first, serde_json::json!({"holders": 1}));
    let again = send(&app, Method::POST, "/locks/team-a-y/yield", TEAM_A, ask).await;
    assert_eq!(again.status(), 202);
    let again: Value = again.json().await.unwrap();
    assert_eq!(
        again,
        serde_json::json!({"holders": 0, "already_asked": true})
    );
    // Another asker is told of at once.
    let other: Value = send(
        &app,
        Method::POST,
        "/locks/team-a-y/yield",
        TEAM_A_ADMIN,
        "{}",
    )
    .await
    .json()
    .await
    .unwrap();
    assert_eq!(other["holders"], 1);

    let told = own.next_within(Duration::from_secs(10)).await.unwrap();
    assert_eq!(told.name, "yield-requested");
    assert_eq!(
        told.data["by"], "team-a-ci",
        "the token's name, not the owner typed"
    );
    let next = own.next_within(Duration::from_secs(10)).await.unwrap();
    assert_eq!(next.name, "yield-requested");
    assert_eq!(
        next.data["by"], "team-a-ops",
        "told once for team-a-ci, then team-a-ops"
    );
}

#[tokio::test]
async fn an_expired_token_is_refused_and_its_open_stream_ends() {
    let soon = chrono::Utc::now() + chrono::Duration::seconds(2);
    let file = TokenFile::new(&format!(
        r#"
        [[token]]
        name = "gone"
        value = "{TEAM_A}"
        allow = ["read:*"]
        expires = "2020-01-01T00:00:00Z"

        [[token]]
        name = "soon"
        value = "{READER}"
        allow = ["read:*"]
        expires = "{}"
        "#,
        soon.to_rfc3339()
    ));
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.tokens_file = Some(file.0.clone());
    let app = TestApp::spawn_with(settings).await;
    let past = send(&app, Method::GET, "/locks/x", TEAM_A, "").await;
    problem(past, 401, "unauthorized").await;
    let mut stream = SseStream::new(
        stream_request(&app, "/events", READER)
            .send()
            .await
            .unwrap(),
    );
    assert!(
        stream.ends_within(Duration::from_secs(15)).await,
        "the stream of an expired token ends"
    );
    let after = send(&app, Method::GET, "/locks/x", READER, "").await;
    problem(after, 401, "unauthorized").await;
}

/// Waits until `path`'s line holds `count` requests (read with `token`).
async fn line_holds(app: &TestApp, path: &str, token: &str, count: u64) {
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let status: Value = send(app, Method::GET, path, token, "")
            .await
            .json()
            .await
            .unwrap();
        if status["waiting"] == count {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{path}'s line never held {count}: {status}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test]
async fn a_removed_token_s_kept_places_leave_the_line_with_its_waits() {
    let entry = |name: &str, token: &str| {
        format!("[[token]]\nname = \"{name}\"\nvalue = \"{token}\"\nallow = [\"write:*\"]\n")
    };
    let kept = entry("holder", TEAM_A_ADMIN);
    let file = TokenFile::new(&format!("{kept}{}", entry("leaving", TEAM_A)));
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.tokens_file = Some(file.0.clone());
    let app = TestApp::spawn_with(settings).await;
    acquired(
        &app,
        "/locks/team-a-k",
        TEAM_A_ADMIN,
        r#"{"ttl_ms": 60000}"#,
    )
    .await;
    // A ticket taken without waiting, then waited on; and an acquisition
    // that waits keeping its place.
    let taken = send(
        &app,
        Method::POST,
        "/locks/team-a-k",
        TEAM_A,
        r#"{"keep_place_ms": 600000}"#,
    )
    .await;
    assert_eq!(taken.status(), 202);
    let ticket: Value = taken.json().await.unwrap();
    let ticket = format!(
        "/locks/team-a-k/tickets/{}",
        ticket["ticket"].as_str().unwrap()
    );
    let on_ticket = tokio::spawn(
        app.client
            .post(format!("{}{ticket}", app.base))
            .bearer_auth(TEAM_A)
            .body(r#"{"wait_ms": 60000}"#)
            .send(),
    );
    let keeping = tokio::spawn(
        app.client
            .post(format!("{}/locks/team-a-k", app.base))
            .bearer_auth(TEAM_A)
            .body(r#"{"wait_ms": 60000, "keep_place_ms": 600000}"#)
            .send(),
    );
    line_holds(&app, "/locks/team-a-k", TEAM_A_ADMIN, 2).await;
    // Waits until both requests are in: the ticket's wait shows nowhere, so
    // give it a moment's head start through a status round trip each.
    for _ in 0..5 {
        line_holds(&app, "/locks/team-a-k", TEAM_A_ADMIN, 2).await;
    }

    // Removed (the file is looked at every second; no signal needed).
    let staged = file.0.with_extension("staged");
    std::fs::write(&staged, &kept).unwrap();
    std::fs::rename(&staged, &file.0).unwrap();

    for (what, answer) in [("the ticket's wait", on_ticket), ("the kept wait", keeping)] {
        let answer = tokio::time::timeout(Duration::from_secs(10), answer)
            .await
            .unwrap_or_else(|_| panic!("{what} is answered"))
            .unwrap()
            .unwrap();
        assert_eq!(answer.status(), 401, "{what}");
    }
    // Neither place is kept as a ticket.
    line_holds(&app, "/locks/team-a-k", TEAM_A_ADMIN, 0).await;
}

#[tokio::test]
async fn each_token_of_a_variable_has_a_share_of_its_own() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.api_tokens = vec![API.into(), format!("{API}-second")];
    settings.max_event_streams = 2;
    let app = TestApp::spawn_with(settings).await;
    let first = stream_request(&app, "/events", API).send().await.unwrap();
    assert_eq!(first.status(), 200);
    let again = stream_request(&app, "/events", API).send().await.unwrap();
    problem(again, 503, "too-many-streams").await;
    let other = stream_request(&app, "/events", &format!("{API}-second"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status(), 200, "the other token of the variable");
    drop((first, other));
}
