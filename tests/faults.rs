//! What a 201 promises, under the faults that are normal in production: two
//! baton processes on one Redis, one of them paused (SIGSTOP) or stopped
//! (SIGTERM) across a hand-off, Redis stalled (DEBUG SLEEP) right after one,
//! the line's keys lost, a client that hangs up mid-call, and the fencing
//! counter's guard. Each test fails on a baton that answers a grant before
//! Redis holds it until the expiry it sends, or that leaves a waiter waiting
//! on a free name.

use std::time::{Duration, Instant, SystemTime};

use baton_testkit::chaos::{install_crypto, Instance};
use baton_testkit::{lease_path, unique_prefix, RedisServer};
use serde_json::Value;
use tokio::task::JoinHandle;

/// Two baton processes (A and B) on one private Redis, under one prefix.
struct Pair {
    redis: RedisServer,
    prefix: String,
    a: Instance,
    b: Instance,
    http: reqwest::Client,
}

impl Pair {
    fn start() -> Self {
        Self::start_with(&[])
    }

    fn start_with(extra: &[(&str, &str)]) -> Self {
        let redis = RedisServer::start();
        let prefix = unique_prefix();
        let url = redis.url();
        let mut env = vec![
            ("BATON_REDIS_URL", url.as_str()),
            ("BATON_KEY_PREFIX", prefix.as_str()),
        ];
        env.extend_from_slice(extra);
        install_crypto();
        let a = Instance::start(&env);
        let b = Instance::start(&env);
        Self {
            redis,
            prefix,
            a,
            b,
            http: reqwest::Client::new(),
        }
    }

    /// A request answered: its status and JSON body.
    async fn call(&self, method: reqwest::Method, url: String, body: &str) -> (u16, Value) {
        let response = self
            .http
            .request(method, url)
            .body(body.to_owned())
            .send()
            .await
            .expect("baton answers");
        let status = response.status().as_u16();
        (status, response.json().await.unwrap_or(Value::Null))
    }

    async fn post(&self, base: &str, path: &str, body: &str) -> (u16, Value) {
        self.call(reqwest::Method::POST, format!("{base}{path}"), body)
            .await
    }

    async fn get(&self, base: &str, path: &str) -> (u16, Value) {
        self.call(reqwest::Method::GET, format!("{base}{path}"), "")
            .await
    }

    async fn delete(&self, base: &str, path: &str) -> u16 {
        self.call(reqwest::Method::DELETE, format!("{base}{path}"), "")
            .await
            .0
    }

    /// Sends an acquisition in the background: its status, body and when
    /// the answer came (`None`: no answer, the connection failed).
    fn waiter(&self, base: &str, path: &str, body: &str) -> JoinHandle<Option<Waited>> {
        let request = self
            .http
            .post(format!("{base}{path}"))
            .body(body.to_owned());
        tokio::spawn(async move {
            let response = request.send().await.ok()?;
            let at = Instant::now();
            let status = response.status().as_u16();
            let body = response.json().await.unwrap_or(Value::Null);
            Some(Waited { status, body, at })
        })
    }

