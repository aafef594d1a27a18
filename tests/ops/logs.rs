//! JSON log lines: one object per line, an audit line per operation carrying
//! the request id, no lease id and no token anywhere; request ids echoed or
//! made; trace ids recorded; a Redis outage logged once each way.

use std::time::Duration;

use reqwest::Client;
use serde_json::Value;

use baton_testkit::service::Service;
use baton_testkit::{shared_redis, unique_prefix, RedisServer};

const API_TOKEN: &str = "api-token-3f9c1d";
const ADMIN_TOKEN: &str = "admin-token-7b2e4a";

/// A client of one service that sends each request with a bearer token and
/// a request id.
struct Api<'a> {
    client: Client,
    service: &'a Service,
    token: &'static str,
}

impl Api<'_> {
    /// Sends `request` ("METHOD /path") with `body` and `request_id`; checks
    /// that the answer has status `expect` and echoes the request id, and
    /// returns its JSON body (Null when empty).
    async fn send(&self, expect: u16, request: &str, body: &str, request_id: &str) -> Value {
        let (method, path) = request.split_once(' ').expect("METHOD /path");
        let response = self
            .client
            .request(
                method.parse().unwrap(),
                format!("{}{path}", self.service.base),
            )
            .bearer_auth(self.token)
            .header("x-request-id", request_id)
            .body(body.to_owned())
            .send()
            .await
            .expect("request sent");
        assert_eq!(
            response
                .headers()
                .get("x-request-id")
                .and_then(|v| v.to_str().ok()),
            Some(request_id),
            "the request id is echoed"
        );
        assert_eq!(response.status(), expect, "{request}");
        let text = response.text().await.unwrap();
        serde_json::from_str(&text).unwrap_or(Value::Null)
    }
}

