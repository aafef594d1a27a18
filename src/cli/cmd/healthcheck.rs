//! `baton healthcheck`: for container health checks without curl.

use std::time::Duration;

use clap::Args;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// `baton healthcheck`
#[derive(Args, Debug, Clone)]
pub struct HealthcheckArgs {
    /// The address the service listens on (host:port)
    #[arg(long, env = "BATON_LISTEN", default_value = "127.0.0.1:8080")]
    pub listen: String,
}

/// Whether the service at `listen` answers `/healthz` with 200 within 3 s.
pub async fn healthy(listen: &str) -> bool {
    tokio::time::timeout(Duration::from_secs(3), answers_healthz(listen))
        .await
        .is_ok_and(|answer| answer.unwrap_or(false))
}

/// One HTTP/1.1 `GET /healthz` to `listen` (a wildcard address is asked on
/// loopback); whether the status line says 200.
async fn answers_healthz(listen: &str) -> std::io::Result<bool> {
    let (host, port) = listen.rsplit_once(':').unwrap_or((listen, "8080"));
    let host = match host {
        "0.0.0.0" | "" => "127.0.0.1",
        "[::]" => "[::1]",
        other => other,
    };
    let mut stream = tokio::net::TcpStream::connect(format!("{host}:{port}")).await?;
    let request =
        format!("GET /healthz HTTP/1.1\r\nHost: {host}:{port}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).await?;
    let mut head = Vec::new();
    stream.take(64).read_to_end(&mut head).await?;
    let status_line = String::from_utf8_lossy(&head);
    Ok(status_line.starts_with("HTTP/1.1 200 ") || status_line.starts_with("HTTP/1.0 200 "))
}