    /// Waits until `path`'s status (asked through A) shows `n` waiting.
    async fn until_waiting(&self, path: &str, n: u64) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let (_, status) = self.get(&self.a.base(), path).await;
            if status["waiting"] == n {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{path} never had {n} waiting: {status}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The lock `path` held through A ([`HOLD`]), and a waiter for it on B
    /// ([`WAIT`]) in line: the holder's lease and the waiter.
    async fn held_on_a_awaited_on_b(&self, path: &str) -> (Value, JoinHandle<Option<Waited>>) {
        let (status, holder) = self.post(&self.a.base(), path, HOLD).await;
        assert_eq!(status, 201);
        let waiter = self.waiter(&self.b.base(), path, WAIT);
        self.until_waiting(path, 1).await;
        (holder, waiter)
    }

    /// The waiter was told 201 with its whole ttl ahead, and Redis holds the
    /// lease it was told of: its lease.
    async fn told_201_and_held(&self, waiter: JoinHandle<Option<Waited>>) -> Value {
        let waited = waiter.await.expect("waiter").expect("an answer");
        assert_eq!(waited.status, 201, "{}", waited.body);
        let lease = waited.body;
        assert!(expires_at(&lease) > SystemTime::now() + Duration::from_secs(50));
        let (held, _) = self.get(&self.a.base(), &lease_path("locks", &lease)).await;
        assert_eq!(held, 200, "the lease told 201 is not held");
        lease
    }

    fn key(&self, tag: &str, suffix: &str) -> String {
        format!("{}{{{tag}}}:{suffix}", self.prefix)
    }
}

struct Waited {
    status: u16,
    body: Value,
    at: Instant,
}

fn expires_at(lease: &Value) -> SystemTime {
    humantime::parse_rfc3339(lease["expires_at"].as_str().expect("expires_at")).expect("RFC 3339")
}

/// DEBUG SLEEP for `seconds` (fractions too), sent at once from a thread.
fn stall(redis: &RedisServer, seconds: f64) -> std::thread::JoinHandle<()> {
    let mut conn = redis.conn();
    std::thread::spawn(move || {
        redis::cmd("DEBUG")
            .arg("SLEEP")
            .arg(seconds)
            .query::<()>(&mut conn)
            .expect("DEBUG SLEEP");
    })
}

/// The waiter sent at `sent` (with [`WAIT`]'s 30 s) got the lock, long
/// before its wait ran out: it was not left waiting on a free lock.
async fn served_long_before_its_wait_ran_out(waiter: JoinHandle<Option<Waited>>, sent: Instant) {
    let waited = waiter.await.expect("waiter").expect("an answer");
    assert_eq!(waited.status, 201, "{}", waited.body);
    assert!(
        waited.at < sent + Duration::from_secs(20),
        "the waiter waited out its wait on a free lock"
    );
}

const HOLD: &str = r#"{"ttl_ms": 60000}"#;
const WAIT: &str = r#"{"ttl_ms": 60000, "wait_ms": 30000}"#;

#[tokio::test]
async fn a_redis_stall_across_a_hand_off_never_leaves_two_holders_told_201() {
    let pair = Pair::start();
    let a = pair.a.base();
    let (holder, waiter) = pair.held_on_a_awaited_on_b("/locks/stalled").await;

    // The release grants the waiter on B; Redis stalls right after, for
    // longer than a grant to another instance stays unconfirmed.
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    stall(&pair.redis, 3.5).join().expect("stall");

    // Told 201, it holds the lock: Redis has its lease, nobody else gets it.
    pair.told_201_and_held(waiter).await;
    let (other, body) = pair.post(&a, "/locks/stalled", r#"{"ttl_ms": 1000}"#).await;
    assert_eq!(other, 409, "a second holder was told 201: {body}");
}

/// A grant to another instance's waiter made just before Redis stalls keeps
/// its time to be confirmed: the first call after the stall, a newcomer's on
/// the other instance, finds the lock held and is not served ahead of the
/// waiter (the chaos run's `[Overtaken]`, seed 1796546708264554968: a
/// newcomer granted 3 ms after the stall, ahead of a waiter queued 3.5 s
/// before it). B is kept paused until the newcomer is answered, so that the
/// newcomer's call, not B's confirm, is the first after the stall.
#[tokio::test]
async fn a_grant_made_just_before_a_redis_stall_is_not_lost_to_a_newcomer_after_it() {
    let pair = Pair::start();
    let a = pair.a.base();
    let (holder, waiter) = pair.held_on_a_awaited_on_b("/locks/stall-grant").await;

    pair.b.pause();
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    // Longer than a grant to another instance stays unconfirmed (3 s).
    stall(&pair.redis, 3.5).join().expect("stall");
    let (newcomer, body) = pair.post(&a, "/locks/stall-grant", HOLD).await;
    pair.b.resume();
    assert_eq!(
        newcomer, 409,
        "a newcomer after the stall was served ahead of the waiter granted before it: {body}"
    );

    pair.told_201_and_held(waiter).await;
}

#[tokio::test]
async fn a_paused_waiter_instance_does_not_answer_a_grant_that_lapsed_while_it_slept() {
    let pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let (_, holder) = pair.post(&a, "/locks/frozen", HOLD).await;
    let first = pair.waiter(&b, "/locks/frozen", WAIT);
    pair.until_waiting("/locks/frozen", 1).await;
    let second = pair.waiter(&a, "/locks/frozen", WAIT);
    pair.until_waiting("/locks/frozen", 2).await;

    // B is frozen when the lock is handed to its waiter: the grant lapses
    // unconfirmed, and the next in line (on A) gets the lock.
    pair.b.pause();
    let released = Instant::now();
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    let second = second.await.expect("waiter").expect("an answer");
    assert_eq!(second.status, 201, "{}", second.body);
    tokio::time::sleep_until((released + Duration::from_secs(5)).into()).await;
    pair.b.resume();

    // B wakes to a grant that lapsed: its waiter must not be told 201 while
    // the second holds the lock. It is served once the second releases.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (held, _) = pair.get(&a, &lease_path("locks", &second.body)).await;
    assert_eq!(held, 200);
    let second_released = Instant::now();
    assert_eq!(
        pair.delete(&a, &lease_path("locks", &second.body)).await,
        204
    );
    let first = first.await.expect("waiter").expect("an answer");
    assert_eq!(first.status, 201, "{}", first.body);
    assert!(
        first.at > second_released,
        "the first waiter was told 201 while the second held the lock"
    );
    let token = |lease: &Value| lease["fencing_token"].as_u64().expect("token");
    assert!(token(&first.body) > token(&second.body));
}

/// A waiter that keeps its place (`keep_place_ms`) keeps its grant while its
/// instance is paused across the hand-off: the grant is held for it as a
/// ticket's would be (until its pickup), not lapsed after 3 s, so the
/// waiter behind it, on the other instance, is not served first.
#[tokio::test]
async fn a_waiter_that_keeps_its_place_keeps_its_grant_while_its_instance_is_paused() {
    let pair = Pair::start_with(&[("BATON_PICKUP_MS", "60000")]);
    let (a, b) = (pair.a.base(), pair.b.base());
    let (_, holder) = pair.post(&a, "/locks/kept", HOLD).await;
    let first = pair.waiter(
        &b,
        "/locks/kept",
        r#"{"ttl_ms": 60000, "wait_ms": 30000, "keep_place_ms": 600000}"#,
    );
    pair.until_waiting("/locks/kept", 1).await;
    let second = pair.waiter(&a, "/locks/kept", WAIT);
    pair.until_waiting("/locks/kept", 2).await;
    // (The first's place is recorded as kept right after it queued.)
    tokio::time::sleep(Duration::from_millis(300)).await;

    pair.b.pause();
    let released = Instant::now();
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    tokio::time::sleep_until((released + Duration::from_secs(5)).into()).await;
    pair.b.resume();

    // B wakes to a grant still held for its waiter: 201, first in line.
    let first = first.await.expect("waiter").expect("an answer");
    assert_eq!(first.status, 201, "{}", first.body);
    assert!(
        !second.is_finished(),
        "the second waiter was served before the first"
    );
    let (_, status) = pair.get(&a, "/locks/kept").await;
    assert_eq!(status["waiting"], 1, "{status}");
    let first_released = Instant::now();
    assert_eq!(
        pair.delete(&b, &lease_path("locks", &first.body)).await,
        204
    );
    let second = second.await.expect("waiter").expect("an answer");
    assert_eq!(second.status, 201, "{}", second.body);
    assert!(second.at > first_released);
}

/// A ticket collected with a wait on an instance that is paused across its
/// grant keeps its place when that grant lapses unconfirmed (the chaos run's
/// `TicketOvertaken`, seed 1796520778115350970: ttl 3 s and a pickup of
/// 1.5 s, so the grant to the paused instance's waiter is held 3 s): the
/// ticket is back in its place then, so a request that keeps its place, made
/// on the other instance during the pause with the same priority, is not
/// granted ahead of it, and the collect is answered 201 once B resumes.
#[tokio::test]
async fn a_ticket_collected_on_a_paused_instance_keeps_its_place_when_its_grant_lapses() {
    let pair = Pair::start_with(&[("BATON_PICKUP_MS", "1500")]);
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/locks/ticket-paused";
    let take = r#"{"ttl_ms": 3000, "wait_ms": 0, "keep_place_ms": 8000, "priority": 1}"#;
    let (_, holder) = pair.post(&a, path, HOLD).await;
    let (status, taken) = pair.post(&a, path, take).await;
    assert_eq!(status, 202, "{taken}");
    let ticket = taken["ticket"].as_str().expect("a ticket");
    let collect = pair.waiter(
        &b,
        &format!("{path}/tickets/{ticket}"),
        r#"{"wait_ms": 30000, "keep_place_ms": 8000}"#,
    );
    // (Waiting on B, as B's waiter, in the ticket's place.)
    tokio::time::sleep(Duration::from_millis(500)).await;

    // B is paused when the lock is handed to the ticket's waiter there: the
    // grant lapses unconfirmed after 3 s, and B looks dead by then.
    pair.b.pause();
    let released = Instant::now();
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    tokio::time::sleep_until((released + Duration::from_secs(4)).into()).await;
    let (later, body) = pair.post(&a, path, take).await;
    assert_eq!(
        later, 202,
        "a later request of the same priority was granted ahead of the ticket: {body}"
    );
    pair.b.resume();

    let collected = collect.await.expect("waiter").expect("an answer");
    assert_eq!(collected.status, 201, "{}", collected.body);
    assert_eq!(collected.body["id"], ticket, "{}", collected.body);
    // Its ttl runs from the collect (not from a grant held for pickup).
    assert!(
        expires_at(&collected.body) > SystemTime::now() + Duration::from_millis(2000),
        "{}",
        collected.body
    );
    let (held, _) = pair.get(&a, &lease_path("locks", &collected.body)).await;
    assert_eq!(held, 200, "the collected lease is not held");
    let (_, place) = pair
        .get(
            &a,
            &format!("{path}/tickets/{}", body["ticket"].as_str().unwrap()),
        )
        .await;
    assert_eq!(place["state"], "waiting", "{place}");
}

#[tokio::test]
async fn a_sigterm_right_after_a_hand_off_never_leaves_a_201_without_its_lease() {
    let mut pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let (_, holder) = pair.post(&a, "/locks/restart", HOLD).await;
    let waiter = pair.waiter(&b, "/locks/restart", WAIT);
    pair.until_waiting("/locks/restart", 1).await;

    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let stopped = pair.b.terminate().expect("B ran");
    assert!(stopped.success(), "B stopped with {stopped:?}");

    match waiter.await.expect("waiter") {
        Some(told) if told.status == 201 => {
            // Told 201: the lease outlives every unconfirmed grant's window.
            let path = lease_path("locks", &told.body);
            tokio::time::sleep(Duration::from_secs(4)).await;
            assert_eq!(pair.get(&a, &path).await.0, 200, "the 201's lease is gone");
            let (other, _) = pair.post(&a, "/locks/restart", r#"{"ttl_ms": 1000}"#).await;
            assert_eq!(other, 409, "a second holder was told 201");
        }
        told => {
            // Not told 201 (503 shutting-down, or the connection closed):
            // the grant goes back, and the lock is free again soon.
            if let Some(told) = &told {
                assert_eq!(told.status, 503, "{}", told.body);
            }
            let (status, body) = pair
                .post(
                    &a,
                    "/locks/restart",
                    r#"{"ttl_ms": 1000, "wait_ms": 10000}"#,
                )
                .await;
            assert_eq!(status, 201, "{body}");
        }
    }
}

#[tokio::test]
async fn waiters_pruned_while_their_instance_was_paused_are_served_after_it_resumes() {
    let pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let (_, holder) = pair.post(&a, "/locks/pruned", HOLD).await;
    let sent = Instant::now();
    let waiter = pair.waiter(&b, "/locks/pruned", WAIT);
    pair.until_waiting("/locks/pruned", 1).await;

    // B looks dead to Redis after 3 s without a keep-alive: A's status call
    // takes its waiter out of the line.
    pair.b.pause();
    tokio::time::sleep(Duration::from_secs(4)).await;
    pair.until_waiting("/locks/pruned", 0).await;
    pair.b.resume();
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);

    // The waiter learns it was dropped, rejoins, and gets the free lock
    // long before its 30 s wait runs out.
    served_long_before_its_wait_ran_out(waiter, sent).await;
}

#[tokio::test]
async fn a_waiter_whose_queue_key_was_lost_gets_the_free_lock() {
    let pair = Pair::start();
    let a = pair.a.base();
    let (_, holder) = pair.post(&a, "/locks/lost", HOLD).await;
    let sent = Instant::now();
    let waiter = pair.waiter(&a, "/locks/lost", WAIT);
    pair.until_waiting("/locks/lost", 1).await;

    let mut conn = pair.redis.conn();
    let deleted: u32 = redis::cmd("DEL")
        .arg(pair.key("lock:lost", "queue"))
        .query(&mut conn)
        .expect("DEL");
    assert_eq!(deleted, 1);
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);

    served_long_before_its_wait_ran_out(waiter, sent).await;
}

#[tokio::test]
async fn a_release_whose_client_hangs_up_mid_call_still_hands_the_lock_on() {
    // A call budget longer than the stall: the release's call is in flight
    // (behind DEBUG SLEEP), not failed, when its client hangs up and when
    // the request's own deadline drops it, whichever comes first.
    let pair = Pair::start_with(&[
        ("BATON_REDIS_TIMEOUT_MS", "5000"),
        ("BATON_REQUEST_TIMEOUT_MS", "500"),
    ]);
    let a = pair.a.base();
    let (_, holder) = pair.post(&a, "/locks/hangup", HOLD).await;
    let sent = Instant::now();
    let waiter = pair.waiter(&a, "/locks/hangup", WAIT);
    pair.until_waiting("/locks/hangup", 1).await;

    let stalled = stall(&pair.redis, 1.5);
    tokio::time::sleep(Duration::from_millis(50)).await;
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(300))
        .build()
        .expect("client");
    let hung_up = impatient
        .delete(format!("{a}{}", lease_path("locks", &holder)))
        .send()
        .await;
    assert!(
        hung_up.is_err(),
        "the release was answered during the stall"
    );
    stalled.join().expect("stall");