/// A service on the shared Redis, with a prefix of its own, logging JSON
/// lines, with `extra` settings.
async fn json_logging(extra: &[(&str, &str)]) -> Service {
    let (url, prefix) = (shared_redis().url(), unique_prefix());
    let mut settings = vec![
        ("BATON_REDIS_URL", url.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
        ("BATON_LOG_FORMAT", "json"),
    ];
    settings.extend_from_slice(extra);
    Service::start(&settings).await
}

fn audit_lines(lines: &[Value]) -> Vec<&Value> {
    lines
        .iter()
        .filter(|l| l["target"] == "baton::audit")
        .collect()
}

#[tokio::test]
async fn json_logs_have_one_audit_line_per_operation_and_no_lease_id_or_token() {
    let mut service = json_logging(&[
        ("BATON_API_TOKENS", API_TOKEN),
        ("BATON_ADMIN_TOKENS", ADMIN_TOKEN),
    ])
    .await;
    let owner = "ci job 42";
    let api = Api {
        client: Client::new(),
        service: &service,
        token: API_TOKEN,
    };
    let admin = Api {
        client: api.client.clone(),
        service: &service,
        token: ADMIN_TOKEN,
    };
    let body = format!(r#"{{"ttl_ms": 60000, "owner": "{owner}"}}"#);
    let lock = api
        .send(201, "POST /locks/deploy.prod", &body, "req-lock-acquire")
        .await;
    let lock_path = format!("/locks/deploy.prod/{}", lock["id"].as_str().unwrap());
    api.send(200, &format!("PATCH {lock_path}"), "", "req-lock-refresh")
        .await;
    api.send(204, &format!("DELETE {lock_path}"), "", "req-lock-release")
        .await;
    let again = api
        .send(201, "POST /locks/deploy.prod", &body, "req-lock-again")
        .await;
    admin
        .send(204, "DELETE /locks/deploy.prod", "", "req-lock-force")
        .await;

    let sem_body = format!(r#"{{"limit": 2, "ttl_ms": 60000, "owner": "{owner}"}}"#);
    let sem = api
        .send(201, "POST /semaphores/builds", &sem_body, "req-sem-acquire")
        .await;
    let sem_path = format!("/semaphores/builds/{}", sem["id"].as_str().unwrap());
    let refresh = r#"{"ttl_ms": 30000}"#;
    api.send(
        200,
        &format!("PATCH {sem_path}"),
        refresh,
        "req-sem-refresh",
    )
    .await;
    api.send(204, &format!("DELETE {sem_path}"), "", "req-sem-release")
        .await;
    drop((api, admin));

    assert_eq!(service.stop().code(), Some(0));
    let lines = service.json_lines();
    assert!(lines.len() > 2, "{}", service.log());
    for line in &lines {
        assert!(
            line["timestamp"].is_string() && line["level"].is_string(),
            "{line}"
        );
    }
    let audits = audit_lines(&lines);
    let token = |lease: &Value| Some(lease["fencing_token"].as_u64().unwrap());
    let expected = [
        ("req-lock-acquire", "acquired", "lock", token(&lock)),
        ("req-lock-refresh", "refreshed", "lock", token(&lock)),
        ("req-lock-release", "released", "lock", token(&lock)),
        ("req-lock-again", "acquired", "lock", token(&again)),
        // One line for the lease it ended, with that lease's owner and token.
        ("req-lock-force", "force-released", "lock", token(&again)),
        ("req-sem-acquire", "acquired", "semaphore", token(&sem)),
        ("req-sem-refresh", "refreshed", "semaphore", token(&sem)),
        ("req-sem-release", "released", "semaphore", token(&sem)),
    ];
    assert_eq!(audits.len(), expected.len(), "{audits:#?}");
    for (line, (request_id, event, kind, token)) in audits.iter().zip(expected) {
        assert_eq!(line["level"], "INFO", "{line}");
        assert_eq!(line["message"], "audit", "{line}");
        assert_eq!(line["event"], event, "{line}");
        assert_eq!(line["kind"], kind, "{line}");
        assert_eq!(line["span"]["request_id"], request_id, "{line}");
        assert!(
            line["span"]["route"]
                .as_str()
                .unwrap()
                .starts_with(&format!("/{kind}")),
            "{line}"
        );
        let name = if kind == "lock" {
            "deploy.prod"
        } else {
            "builds"
        };
        assert_eq!(line["name"], name, "{line}");
        if let Some(token) = token {
            assert_eq!(line["fencing_token"], token, "{line}");
            assert_eq!(line["owner"], owner, "{line}");
        }
    }
    // Each event is logged once: no line but the audit line tells of the
    // force-release.
    let told: Vec<_> = lines
        .iter()
        .filter(|line| line.to_string().contains("force-released"))
        .collect();
    assert_eq!(told.len(), 1, "{told:#?}");
    let log = service.log();
    for secret in [
        lock["id"].as_str().unwrap(),
        again["id"].as_str().unwrap(),
        sem["id"].as_str().unwrap(),
        API_TOKEN,
        ADMIN_TOKEN,
    ] {
        assert!(!log.contains(secret), "{secret} is in the log:\n{log}");
    }
}

/// A request that waits in line is parked (it keeps no span while it waits):
/// its audit line still carries its request id, route and trace id, and its
/// answer still echoes the request id.
#[tokio::test]
async fn a_request_that_waited_in_line_logs_in_its_own_span_and_echoes_its_id() {
    let mut service = json_logging(&[]).await;
    let client = Client::new();
    let held: Value = client
        .post(format!("{}/locks/queue", service.base))
        .body(r#"{"ttl_ms": 30000}"#)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let waiter = {
        let (client, base) = (client.clone(), service.base.clone());
        tokio::spawn(async move {
            client
                .post(format!("{base}/locks/queue"))
                .header("x-request-id", "req-waited")
                .header(
                    "traceparent",
                    "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
                )
                .body(r#"{"wait_ms": 10000, "owner": "patient"}"#)
                .send()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    let release = format!(
        "{}/locks/queue/{}",
        service.base,
        held["id"].as_str().unwrap()
    );
    assert_eq!(client.delete(release).send().await.unwrap().status(), 204);

    let answer = waiter.await.unwrap();
    assert_eq!(answer.status(), 201);
    assert_eq!(answer.headers()["x-request-id"], "req-waited");
    let lease: Value = answer.json().await.unwrap();

    assert_eq!(service.stop().code(), Some(0));
    let lines = service.json_lines();
    let audit = audit_lines(&lines);
    let waited: Vec<_> = audit
        .iter()
        .filter(|l| l["event"] == "acquired" && l["owner"] == "patient")
        .collect();
    assert_eq!(waited.len(), 1, "{audit:#?}");
    let line = waited[0];
    assert_eq!(line["fencing_token"], lease["fencing_token"], "{line}");
    assert_eq!(line["span"]["request_id"], "req-waited", "{line}");
    assert_eq!(line["span"]["route"], "/locks/{name}", "{line}");
    assert_eq!(
        line["span"]["trace_id"], "4bf92f3577b34da6a3ce929d0e0e4736",
        "{line}"
    );
}

#[tokio::test]
async fn request_ids_are_echoed_or_made_and_trace_ids_recorded() {
    let redis = shared_redis();
    let mut service = Service::start(&[
        ("BATON_REDIS_URL", &redis.url()),
        ("BATON_KEY_PREFIX", &unique_prefix()),
        ("BATON_LOG_FORMAT", "json"),
    ])
    .await;
    let client = Client::new();
    let url = format!("{}/locks/traced", service.base);
    let trace_id = "4bf92f3577b34da6a3ce929d0e0e4736";
    let response = client
        .post(&url)
        .header("x-request-id", "client-chosen-id")
        .header("traceparent", format!("00-{trace_id}-00f067aa0ba902b7-01"))
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 201);
    assert_eq!(response.headers()["x-request-id"], "client-chosen-id");

    // Without one (or with one that is not plain text), a new id is made.
    let made = client
        .get(format!("{}/locks/traced", service.base))
        .send()
        .await
        .unwrap();
    let made_id = made.headers()["x-request-id"].to_str().unwrap().to_owned();
    assert!(uuid::Uuid::parse_str(&made_id).is_ok(), "{made_id}");
    let long = "x".repeat(500);
    let replaced = client
        .get(format!("{}/healthz", service.base))
        .header("x-request-id", &long)
        .send()
        .await
        .unwrap();
    let replaced_id = replaced.headers()["x-request-id"].to_str().unwrap();
    assert!(uuid::Uuid::parse_str(replaced_id).is_ok(), "{replaced_id}");

    // Every error answer carries one too.
    let bad = client.post(&url).body("{").send().await.unwrap();
    assert_eq!(bad.status(), 400);
    assert!(bad.headers().contains_key("x-request-id"));

    service.stop();
    let lines = service.json_lines();
    let audit = audit_lines(&lines);
    assert_eq!(audit.len(), 1, "{audit:#?}");
    assert_eq!(audit[0]["span"]["request_id"], "client-chosen-id");
    assert_eq!(audit[0]["span"]["trace_id"], trace_id);
    assert_eq!(audit[0]["span"]["route"], "/locks/{name}");
}

#[tokio::test]
async fn a_redis_outage_is_logged_once_when_it_starts_and_once_when_it_ends() {
    let mut redis = RedisServer::start();
    let mut service = Service::start(&[
        ("BATON_REDIS_URL", &redis.url()),
        ("BATON_KEY_PREFIX", &unique_prefix()),
        ("BATON_LOG_FORMAT", "json"),
    ])
    .await;
    let client = Client::new();
    redis.kill();
    // Three seconds of requests and reconnect attempts during the outage.
    for _ in 0..6 {
        let response = client
            .post(format!("{}/locks/outage", service.base))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 503);
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    redis.restart();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        let response = client
            .post(format!("{}/locks/outage", service.base))
            .send()
            .await
            .unwrap();
        if response.status() == 201 {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "Redis never came back"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    service.stop();
    let lines = service.json_lines();
    let messages = |text: &str| {
        lines
            .iter()
            .filter(|l| l["message"].as_str().is_some_and(|m| m.starts_with(text)))
            .count()
    };
    assert_eq!(messages("Redis is unreachable"), 1, "{}", service.log());
    // From then on, nothing is logged at warn but that line and one per 503.
    let outage = lines
        .iter()
        .skip_while(|l| l["message"] != "Redis is unreachable; calls answer 503 until it is back");
    for line in outage.filter(|l| l["level"] == "WARN" || l["level"] == "ERROR") {
        assert!(
            line["message"] == "request failed"
                || line["message"]
                    .as_str()
                    .unwrap_or_default()
                    .starts_with("Redis is unreachable"),
            "unexpected during the outage: {line}"
        );
    }
    assert_eq!(messages("Redis answers again"), 1, "{}", service.log());
    // Each 503 is logged with its route, inside its request span.
    let failed: Vec<&Value> = lines
        .iter()
        .filter(|l| {
            l["message"] == "request failed"
                && l["answer"].as_str().is_some_and(|a| a.contains("503"))
        })
        .collect();
    assert_eq!(failed.len(), 6, "{}", service.log());
    for line in failed {
        assert_eq!(line["span"]["route"], "/locks/{name}", "{line}");
        assert_eq!(line["level"], "WARN", "{line}");
    }
}

#[tokio::test]
async fn audit_lines_name_the_token_they_were_made_with_as_by() {
    const TEAM: &str = "team-a-token-61f0c2";
    const OPS: &str = "ops-token-0b9e77";
    let path = std::env::temp_dir().join(format!("baton-logs-tokens-{}.toml", unique_prefix()));
    std::fs::write(
        &path,
        format!(
            "[[token]]\nname = \"team-a-ci\"\nvalue = \"{TEAM}\"\nallow = [\"write:team-a-*\"]\n\n\
             [[token]]\nname = \"ops on call\"\nvalue = \"{OPS}\"\nallow = [\"admin:*\"]\n"
        ),
    )
    .unwrap();
    let mut service = json_logging(&[
        ("BATON_TOKENS_FILE", path.to_str().unwrap()),
        ("BATON_API_TOKENS", API_TOKEN),
    ])
    .await;
    let client = Client::new();
    let team = Api {
        client: client.clone(),
        service: &service,
        token: TEAM,
    };
    let ops = Api {
        client: client.clone(),
        service: &service,
        token: OPS,
    };
    let api = Api {
        client,
        service: &service,
        token: API_TOKEN,
    };
    let lease = team
        .send(201, "POST /locks/team-a-x", "", "req-acquire")
        .await;
    let lease_path = format!("/locks/team-a-x/{}", lease["id"].as_str().unwrap());
    team.send(200, &format!("PATCH {lease_path}"), "", "req-refresh")
        .await;
    team.send(204, &format!("DELETE {lease_path}"), "", "req-release")
        .await;
    let sem = team
        .send(
            201,
            "POST /semaphores/team-a-s",
            r#"{"limit": 2}"#,
            "req-sem",
        )
        .await;
    ops.send(204, "DELETE /semaphores/team-a-s", "", "req-force")
        .await;
    api.send(201, "POST /locks/anything", "", "req-api").await;
    drop((team, ops, api));

    assert_eq!(service.stop().code(), Some(0));
    std::fs::remove_file(&path).unwrap();
    let lines = service.json_lines();
    let audits = audit_lines(&lines);
    let expected = [
        ("req-acquire", "acquired", "team-a-ci"),
        ("req-refresh", "refreshed", "team-a-ci"),
        ("req-release", "released", "team-a-ci"),
        ("req-sem", "acquired", "team-a-ci"),
        ("req-force", "force-released", "ops on call"),
        ("req-api", "acquired", "BATON_API_TOKENS"),
    ];
    assert_eq!(audits.len(), expected.len(), "{audits:#?}");
    for (line, (request_id, event, by)) in audits.iter().zip(expected) {
        assert_eq!(line["span"]["request_id"], request_id, "{line}");
        assert_eq!(line["event"], event, "{line}");
        assert_eq!(line["by"], by, "{line}");
    }
    assert_eq!(audits[4]["fencing_token"], sem["fencing_token"]);
    let log = service.log();
    for secret in [TEAM, OPS, API_TOKEN, lease["id"].as_str().unwrap()] {
        assert!(!log.contains(secret), "{secret} is in the log:\n{log}");
    }
}
