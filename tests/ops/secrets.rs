//! No Redis password in any log line, whichever URL form carries it.

use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use reqwest::Client;

use baton_testkit::service::Service;
use baton_testkit::{free_port, unique_prefix};

const PASSWORD: &str = "pw-5ec4e7-do-not-log";

/// A redis-server that wants a password, on TCP and on a Unix socket.
struct GuardedRedis {
    child: Child,
    port: u16,
    socket: String,
}

impl GuardedRedis {
    fn start() -> Self {
        let port = free_port();
        let socket = std::env::temp_dir()
            .join(format!("baton-ops-redis-{port}.sock"))
            .to_string_lossy()
            .into_owned();
        let child = Command::new("redis-server")
            .args([
                "--port",
                &port.to_string(),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
            ])
            .args([
                "--requirepass",
                PASSWORD,
                "--unixsocket",
                &socket,
                "--unixsocketperm",
                "700",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server");
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::os::unix::net::UnixStream::connect(&socket).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Self {
            child,
            port,
            socket,
        }
    }
}

impl Drop for GuardedRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_file(&self.socket);
    }
}

#[tokio::test]
async fn no_redis_password_in_any_log_line_for_any_url_form() {
    let redis = GuardedRedis::start();
    let port = redis.port;
    let socket = &redis.socket;
    let forms = [
        (format!("redis://:{PASSWORD}@127.0.0.1:{port}"), true),
        (
            format!("redis://default:{PASSWORD}@127.0.0.1:{port}/0"),
            true,
        ),
        (format!("redis+unix://{socket}?db=0&pass={PASSWORD}"), true),
        (format!("unix://{socket}?pass={PASSWORD}"), true),
        // No TLS here: the handshake fails, which is logged too.
        (
            format!("rediss://default:{PASSWORD}@127.0.0.1:{port}"),
            false,
        ),
        // A wrong password: Redis refuses it, and that is logged.
        (format!("redis://:{PASSWORD}-wrong@127.0.0.1:{port}"), false),
    ];
    let client = Client::new();
    for (url, reachable) in forms {
        for format in ["text", "json"] {
            let mut service = Service::start(&[
                ("BATON_REDIS_URL", &url),
                ("BATON_KEY_PREFIX", &unique_prefix()),
                ("BATON_LOG_FORMAT", format),
                ("RUST_LOG", "debug"),
            ])
            .await;
            let acquire = client
                .post(format!("{}/locks/secret-test", service.base))
                .send()
                .await
                .unwrap();
            let expected = if reachable { 201 } else { 503 };
            assert_eq!(acquire.status(), expected, "{url}: {}", service.log());
            let ready = client
                .get(format!("{}/readyz", service.base))
                .send()
                .await
                .unwrap();
            assert_eq!(ready.status() == 200, reachable, "{url}");
            service.stop();
            let log = service.log();
            assert!(
                log.lines()
                    .any(|l| l.contains("baton is serving") && l.contains("***")),
                "the start line shows the URL, redacted: {log}"
            );
            assert!(
                !log.contains(PASSWORD),
                "{url} ({format}) leaks its password:\n{log}"
            );
        }
    }
}