    // The release ran once Redis woke, and granted the waiter on the same
    // instance: the waiter is told at once, not at the end of its wait.
    served_long_before_its_wait_ran_out(waiter, sent).await;
    assert_eq!(pair.get(&a, "/locks/hangup").await.1["held"], true);
}

#[tokio::test]
async fn the_fencing_guard_refuses_before_anything_changes() {
    let pair = Pair::start();
    let a = pair.a.base();
    let hold = r#"{"limit": 2, "ttl_ms": 60000}"#;
    let wait = r#"{"limit": 2, "ttl_ms": 60000, "wait_ms": 30000}"#;
    for _ in 0..2 {
        assert_eq!(pair.post(&a, "/semaphores/guarded", hold).await.0, 201);
    }
    let first = pair.waiter(&a, "/semaphores/guarded", wait);
    pair.until_waiting("/semaphores/guarded", 1).await;
    let second = pair.waiter(&a, "/semaphores/guarded", wait);
    pair.until_waiting("/semaphores/guarded", 2).await;

    // Tokens near 2^53, where Lua numbers stop being exact.
    let owners = pair.key("sem:guarded", "owners");
    let mut conn = pair.redis.conn();
    let fence: u64 = redis::cmd("HGET")
        .arg(&owners)
        .arg("fence")
        .query(&mut conn)
        .expect("fence");
    redis::cmd("HSET")
        .arg(&owners)
        .arg("fence")
        .arg(9_007_199_254_740_950_u64)
        .query::<()>(&mut conn)
        .expect("HSET");

    let forced = pair
        .call(
            reqwest::Method::DELETE,
            format!("{a}/semaphores/guarded"),
            "",
        )
        .await;
    assert_eq!(forced.0, 500, "{}", forced.1);
    let (_, status) = pair.get(&a, "/semaphores/guarded").await;
    assert_eq!(
        status["holders"], 2,
        "the refusal changed the holders: {status}"
    );
    assert_eq!(
        status["waiting"], 2,
        "the refusal changed the line: {status}"
    );

    // With the counter back where it was, the same call ends both leases
    // and both waiters are served.
    redis::cmd("HSET")
        .arg(&owners)
        .arg("fence")
        .arg(fence)
        .query::<()>(&mut conn)
        .expect("HSET");
    assert_eq!(pair.delete(&a, "/semaphores/guarded").await, 204);
    for waiter in [first, second] {
        let waited = waiter.await.expect("waiter").expect("an answer");
        assert_eq!(waited.status, 201, "{}", waited.body);
    }
}

/// A claim's refresh that fails half-way (one lease refreshed, the next one's
/// call failing) answers an error and leaves every lease held, as the holder
/// was last told: the leases are the holder's, not the failed call's to give
/// back. (The chaos run found it with a Redis stall between two refreshes;
/// here the second name's lease is made unreadable, which fails its call
/// every time.)
#[tokio::test]
async fn a_claim_refresh_that_fails_half_way_gives_back_nothing() {
    let pair = Pair::start();
    let a = pair.a.base();
    let (status, claim) = pair
        .post(
            &a,
            "/claims",
            r#"{"locks": [{"name": "cr-1"}, {"name": "cr-2"}], "ttl_ms": 60000}"#,
        )
        .await;
    assert_eq!(status, 201, "{claim}");
    let id = claim["id"].as_str().expect("claim id").to_owned();
    let lease_of = |name: &str| {
        claim["leases"]
            .as_array()
            .expect("leases")
            .iter()
            .find(|l| l["name"] == name)
            .cloned()
            .expect("a lease of the name")
    };
    let (first, second) = (lease_of("cr-1"), lease_of("cr-2"));
    let mut conn = pair.redis.conn();
    let owners = pair.key("lock:cr-2", "owners");
    let field = second["id"].as_str().expect("lease id");
    let _: () = redis::cmd("HSET")
        .arg(&owners)
        .arg(field)
        .arg("not a lease")
        .query(&mut conn)
        .expect("HSET");
    // The solo field, when the lease is the name's only one.
    let _: () = redis::cmd("HSET")
        .arg(&owners)
        .arg("solo")
        .arg("not a lease")
        .query(&mut conn)
        .expect("HSET");

    let (status, body) = pair
        .call(
            reqwest::Method::PATCH,
            format!("{a}/claims/{id}"),
            r#"{"ttl_ms": 60000}"#,
        )
        .await;
    assert!(status >= 500, "{status} {body}");

    // Whatever the failed call did, the first lease is still held.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let (held, body) = pair.get(&a, &lease_path("locks", &first)).await;
    assert_eq!(held, 200, "the first lease was given back: {body}");
    let (other, body) = pair.post(&a, "/locks/cr-1", HOLD).await;
    assert_eq!(other, 409, "another client took cr-1: {body}");
}

