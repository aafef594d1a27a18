//! HTTP/2 next to HTTP/1.1 on one port, and the connection limits: header and
//! idle timeouts, the connection cap, and shutdown with slow connections.

use std::time::{Duration, Instant};

use axum::http::{Method, Request, StatusCode};
use bytes::Bytes;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use baton_testkit::{lease_path, problem, settings_for, shared_redis, unique_prefix, TestApp};

/// One HTTP/2 connection (prior knowledge) made with the `h2` crate, so that
/// every request on it is a stream of that one TCP connection.
#[derive(Clone)]
struct H2 {
    authority: String,
    send: h2::client::SendRequest<Bytes>,
}

/// A request sent on an HTTP/2 connection, not answered yet.
struct Pending {
    response: h2::client::ResponseFuture,
    /// Dropped with the request: the stream is reset.
    _body: h2::SendStream<Bytes>,
}

impl H2 {
    async fn connect(app: &TestApp) -> Self {
        let authority = app.base.trim_start_matches("http://").to_owned();
        let tcp = TcpStream::connect(&authority).await.expect("connect");
        let (send, connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Self { authority, send }
    }

    async fn start(&self, method: Method, path: &str, body: &str) -> Pending {
        let request = Request::builder()
            .method(method)
            .uri(format!("http://{}{path}", self.authority))
            .body(())
            .expect("request");
        let mut send = self.send.clone().ready().await.expect("stream available");
        let (response, mut stream) = send.send_request(request, body.is_empty()).expect("sent");
        if !body.is_empty() {
            stream
                .send_data(Bytes::from(body.to_owned()), true)
                .expect("body sent");
        }
        Pending {
            response,
            _body: stream,
        }
    }

    async fn request(&self, method: Method, path: &str, body: &str) -> (StatusCode, Value) {
        self.start(method, path, body).await.answer().await
    }
}

impl Pending {
    async fn answer(self) -> (StatusCode, Value) {
        let response = self.response.await.expect("response");
        let status = response.status();
        let mut body = response.into_body();
        let mut data = Vec::new();
        while let Some(chunk) = body.data().await {
            let chunk = chunk.expect("body chunk");
            let _ = body.flow_control().release_capacity(chunk.len());
            data.extend_from_slice(&chunk);
        }
        let json = serde_json::from_slice(&data).unwrap_or(Value::Null);
        (status, json)
    }
}

/// Waits until `n` requests wait on this instance.
async fn until_waiting(app: &TestApp, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while app.engine.waiting() != n {
        assert!(
            Instant::now() < deadline,
            "never {n} waiting, but {}",
            app.engine.waiting()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Reads until the peer closes (`Ok` with what came) or `limit` passes (`Err`).
async fn read_until_closed(tcp: &mut TcpStream, limit: Duration) -> Result<Vec<u8>, Vec<u8>> {
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        match tokio::time::timeout_at(deadline, tcp.read(&mut buf)).await {
            Err(_) => return Err(seen),
            Ok(Ok(0) | Err(_)) => return Ok(seen),
            Ok(Ok(n)) => seen.extend_from_slice(&buf[..n]),
        }
    }
}

/// Sends one HTTP/1.1 request on a keep-alive connection and reads its whole
/// (small, `Content-Length`) response.
async fn http1_get(tcp: &mut TcpStream, path: &str) -> String {
    tcp.write_all(format!("GET {path} HTTP/1.1\r\nHost: baton\r\n\r\n").as_bytes())
        .await
        .expect("request written");
    let mut seen = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = tokio::time::timeout(Duration::from_secs(5), tcp.read(&mut buf))
            .await
            .expect("an answer in time")
            .expect("read");
        assert!(n > 0, "closed before answering: {seen:?}");
        seen.extend_from_slice(&buf[..n]);
        let text = String::from_utf8_lossy(&seen).into_owned();
        if let Some((head, body)) = text.split_once("\r\n\r\n") {
            let length = head
                .lines()
                .find_map(|l| {
                    l.to_ascii_lowercase()
                        .strip_prefix("content-length:")
                        .map(|v| v.trim().parse::<usize>().expect("length"))
                })
                .expect("content-length");
            if body.len() >= length {
                return text;
            }
        }
    }
}

#[tokio::test]
async fn curl_with_http2_prior_knowledge_gets_answers_over_http2() {
    let app = TestApp::spawn().await;
    let base = app.base.clone();
    let curl = |args: Vec<String>| {
        tokio::task::spawn_blocking(move || {
            let out = std::process::Command::new("curl")
                .args([
                    "-sS",
                    "--http2-prior-knowledge",
                    "-w",
                    "\n%{http_version} %{http_code}",
                ])
                .args(args)
                .output()
                .expect("curl is installed (scripts/test.sh installs it)");
            assert!(out.status.success(), "{out:?}");
            String::from_utf8(out.stdout).expect("utf-8")
        })
    };

    let health = curl(vec![format!("{base}/healthz")]).await.unwrap();
    assert!(health.ends_with("\n2 200"), "{health}");
    let acquired = curl(vec![
        "-d".into(),
        r#"{"ttl_ms": 5000, "owner": "curl"}"#.into(),
        format!("{base}/locks/over-h2"),
    ])
    .await
    .unwrap();
    assert!(acquired.ends_with("\n2 201"), "{acquired}");
    let lease: Value = serde_json::from_str(acquired.lines().next().unwrap()).unwrap();
    assert_eq!(lease["name"], "over-h2");
    assert_eq!(lease["owner"], "curl");
    let held = curl(vec![format!("{base}/locks/over-h2")]).await.unwrap();
    assert!(held.ends_with("\n2 200"), "{held}");
    assert!(held.contains(r#""held":true"#), "{held}");
    let released = curl(vec![
        "-X".into(),
        "DELETE".into(),
        format!("{base}{}", lease_path("locks", &lease)),
    ])
    .await
    .unwrap();
    assert!(released.ends_with("\n2 204"), "{released}");
    // And HTTP/1.1 on the same port.
    let out = tokio::task::spawn_blocking(move || {
        std::process::Command::new("curl")
            .args([
                "-sS",
                "--http1.1",
                "-o",
                "/dev/null",
                "-w",
                "%{http_version}",
            ])
            .arg(format!("{base}/healthz"))
            .output()
            .expect("curl")
    })
    .await
    .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "1.1");
}

#[tokio::test]
async fn two_hundred_waits_on_one_http2_connection_are_each_answered() {
    const WAITS: usize = 200;
    let app = TestApp::spawn().await;
    let mut held = Vec::new();
    for i in 0..WAITS {
        held.push(app.acquire_lock(&format!("many-{i}"), "{}").await);
    }
    let h2 = H2::connect(&app).await;
    let mut waits = Vec::new();
    for i in 0..WAITS {
        let pending = h2
            .start(
                Method::POST,
                &format!("/locks/many-{i}"),
                &format!(r#"{{"wait_ms": 20000, "owner": "waiter-{i}"}}"#),
            )
            .await;
        waits.push(tokio::spawn(pending.answer()));
    }
    until_waiting(&app, WAITS).await;

    for lease in &held {
        assert_eq!(app.delete(&lease_path("locks", lease)).await.status(), 204);
    }

    for (i, (wait, before)) in waits.into_iter().zip(&held).enumerate() {
        let (status, lease) = wait.await.unwrap();
        assert_eq!(status, StatusCode::CREATED, "wait {i}: {lease}");
        assert_eq!(lease["name"], format!("many-{i}"));
        assert_eq!(lease["owner"], format!("waiter-{i}"));
        assert!(
            lease["fencing_token"].as_u64().unwrap() > before["fencing_token"].as_u64().unwrap(),
            "{lease}"
        );
    }
    // The connection still serves.
    let (status, _) = h2.request(Method::GET, "/healthz", "").await;
    assert_eq!(status, StatusCode::OK);
}

#[tokio::test]
async fn a_reset_http2_stream_leaves_the_line_like_a_closed_http1_connection() {
    let app = TestApp::spawn().await;
    let held = app.acquire_lock("reset", r#"{"ttl_ms": 60000}"#).await;
    let h2 = H2::connect(&app).await;
    let body = r#"{"wait_ms": 30000}"#;
    // In line: an HTTP/2 stream that will be reset, an HTTP/1.1 client that
    // will hang up, then an HTTP/2 stream on the same connection as the first.
    let reset = h2.start(Method::POST, "/locks/reset", body).await;
    until_waiting(&app, 1).await;
    let hung_up = app.post_in_background("/locks/reset", body);
    until_waiting(&app, 2).await;
    let stays = tokio::spawn(h2.start(Method::POST, "/locks/reset", body).await.answer());
    until_waiting(&app, 3).await;

    drop(reset); // RST_STREAM (CANCEL)
    until_waiting(&app, 2).await;
    hung_up.abort();
    until_waiting(&app, 1).await;

    let released = Instant::now();
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    let (status, lease) = tokio::time::timeout(Duration::from_secs(2), stays)
        .await
        .expect("the waiter behind them is served at once")
        .unwrap();
    assert_eq!(status, StatusCode::CREATED, "{lease}");
    assert!(released.elapsed() < Duration::from_secs(1));
    until_waiting(&app, 0).await;
}

#[tokio::test]
async fn shutdown_answers_waiters_on_both_protocols_and_slow_connections_do_not_hold_it_up() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.header_timeout = Duration::from_millis(60000);
    settings.idle_timeout = Duration::from_millis(60000);
    let mut app = TestApp::spawn_with(settings).await;
    app.acquire_lock("closing", r#"{"ttl_ms": 60000}"#).await;
    let h2 = H2::connect(&app).await;
    let over_h2 = tokio::spawn(
        h2.start(Method::POST, "/locks/closing", r#"{"wait_ms": 60000}"#)
            .await
            .answer(),
    );
    let over_h1 = app.post_in_background("/locks/closing", r#"{"wait_ms": 60000}"#);
    let authority = app.base.trim_start_matches("http://").to_owned();
    let mut half_sent = TcpStream::connect(&authority).await.unwrap();
    half_sent
        .write_all(b"POST /locks/x HTTP/1.1\r\nHost: baton\r\n")
        .await
        .unwrap();
    let mut idle = TcpStream::connect(&authority).await.unwrap();
    assert!(http1_get(&mut idle, "/healthz")
        .await
        .starts_with("HTTP/1.1 200"));
    let silent = TcpStream::connect(&authority).await.unwrap();
    until_waiting(&app, 2).await;

    let started = Instant::now();
    app.shutdown().await.expect("clean shutdown");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );

    let (status, body) = over_h2.await.unwrap();
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    assert!(
        body["type"].as_str().unwrap().ends_with("/shutting-down"),
        "{body}"
    );
    problem(over_h1.await.unwrap().response, 503, "shutting-down").await;
    for mut tcp in [half_sent, idle, silent] {
        assert!(read_until_closed(&mut tcp, Duration::from_secs(1))
            .await
            .is_ok());
    }
}

#[tokio::test]
async fn a_partial_request_head_and_a_silent_connection_are_closed_after_the_header_timeout() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.header_timeout = Duration::from_millis(400);
    let app = TestApp::spawn_with(settings).await;
    let authority = app.base.trim_start_matches("http://").to_owned();
    let opened = Instant::now();
    let mut partial = TcpStream::connect(&authority).await.unwrap();
    partial
        .write_all(b"POST /locks/slow HTTP/1.1\r\nHost: baton\r\nContent-Le")
        .await
        .unwrap();
    let mut silent = TcpStream::connect(&authority).await.unwrap();

    for tcp in [&mut partial, &mut silent] {
        let seen = read_until_closed(tcp, Duration::from_secs(5))
            .await
            .expect("closed by the server");
        assert!(seen.is_empty() || String::from_utf8_lossy(&seen).starts_with("HTTP/1.1 408"));
    }
    let took = opened.elapsed();
    assert!(
        took >= Duration::from_millis(350) && took < Duration::from_secs(3),
        "closed after {took:?}"
    );
    // A keep-alive connection whose next request head stalls is closed too.
    let mut kept = TcpStream::connect(&authority).await.unwrap();
    assert!(http1_get(&mut kept, "/healthz")
        .await
        .starts_with("HTTP/1.1 200"));
    kept.write_all(b"GET /healthz HTTP/1.1\r\n").await.unwrap();
    let started = Instant::now();
    read_until_closed(&mut kept, Duration::from_secs(5))
        .await
        .expect("closed by the server");
    assert!(started.elapsed() < Duration::from_secs(3));
}

#[tokio::test]
async fn an_idle_keep_alive_connection_is_closed_after_the_idle_timeout_not_the_header_timeout() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.header_timeout = Duration::from_millis(300);
    settings.idle_timeout = Duration::from_millis(1500);
    let app = TestApp::spawn_with(settings).await;
    let authority = app.base.trim_start_matches("http://").to_owned();
    let mut tcp = TcpStream::connect(&authority).await.unwrap();
    assert!(http1_get(&mut tcp, "/healthz")
        .await
        .starts_with("HTTP/1.1 200"));

    // Idle for longer than the header timeout: still open and serving.
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert!(http1_get(&mut tcp, "/healthz")
        .await
        .starts_with("HTTP/1.1 200"));
    let idle_from = Instant::now();
    let seen = read_until_closed(&mut tcp, Duration::from_secs(5))
        .await
        .expect("closed by the server");
    assert!(seen.is_empty(), "{seen:?}");
    let idle = idle_from.elapsed();
    assert!(
        idle >= Duration::from_millis(1400) && idle < Duration::from_secs(3),
        "closed after {idle:?} idle"
    );

    // The same for an HTTP/2 connection with no stream open.
    let h2 = H2::connect(&app).await;
    let (status, _) = h2.request(Method::GET, "/healthz", "").await;
    assert_eq!(status, StatusCode::OK);
    let idle_from = Instant::now();
    let deadline = idle_from + Duration::from_secs(5);
    while h2.send.clone().ready().await.is_ok() {
        assert!(
            Instant::now() < deadline,
            "the idle HTTP/2 connection stays open"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(idle_from.elapsed() >= Duration::from_millis(1400));
}

#[tokio::test]
async fn a_wait_longer_than_the_idle_timeout_is_not_cut_off() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.header_timeout = Duration::from_millis(200);
    settings.idle_timeout = Duration::from_millis(200);
    let app = TestApp::spawn_with(settings).await;
    let held = app.acquire_lock("long", r#"{"ttl_ms": 60000}"#).await;
    let h2 = H2::connect(&app).await;
    let over_h2 = tokio::spawn(
        h2.start(Method::POST, "/locks/long", r#"{"wait_ms": 10000}"#)
            .await
            .answer(),
    );
    until_waiting(&app, 1).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    let (status, lease) = over_h2.await.unwrap();
    assert_eq!(status, StatusCode::CREATED, "{lease}");
    let over_h1 = app.post_in_background("/locks/long", r#"{"wait_ms": 10000}"#);
    until_waiting(&app, 1).await;
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(app.delete(&lease_path("locks", &lease)).await.status(), 204);
    assert_eq!(over_h1.await.unwrap().response.status(), 201);
}

#[tokio::test]
async fn connection_51_of_50_is_closed_at_once_while_the_admitted_ones_are_served() {
    let mut settings = settings_for(&shared_redis().url(), &unique_prefix());
    settings.max_connections = 50;
    let app = TestApp::spawn_with(settings).await;
    let authority = app.base.trim_start_matches("http://").to_owned();
    let mut admitted = Vec::new();
    for _ in 0..50 {
        admitted.push(TcpStream::connect(&authority).await.unwrap());
    }

    let mut refused = TcpStream::connect(&authority).await.unwrap();
    let started = Instant::now();
    // It may even have been closed before this request goes out.
    let _ = refused
        .write_all(b"GET /healthz HTTP/1.1\r\nHost: baton\r\n\r\n")
        .await;
    let seen = read_until_closed(&mut refused, Duration::from_secs(2))
        .await
        .expect("connection 51 is closed");
    assert!(seen.is_empty(), "connection 51 was answered: {seen:?}");
    assert!(started.elapsed() < Duration::from_secs(1));

    for tcp in &mut admitted {
        assert!(http1_get(tcp, "/healthz").await.starts_with("HTTP/1.1 200"));
    }
    // As soon as one closes, a new one is served.
    drop(admitted.pop());
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut next = TcpStream::connect(&authority).await.unwrap();
    assert!(http1_get(&mut next, "/healthz")
        .await
        .starts_with("HTTP/1.1 200"));
}

#[tokio::test]
async fn a_dead_http2_peer_s_waits_are_dropped_by_keep_alive_pings() {
    let app = TestApp::spawn().await;
    let held = app.acquire_lock("dead-peer", r#"{"ttl_ms": 60000}"#).await;
    let authority = app.base.trim_start_matches("http://").to_owned();
    let tcp = TcpStream::connect(&authority).await.unwrap();
    let (send, mut connection) = h2::client::handshake(tcp).await.expect("h2 handshake");
    let (pause, paused) = tokio::sync::oneshot::channel::<()>();
    // Drives the connection until told to stop, then keeps its socket open
    // without reading: a peer that vanished without closing.
    let driver = tokio::spawn(async move {
        tokio::select! {
            _ = &mut connection => {}
            _ = paused => {}
        }
        tokio::time::sleep(Duration::from_secs(60)).await;
        drop(connection);
    });
    let h2 = H2 { authority, send };
    let _waiting = h2
        .start(Method::POST, "/locks/dead-peer", r#"{"wait_ms": 60000}"#)
        .await;
    until_waiting(&app, 1).await;

    let _ = pause.send(());
    let vanished = Instant::now();
    let deadline = vanished
        + baton::http::server::H2_PING_INTERVAL
        + baton::http::server::H2_PING_TIMEOUT
        + Duration::from_secs(5);
    while app.engine.waiting() != 0 {
        assert!(
            Instant::now() < deadline,
            "the dead peer's wait is still in line"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // Its place is gone: a release leaves the lock free.
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    let status: Value = app.get("/locks/dead-peer").await.json().await.unwrap();
    assert_eq!(status["held"], false, "{status}");
    driver.abort();
}

#[tokio::test]
async fn waiting_with_progress_streams_server_sent_events_over_http2() {
    let app = TestApp::spawn().await;
    let held = app.acquire_lock("sse-h2", r#"{"ttl_ms": 60000}"#).await;
    let h2 = H2::connect(&app).await;
    let request = Request::builder()
        .method(Method::POST)
        .uri(format!("http://{}/locks/sse-h2", h2.authority))
        .header("accept", "text/event-stream")
        .body(())
        .unwrap();
    let mut send = h2.send.clone().ready().await.unwrap();
    let (response, mut body_out) = send.send_request(request, false).unwrap();
    body_out
        .send_data(Bytes::from_static(br#"{"wait_ms": 20000}"#), true)
        .unwrap();
    let response = response.await.expect("answered at once");
    assert_eq!(response.status(), StatusCode::OK);
    assert!(response.headers()["content-type"]
        .to_str()
        .unwrap()
        .starts_with("text/event-stream"));
    let mut events = response.into_body();
    let mut seen = String::new();
    let mut next = async || {
        let chunk = tokio::time::timeout(Duration::from_secs(10), events.data())
            .await
            .expect("an event in time")
            .expect("stream open")
            .expect("chunk");
        let _ = events.flow_control().release_capacity(chunk.len());
        String::from_utf8_lossy(&chunk).into_owned()
    };
    while !seen.contains("event: queued") {
        seen.push_str(&next().await);
    }
    assert_eq!(app.delete(&lease_path("locks", &held)).await.status(), 204);
    while !seen.contains("event: acquired") {
        seen.push_str(&next().await);
    }
    assert!(seen.contains(r#""name":"sse-h2""#), "{seen}");
}