/// The event names of a holder's stream (`event: NAME` lines), read until
/// `last` comes or `within` passes.
async fn stream_events(
    response: &mut reqwest::Response,
    last: &str,
    within: Duration,
) -> Vec<String> {
    let deadline = Instant::now() + within;
    let (mut text, mut names) = (String::new(), Vec::new());
    while Instant::now() < deadline {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(Ok(Some(chunk))) = tokio::time::timeout(left, response.chunk()).await else {
            break;
        };
        text.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = text.find("\n\n") {
            let event: String = text.drain(..end + 2).collect();
            if let Some(name) = event.lines().find_map(|l| l.strip_prefix("event: ")) {
                let data = event.lines().find_map(|l| l.strip_prefix("data: "));
                let reason = data
                    .and_then(|d| serde_json::from_str::<Value>(d).ok())
                    .and_then(|d| d["reason"].as_str().map(str::to_owned));
                // `lost` with its reason: `lost:expired`.
                names.push(match reason {
                    Some(reason) => format!("{}:{reason}", name.trim()),
                    None => name.trim().to_owned(),
                });
            }
        }
        if names
            .last()
            .is_some_and(|n| n.split(':').next() == Some(last))
        {
            break;
        }
    }
    names
}

/// The holder's stream of `lease` (a lock's) opened through `base`, read
/// up to its first event, `held`.
async fn held_stream(pair: &Pair, base: &str, lease: &Value) -> reqwest::Response {
    let mut stream = pair
        .http
        .get(format!("{base}{}/events", lease_path("locks", lease)))
        .header("accept", "text/event-stream")
        .send()
        .await
        .expect("stream");
    assert_eq!(stream.status(), 200);
    let first = stream_events(&mut stream, "held", Duration::from_secs(10)).await;
    assert_eq!(first, ["held"]);
    stream
}

/// A holder's stream whose instance was paused across a refresh and past the
/// lease's expiry says neither `refreshed` nor `expiring` for a lease already
/// gone when it resumes: `lost` (`expired`), at once.
#[tokio::test]
async fn a_stream_paused_across_a_refresh_says_lost_not_refreshed_for_a_lease_gone() {
    let pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let (status, lease) = pair
        .post(&a, "/locks/hs-paused", r#"{"ttl_ms": 3000}"#)
        .await;
    assert_eq!(status, 201, "{lease}");
    let mut stream = held_stream(&pair, &b, &lease).await;

    pair.b.pause();
    let (status, body) = pair
        .call(
            reqwest::Method::PATCH,
            format!("{a}{}", lease_path("locks", &lease)),
            r#"{"ttl_ms": 1000}"#,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    pair.b.resume();

    let events = stream_events(&mut stream, "lost", Duration::from_secs(15)).await;
    assert_eq!(
        events,
        ["lost:expired"],
        "after the resume the lease was long gone"
    );
}

/// A holder's stream paused across a refresh that shortened the lease, and
/// resumed after the lease expired but before its old `expiring` point
/// passed far: `expiring` is due at once, with the refresh's word still on
/// its way. It says only what Redis confirms (`lost`), never `expiring` for a
/// lease gone (the chaos run's `[Stream]`, seed 1796533589279354759).
#[tokio::test]
async fn a_stream_resumed_after_a_shortening_refresh_never_says_expiring_for_a_lease_gone() {
    let pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let (status, lease) = pair
        .post(&a, "/locks/hs-shortened", r#"{"ttl_ms": 3000}"#)
        .await;
    assert_eq!(status, 201, "{lease}");
    let mut stream = held_stream(&pair, &b, &lease).await;

    pair.b.pause();
    let (status, body) = pair
        .call(
            reqwest::Method::PATCH,
            format!("{a}{}", lease_path("locks", &lease)),
            r#"{"ttl_ms": 1000}"#,
        )
        .await;
    assert_eq!(status, 200, "{body}");
    // Past the new expiry and the old `expiring` point (2 s after the
    // grant), short of the old expiry (3 s).
    tokio::time::sleep(Duration::from_millis(2200)).await;
    pair.b.resume();

    let events = stream_events(&mut stream, "lost", Duration::from_secs(15)).await;
    assert_eq!(
        events,
        ["lost:expired"],
        "the lease was gone at the resume; nothing but its loss is true"
    );
}

/// A holder's stream whose lease Redis lost with its data (a restart without
/// persistence) ends `lost`, `expired`: nobody force-released it.
#[tokio::test]
async fn a_stream_on_a_lease_lost_with_redis_s_data_says_expired() {
    let mut pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let (status, lease) = pair
        .post(&a, "/locks/hs-lost", r#"{"ttl_ms": 60000}"#)
        .await;
    assert_eq!(status, 201, "{lease}");
    let mut stream = held_stream(&pair, &b, &lease).await;

    pair.redis.restart();
    let events = stream_events(&mut stream, "lost", Duration::from_secs(30)).await;
    assert_eq!(events, ["lost:expired"]);
}

/// Calls that give up long before a stall of [`STALL`] ends: a waiting
/// acquire's first call and its retries are all sent during the stall and
/// all run, in the order sent, once Redis wakes.
const SHORT_CALLS: &[(&str, &str)] = &[("BATON_REDIS_TIMEOUT_MS", "500")];
const STALL: f64 = 3.0;

/// Acquires and releases `path` once through `base`, so that its keys exist
/// and the next acquisition takes the fast path (the name's solo lease).
async fn use_once(pair: &Pair, base: &str, path: &str, body: &str) {
    let (status, lease) = pair.post(base, path, body).await;
    assert_eq!(status, 201, "{lease}");
    let kind = path.split('/').nth(1).expect("kind");
    assert_eq!(pair.delete(base, &lease_path(kind, &lease)).await, 204);
}

/// Stalls Redis for [`STALL`] and waits until the stall has begun.
async fn stall_now(pair: &Pair) -> std::thread::JoinHandle<()> {
    let stalled = stall(&pair.redis, STALL);
    tokio::time::sleep(Duration::from_millis(100)).await;
    stalled
}

#[tokio::test]
async fn a_waiting_lock_acquire_retried_through_a_redis_stall_finds_its_own_lease() {
    let pair = Pair::start_with(SHORT_CALLS);
    let (a, b) = (pair.a.base(), pair.b.base());
    use_once(&pair, &a, "/locks/retried", HOLD).await;

    // The first call takes the free lock (its reply is lost: the call timed
    // out); the retries run after it, with the same waiter.
    let stalled = stall_now(&pair).await;
    let (status, lease) = pair.post(&a, "/locks/retried", WAIT).await;
    stalled.join().expect("stall");
    assert_eq!(status, 201, "{lease}");

    // Nothing queued behind the lease: the retries found it.
    let (_, shown) = pair.get(&a, "/locks/retried").await;
    assert_eq!(shown["held"], true, "{shown}");
    assert_eq!(
        shown["waiting"], 0,
        "the acquisition queued behind its own lease: {shown}"
    );
    assert_eq!(pair.get(&a, &lease_path("locks", &lease)).await.0, 200);

    // A real waiter (on B) is next, and the release hands the lock to it.
    let sent = Instant::now();
    let waiter = pair.waiter(&b, "/locks/retried", WAIT);
    pair.until_waiting("/locks/retried", 1).await;
    assert_eq!(pair.delete(&a, &lease_path("locks", &lease)).await, 204);
    let served = waiter.await.expect("waiter").expect("an answer");
    assert_eq!(served.status, 201, "{}", served.body);
    assert!(served.at < sent + Duration::from_secs(20));
    assert_eq!(
        pair.delete(&b, &lease_path("locks", &served.body)).await,
        204
    );
    let (_, shown) = pair.get(&a, "/locks/retried").await;
    assert_eq!(shown["held"], false, "a lease nobody holds: {shown}");
    assert_eq!(shown["waiting"], 0, "{shown}");
}

#[tokio::test]
async fn a_waiting_semaphore_acquire_retried_through_a_redis_stall_counts_its_lease_once() {
    let pair = Pair::start_with(SHORT_CALLS);
    let (a, b) = (pair.a.base(), pair.b.base());
    let hold = r#"{"limit": 2, "ttl_ms": 60000}"#;
    let wait = r#"{"limit": 2, "ttl_ms": 60000, "wait_ms": 30000}"#;
    use_once(&pair, &a, "/semaphores/retried", hold).await;

    let stalled = stall_now(&pair).await;
    let (status, lease) = pair.post(&a, "/semaphores/retried", wait).await;
    stalled.join().expect("stall");
    assert_eq!(status, 201, "{lease}");

    let (_, shown) = pair.get(&a, "/semaphores/retried").await;
    assert_eq!(shown["holders"], 1, "{shown}");
    assert_eq!(shown["used"], 1, "one lease counted twice: {shown}");
    // The second of the limit is free for someone else.
    let (second, other) = pair.post(&b, "/semaphores/retried", hold).await;
    assert_eq!(second, 201, "{other}");

    for (base, lease) in [(&a, &lease), (&b, &other)] {
        assert_eq!(
            pair.delete(base, &lease_path("semaphores", lease)).await,
            204
        );
    }
    let (_, shown) = pair.get(&a, "/semaphores/retried").await;
    assert_eq!(shown["holders"], 0, "{shown}");
    // Every permit is free again.
    let whole = r#"{"limit": 2, "permits": 2, "ttl_ms": 60000}"#;
    let (status, lease) = pair.post(&b, "/semaphores/retried", whole).await;
    assert_eq!(status, 201, "{lease}");
}

#[tokio::test]
async fn a_client_that_hangs_up_mid_stall_after_its_retry_leaves_no_lease() {
    let pair = Pair::start_with(SHORT_CALLS);
    let (a, b) = (pair.a.base(), pair.b.base());
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(2500))
        .build()
        .expect("client");
    for (kind, hold, wait) in [
        ("locks", HOLD, WAIT),
        (
            "semaphores",
            r#"{"limit": 1, "ttl_ms": 60000}"#,
            r#"{"limit": 1, "ttl_ms": 60000, "wait_ms": 30000}"#,
        ),
    ] {
        let path = format!("/{kind}/abandoned");
        use_once(&pair, &a, &path, hold).await;

        // The client hangs up after the first call and a retry were sent,
        // before Redis wakes and runs them.
        let stalled = stall_now(&pair).await;
        let hung_up = impatient.post(format!("{a}{path}")).body(wait).send().await;
        assert!(
            hung_up.is_err(),
            "{kind}: answered during the stall: {hung_up:?}"
        );
        stalled.join().expect("stall");

        // What the abandoned acquisition took is given back once Redis
        // answers again: nothing held, nobody in line.
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let (_, shown) = pair.get(&a, &path).await;
            let free = shown["waiting"] == 0
                && if kind == "locks" {
                    shown["held"] == false
                } else {
                    shown["holders"] == 0
                };
            if free {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{kind}: the abandoned acquisition left {shown}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let (status, lease) = pair.post(&b, &path, hold).await;
        assert_eq!(status, 201, "{kind}: {lease}");
        assert_eq!(pair.delete(&b, &lease_path(kind, &lease)).await, 204);
        // The history lists the two leases that were told, not the one
        // taken for a client that had gone.
        let (_, history) = pair.get(&a, &format!("{path}/history")).await;
        let entries = history["entries"].as_array().expect("entries");
        assert_eq!(entries.len(), 2, "{kind}: {history}");
        assert_eq!(
            entries[0]["fencing_token"], lease["fencing_token"],
            "{kind}: {history}"
        );
    }
}

#[tokio::test]
async fn waiters_pruned_with_their_paused_instance_leave_the_line_s_sums_and_rejoin_them() {
    let pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/semaphores/pruned-sums";
    let (status, _) = pair
        .post(&a, path, r#"{"limit": 4, "permits": 4, "ttl_ms": 60000}"#)
        .await;
    assert_eq!(status, 201);
    let wait = |permits: u64| {
        format!(r#"{{"limit": 4, "permits": {permits}, "ttl_ms": 60000, "wait_ms": 30000}}"#)
    };
    let mut waiters = Vec::new();
    for (n, (base, permits)) in [(&a, 1), (&b, 3), (&a, 2), (&b, 4)].into_iter().enumerate() {
        waiters.push(pair.waiter(base, path, &wait(permits)));
        pair.until_waiting(path, n as u64 + 1).await;
    }
    let sums = || pair.redis.line_sums(&pair.prefix, "sem:pruned-sums");
    assert_eq!(sums(), ((4, 10), (4, 10)));

    // B looks dead after 3 s without a keep-alive: a status call through A
    // takes its waiters out of the line, and out of the line's sums.
    pair.b.pause();
    tokio::time::sleep(Duration::from_secs(4)).await;
    pair.until_waiting(path, 2).await;
    assert_eq!(sums(), ((2, 3), (2, 3)), "after the prune");

    // B's waiters learn it once B runs again, and rejoin.
    pair.b.resume();
    pair.until_waiting(path, 4).await;
    assert_eq!(sums(), ((4, 10), (4, 10)), "after the rejoin");
    assert!(waiters.iter().all(|w| !w.is_finished()));
}

#[tokio::test]
async fn waiters_of_two_instances_all_rejoin_a_line_whose_queue_key_was_lost() {
    let pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/locks/lost-both";
    let (_, holder) = pair.post(&a, path, HOLD).await;
    let mut waiters = Vec::new();
    for (n, base) in [&a, &b, &a, &b, &b].into_iter().enumerate() {
        waiters.push(pair.waiter(base, path, WAIT));
        pair.until_waiting(path, n as u64 + 1).await;
    }

    // The queue's key is lost while A is paused (for less than the 3 s after
    // which it would look dead): B's waiters rejoin first, so the line is
    // not empty when A looks again, though none of A's waiters is in it.
    pair.a.pause();
    let mut conn = pair.redis.conn();
    let deleted: u32 = redis::cmd("DEL")
        .arg(pair.key("lock:lost-both", "queue"))
        .query(&mut conn)
        .expect("DEL");
    assert_eq!(deleted, 1);
    let deadline = Instant::now() + Duration::from_secs(10);
    while pair.get(&b, path).await.1["waiting"] != 3 {
        assert!(Instant::now() < deadline, "B's waiters never rejoined");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    pair.a.resume();

    // A learns that its waiters are missing, and they rejoin too; then
    // every one is served in turn, each released as soon as it is told.
    pair.until_waiting(path, 5).await;
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    let deadline = Instant::now() + Duration::from_secs(20);
    while !waiters.is_empty() {
        let Some(next) = waiters.iter().position(JoinHandle::is_finished) else {
            assert!(Instant::now() < deadline, "{} never served", waiters.len());
            tokio::time::sleep(Duration::from_millis(10)).await;
            continue;
        };
        let served = waiters
            .remove(next)
            .await
            .expect("waiter")
            .expect("an answer");
        assert_eq!(served.status, 201, "{}", served.body);
        assert_eq!(
            pair.delete(&a, &lease_path("locks", &served.body)).await,
            204
        );
    }
}

/// A freeze whose window ends while the instance its waiters wait on is
/// paused (SIGSTOP): nothing is granted inside the window (the holder left
/// inside it), and once the instance runs again the line is served in the
/// order it joined.
#[tokio::test]
async fn a_freeze_that_ends_while_its_instance_is_paused_serves_the_line_in_order_afterwards() {
    let pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/semaphores/thaw";
    let (status, holder) = pair
        .post(&a, path, r#"{"limit": 1, "ttl_ms": 60000}"#)
        .await;
    assert_eq!(status, 201);
    let until = SystemTime::now() + Duration::from_millis(3_500);
    let body = serde_json::json!({
        "match": "thaw",
        "until": humantime::format_rfc3339_millis(until).to_string(),
    });
    let (status, made) = pair.post(&b, "/freezes", &body.to_string()).await;
    assert_eq!(status, 201, "{made}");
    let deadline = Instant::now() + Duration::from_secs(5);
    // (A probe that beats the freeze to A does not fit beside the holder:
    // refused, it takes no lease.)
    while pair.post(&a, path, r#"{"limit": 1}"#).await.0 != 423 {
        assert!(Instant::now() < deadline, "A never applied the freeze");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let wait = r#"{"limit": 3, "ttl_ms": 60000, "wait_ms": 30000}"#;
    let mut waiters = Vec::new();
    for n in 1..=3 {
        waiters.push(pair.waiter(&a, path, wait));
        pair.until_waiting(path, n).await;
    }
    // The holder leaves inside the window: nobody may be granted.
    assert_eq!(
        pair.delete(&a, &lease_path("semaphores", &holder)).await,
        204
    );

    // A sleeps across the end of the window.
    let pause_at = until - Duration::from_millis(1_000);
    if let Ok(left) = pause_at.duration_since(SystemTime::now()) {
        tokio::time::sleep(left).await;
    }
    pair.a.pause();
    while SystemTime::now() < until - Duration::from_millis(100) {
        let (_, status) = pair.get(&b, path).await;
        assert_eq!(status["holders"], 0, "granted inside the window: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    pair.a.resume();

    let mut tokens = Vec::new();
    for waiter in waiters {
        let waited = waiter.await.expect("waiter").expect("an answer");
        assert_eq!(waited.status, 201, "{}", waited.body);
        let granted = expires_at(&waited.body)
            - Duration::from_millis(waited.body["ttl_ms"].as_u64().expect("ttl_ms"));
        assert!(
            granted >= until,
            "granted inside the window: {}",
            waited.body
        );
        tokens.push(waited.body["fencing_token"].as_u64().expect("token"));
    }
    assert!(
        tokens.windows(2).all(|t| t[0] < t[1]),
        "served out of line order: {tokens:?}"
    );
}

/// A claim that holds its first name while it waits for its second, when
/// Redis restarts without its data: the first lease is gone, and the claim
/// must not answer 201 with it. It gives back what it holds and starts over,
/// so what it is told at last is held, and nobody else gets its names.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_claim_never_answers_201_for_a_lease_redis_lost_while_it_waited() {
    let mut pair = Pair::start();
    let a = pair.a.base();
    let (status, holder) = pair.post(&a, "/locks/claimed-2", HOLD).await;
    assert_eq!(status, 201, "{holder}");
    let body = r#"{"locks": [{"name": "claimed-1"}, {"name": "claimed-2"}],
        "ttl_ms": 30000, "wait_ms": 30000}"#;
    let claim = pair.waiter(&a, "/claims", body);
    pair.until_waiting("/locks/claimed-2", 1).await;
    assert_eq!(pair.get(&a, "/locks/claimed-1").await.1["held"], true);

    // Redis restarts with nothing: claimed-1's lease is gone, and so is the
    // holder of claimed-2; the claim's waiter rejoins and gets claimed-2.
    tokio::task::block_in_place(|| pair.redis.restart());

    let told = claim.await.expect("claim").expect("an answer");
    assert_eq!(told.status, 201, "{}", told.body);
    for lease in told.body["leases"].as_array().expect("leases") {
        let (held, _) = pair.get(&a, &lease_path("locks", lease)).await;
        assert_eq!(
            held, 200,
            "the claim was told 201 for a lost lease: {lease}"
        );
        let name = lease["name"].as_str().expect("name");
        let (other, body) = pair
            .post(
                &pair.b.base(),
                &format!("/locks/{name}"),
                r#"{"ttl_ms": 1000}"#,
            )
            .await;
        assert_eq!(other, 409, "a second holder of {name} was told 201: {body}");
    }
}

/// A freeze on `pattern` made through `base`, from now until `until`.
async fn freeze_until(pair: &Pair, base: &str, pattern: &str, until: SystemTime) {
    let body = serde_json::json!({
        "match": pattern,
        "until": humantime::format_rfc3339_millis(until).to_string(),
    });
    let (status, made) = pair.post(base, "/freezes", &body.to_string()).await;
    assert_eq!(status, 201, "{made}");
}

/// An instance paused (SIGSTOP) while a freeze is made through another
/// resumes with a list older than the freeze: inside the window it grants
/// neither the waiters it had queued before the pause nor a newcomer that
/// does not wait (sent while it was stopped, so it is the first thing it
/// hears); they are served when the window ends.
#[tokio::test]
async fn an_instance_paused_while_a_freeze_is_made_grants_nothing_inside_its_window() {
    let pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/locks/stale-list";
    let (status, holder) = pair.post(&a, path, HOLD).await;
    assert_eq!(status, 201);
    let mut waiters = Vec::new();
    for n in 1..=3 {
        waiters.push(pair.waiter(&b, path, WAIT));
        pair.until_waiting(path, n).await;
    }

    // B stops; the freeze is made through A, and the holder leaves inside
    // its window (A knows it: nothing is granted then).
    pair.b.pause();
    let paused = Instant::now();
    let until = SystemTime::now() + Duration::from_millis(5_000);
    freeze_until(&pair, &a, "stale-list*", until).await;
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    let newcomers: Vec<_> = (1..=3)
        .map(|n| pair.waiter(&b, &format!("{path}-new-{n}"), HOLD))
        .collect();
    // Longer than a list stays fresh, shorter than B stays alive in Redis's
    // lines (its waiters are not pruned).
    tokio::time::sleep_until((paused + Duration::from_millis(1_800)).into()).await;
    pair.b.resume();

    for newcomer in newcomers {
        let answered = newcomer.await.expect("newcomer").expect("an answer");
        assert_ne!(
            answered.status, 201,
            "a newcomer was granted inside the window: {}",
            answered.body
        );
        assert_eq!(answered.status, 423, "{}", answered.body);
        assert_eq!(
            answered.body["type"]
                .as_str()
                .map(|t| t.ends_with("frozen")),
            Some(true),
            "{}",
            answered.body
        );
    }
    while SystemTime::now() < until - Duration::from_millis(200) {
        let (_, status) = pair.get(&a, path).await;
        assert_eq!(status["held"], false, "granted inside the window: {status}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    for waiter in waiters {
        let waited = waiter.await.expect("waiter").expect("an answer");
        assert_eq!(waited.status, 201, "{}", waited.body);
        let granted = expires_at(&waited.body)
            - Duration::from_millis(waited.body["ttl_ms"].as_u64().expect("ttl_ms"));
        assert!(
            granted >= until,
            "a waiter was granted inside the window: {}",
            waited.body
        );
        assert_eq!(
            pair.delete(&b, &lease_path("locks", &waited.body)).await,
            204
        );
    }
}

/// An instance started while Redis is down has no list of freezes: when
/// Redis comes back (with its freezes), no request it serves is granted on
/// a frozen name before it has read the list (503 until then, 423 after).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_instance_started_while_redis_is_down_never_grants_a_frozen_name() {
    let mut redis = RedisServer::start_persistent();
    let prefix = unique_prefix();
    let url = redis.url();
    let env = [
        ("BATON_REDIS_URL", url.as_str()),
        ("BATON_KEY_PREFIX", prefix.as_str()),
    ];
    install_crypto();
    let http = reqwest::Client::new();
    let first = Instance::start(&env);
    let until = SystemTime::now() + Duration::from_secs(60);
    let body = serde_json::json!({
        "match": "cold-*",
        "until": humantime::format_rfc3339_millis(until).to_string(),
    });
    let made = http
        .post(format!("{}/freezes", first.base()))
        .body(body.to_string())
        .send()
        .await
        .expect("baton answers");
    assert_eq!(made.status().as_u16(), 201);
    drop(first);

    tokio::task::block_in_place(|| redis.kill());
    let late = Instance::start(&env);
    let base = late.base();
    // Requests on frozen names, one after another from a few clients, from
    // before Redis returns until well after.
    let stop = Instant::now() + Duration::from_secs(4);
    let clients: Vec<_> = (0..4)
        .map(|client| {
            let (http, base) = (http.clone(), base.clone());
            tokio::spawn(async move {
                let mut answers = Vec::new();
                let mut n = 0;
                while Instant::now() < stop {
                    n += 1;
                    let answer = http
                        .post(format!("{base}/locks/cold-{client}-{n}"))
                        .body(HOLD)
                        .send()
                        .await;
                    if let Ok(answer) = answer {
                        let status = answer.status().as_u16();
                        answers.push((status, answer.text().await.unwrap_or_default()));
                    }
                    tokio::time::sleep(Duration::from_millis(5)).await;
                }
                answers
            })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(500)).await;
    tokio::task::block_in_place(|| redis.restart());
    let mut frozen = 0;
    for client in clients {
        for (status, body) in client.await.expect("client") {
            assert_ne!(status, 201, "granted on a frozen name: {body}");
            assert!(status == 423 || status == 503, "{status}: {body}");
            frozen += usize::from(status == 423);
        }
    }
    assert!(frozen > 0, "the instance never read the list of freezes");
}

/// A stall of Redis (DEBUG SLEEP for 3 s, past the 3 s after which an
/// instance not heard of is presumed dead) is no sign that an instance
/// died: no keep-alive could reach Redis meanwhile, so nobody leaves the
/// line, and the waiters of both instances, of two priorities, are served
/// afterwards in the order they joined.
#[tokio::test]
async fn a_redis_stall_keeps_the_line_in_order_across_instances_and_priorities() {
    let pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/locks/stall-order";
    let (status, holder) = pair.post(&a, path, HOLD).await;
    assert_eq!(status, 201, "{holder}");
    let joins = [
        ("b1", &b, 0),
        ("a2", &a, 0),
        ("b3", &b, 5),
        ("a4", &a, 5),
        ("b5", &b, 0),
        ("a6", &a, 0),
        ("a7", &a, 5),
        ("b8", &b, 5),
    ];
    let mut waiters = Vec::new();
    for (n, (owner, base, priority)) in joins.into_iter().enumerate() {
        let body = format!(
            r#"{{"ttl_ms": 60000, "wait_ms": 60000, "owner": "{owner}", "priority": {priority}}}"#
        );
        waiters.push((owner, pair.waiter(base, path, &body)));
        pair.until_waiting(path, n as u64 + 1).await;
    }
    let order = ["b3", "a4", "a7", "b8", "b1", "a2", "b5", "a6"];
    assert_eq!(line(&pair.get(&a, path).await.1), order);

    stall(&pair.redis, 3.0).join().expect("stall");
    // Every instance's keep-alive reaches Redis again (and a waiter that
    // was dropped would have rejoined by then).
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert_eq!(
        line(&pair.get(&a, path).await.1),
        order,
        "the line after the stall"
    );

    // Each one released as soon as it is told: served in joining order.
    let served = served_in_turn(&pair, holder, waiters).await;
    assert_eq!(served, order, "the order served after the stall");
}

/// The owners of the waiters a status shows, in line order.
fn line(status: &Value) -> Vec<String> {
    status["waiters"]
        .as_array()
        .expect("waiters")
        .iter()
        .map(|w| w["owner"].as_str().expect("owner").to_owned())
        .collect()
}

/// Releases `lease` (of a lock), then each lease granted to one of
/// `waiters` as soon as it is told: the owners, in the order served.
async fn served_in_turn(
    pair: &Pair,
    mut lease: Value,
    mut waiters: Vec<(&'static str, JoinHandle<Option<Waited>>)>,
) -> Vec<&'static str> {
    let mut served = Vec::new();
    while !waiters.is_empty() {
        assert_eq!(
            pair.delete(&pair.a.base(), &lease_path("locks", &lease))
                .await,
            204
        );
        let deadline = Instant::now() + Duration::from_secs(10);
        let next = loop {
            if let Some(next) = waiters.iter().position(|(_, w)| w.is_finished()) {
                break next;
            }
            assert!(Instant::now() < deadline, "nobody served after {served:?}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        };
        let (owner, waiter) = waiters.remove(next);
        let told = waiter.await.expect("waiter").expect("an answer");
        assert_eq!(told.status, 201, "{owner}: {}", told.body);
        served.push(owner);
        lease = told.body;
    }
    served
}

/// What a stall forgives is only the time Redis did not serve: an instance
/// killed while Redis stalls still leaves the line within seconds of the
/// stall's end (its waiter keeps only what it had left of its 3 s when the
/// stall began), and the waiter behind it, on the other instance, is served.
#[tokio::test]
async fn an_instance_killed_during_a_redis_stall_still_leaves_the_line_soon_after() {
    let mut pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/locks/stall-kill";
    let (_, holder) = pair.post(&a, path, HOLD).await;
    let _doomed = pair.waiter(&b, path, WAIT);
    pair.until_waiting(path, 1).await;
    let sent = Instant::now();
    let behind = pair.waiter(&a, path, WAIT);
    pair.until_waiting(path, 2).await;

    let stalled = stall(&pair.redis, 3.0);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    pair.b.kill();
    stalled.join().expect("stall");
    let ended = Instant::now();

    // Within 5 s of the stall's end, only the waiter on A is in line.
    loop {
        let (_, status) = pair.get(&a, path).await;
        if status["waiting"] == 1 {
            break;
        }
        assert!(
            ended.elapsed() < Duration::from_secs(5),
            "the killed instance's waiter is still in line: {status}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    served_long_before_its_wait_ran_out(behind, sent).await;
}

/// A waiter dropped from the line anyway (its instance paused past the 3 s
/// after which it looks dead) rejoins in the place it had, not at the back:
/// once its instance runs again, the line is in the order it joined.
#[tokio::test]
async fn waiters_pruned_while_their_instance_was_paused_rejoin_in_their_places() {
    let pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/locks/pruned-places";
    let (_, holder) = pair.post(&a, path, HOLD).await;
    let joins = [
        ("b1", &b, 0),
        ("a2", &a, 0),
        ("b3", &b, 5),
        ("a4", &a, 5),
        ("b5", &b, 0),
    ];
    let mut waiters = Vec::new();
    for (n, (owner, base, priority)) in joins.into_iter().enumerate() {
        let body = format!(
            r#"{{"ttl_ms": 60000, "wait_ms": 60000, "owner": "{owner}", "priority": {priority}}}"#
        );
        waiters.push((owner, pair.waiter(base, path, &body)));
        pair.until_waiting(path, n as u64 + 1).await;
    }
    let order = ["b3", "a4", "b1", "a2", "b5"];
    assert_eq!(line(&pair.get(&a, path).await.1), order);

    // B looks dead after 3 s without a keep-alive: A's status calls take its
    // waiters out of the line.
    pair.b.pause();
    tokio::time::sleep(Duration::from_secs(4)).await;
    pair.until_waiting(path, 2).await;
    assert_eq!(line(&pair.get(&a, path).await.1), ["a4", "a2"]);

    // B runs again: its waiters learn it, and rejoin where they were.
    pair.b.resume();
    pair.until_waiting(path, 5).await;
    assert_eq!(
        line(&pair.get(&a, path).await.1),
        order,
        "the line after the rejoin"
    );
    let served = served_in_turn(&pair, holder, waiters).await;
    assert_eq!(served, order);
}

/// A silence is forgiven once, not for ever: an instance killed on a node
/// that then runs no call for seconds (nothing else waits there) looks, to
/// the first call after the silence, as if Redis had stalled; its waiter
/// still leaves the line within 3 s of that call (5 s here, a margin),
/// however the calls come.
#[tokio::test]
async fn an_instance_killed_on_an_idle_node_leaves_the_line_soon_after_the_next_call() {
    let mut pair = Pair::start();
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/locks/idle-kill";
    let (_, holder) = pair.post(&a, path, HOLD).await;
    let _doomed = pair.waiter(&b, path, WAIT);
    pair.until_waiting(path, 1).await;

    pair.b.kill();
    tokio::time::sleep(Duration::from_secs(6)).await;
    let asked = Instant::now();
    loop {
        let (_, status) = pair.get(&a, path).await;
        if status["waiting"] == 0 {
            break;
        }
        assert!(
            asked.elapsed() < Duration::from_secs(5),
            "the killed instance's waiter is still in line: {status}"
        );
        // A slow poller: calls more than 1.5 s apart keep nobody alive.
        tokio::time::sleep(Duration::from_millis(1600)).await;
    }
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    let (_, status) = pair.get(&a, path).await;
    assert_eq!(status["held"], false, "{status}");
}

/// The same with a longer pause: the ticket, back in its place as a ticket
/// once B looks dead, is granted and held for its pickup (1.5 s), not
/// collected in time (B still paused), and ends `not-collected`: the line
/// moves on to the later request, which is told 201. The ticket is gone
/// then (404), and stays gone: B, resuming, finds its tombstone
/// (core/tickets.lua) instead of putting its waiter back in line (its
/// rejoin at its place in acquire.lua, or park's join at the back in
/// ticket.lua), and answers the collect 404 (before, the ticket answered
/// 202 after the later request's 201: the chaos checker's
/// `TicketOvertaken`).
#[tokio::test]
async fn a_ticket_not_collected_while_its_instance_was_paused_stays_gone() {
    let pair = Pair::start_with(&[("BATON_PICKUP_MS", "1500")]);
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/locks/ticket-long-pause";
    let take = r#"{"ttl_ms": 3000, "wait_ms": 0, "keep_place_ms": 8000, "priority": 1}"#;
    let (_, holder) = pair.post(&a, path, HOLD).await;
    let (_, taken) = pair.post(&a, path, take).await;
    let ticket = taken["ticket"].as_str().expect("a ticket").to_owned();
    let collect = pair.waiter(
        &b,
        &format!("{path}/tickets/{ticket}"),
        r#"{"wait_ms": 1500, "keep_place_ms": 8000}"#,
    );
    tokio::time::sleep(Duration::from_millis(300)).await;
    // Calls on the node all along (as in a chaos run): a silence of Redis
    // would be taken for a stall, and B kept alive through it.
    let busy = {
        let http = pair.http.clone();
        let url = format!("{a}/locks/elsewhere");
        tokio::spawn(async move {
            loop {
                let _ = http.get(&url).send().await;
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        })
    };
    pair.b.pause();
    let released = Instant::now();
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    tokio::time::sleep_until((released + Duration::from_secs(4)).into()).await;
    let (status, later) = pair.post(&a, path, take).await;
    assert_eq!(status, 202, "{later}");
    let later = later["ticket"].as_str().expect("a ticket").to_owned();
    tokio::time::sleep_until((released + Duration::from_secs(6)).into()).await;
    let (status, body) = pair
        .post(&a, &format!("{path}/tickets/{later}"), r#"{"wait_ms": 0}"#)
        .await;
    assert_eq!(status, 201, "{body}");
    tokio::time::sleep_until((released + Duration::from_secs(7)).into()).await;
    pair.b.resume();
    let collected = collect.await.expect("joined").expect("B answers");
    busy.abort();
    assert_eq!(
        collected.status, 404,
        "the collect on B, resumed: {}",
        collected.body
    );
    assert_eq!(collected.body["type"], "/problems/ticket-not-found");
    let (status, body) = pair
        .post(&a, &format!("{path}/tickets/{ticket}"), r#"{"wait_ms": 0}"#)
        .await;
    assert_eq!(status, 404, "the ticket came back after it ended: {body}");
    let (_, status) = pair.get(&a, path).await;
    assert_eq!(status["waiting"], 0, "{status}");
}

/// A ticket left (`DELETE`) while its grant to a request waiting on it on a
/// paused instance is not confirmed yet: the grant is released (nobody was
/// told of it), the ticket is gone (204, then 404), and the request, once
/// its instance resumes, is answered 404 without coming back in line; the
/// lock goes to the next request at once.
#[tokio::test]
async fn a_ticket_left_while_its_grant_to_a_paused_instance_is_unconfirmed_stays_gone() {
    let pair = Pair::start_with(&[("BATON_PICKUP_MS", "60000")]);
    let (a, b) = (pair.a.base(), pair.b.base());
    let path = "/locks/ticket-left-paused";
    let take = r#"{"ttl_ms": 60000, "wait_ms": 0, "keep_place_ms": 60000}"#;
    let (_, holder) = pair.post(&a, path, HOLD).await;
    let (_, taken) = pair.post(&a, path, take).await;
    let ticket = taken["ticket"].as_str().expect("a ticket").to_owned();
    let collect = pair.waiter(
        &b,
        &format!("{path}/tickets/{ticket}"),
        r#"{"wait_ms": 30000}"#,
    );
    tokio::time::sleep(Duration::from_millis(500)).await;

    pair.b.pause();
    assert_eq!(pair.delete(&a, &lease_path("locks", &holder)).await, 204);
    let (_, shown) = pair.get(&a, &format!("{path}/tickets/{ticket}")).await;
    assert_eq!(shown["state"], "granted", "{shown}");
    assert_eq!(
        pair.delete(&a, &format!("{path}/tickets/{ticket}")).await,
        204
    );
    let (status, _) = pair.get(&a, &format!("{path}/tickets/{ticket}")).await;
    assert_eq!(status, 404);
    let (status, body) = pair
        .post(&a, path, r#"{"ttl_ms": 60000, "wait_ms": 0}"#)
        .await;
    assert_eq!(status, 201, "the left ticket's grant still holds: {body}");
    tokio::time::sleep(Duration::from_secs(4)).await;
    pair.b.resume();

    let collected = collect.await.expect("joined").expect("B answers");
    assert_eq!(collected.status, 404, "{}", collected.body);
    let (_, status) = pair.get(&a, path).await;
    assert_eq!(status["waiting"], 0, "{status}");
    assert_eq!(status["holders"], 1, "{status}");
}
