//! Server-sent event streams (`GET /events`, a lease's holder stream) read
//! event by event.

use std::time::Duration;

use serde_json::Value;

use crate::app::TestApp;

/// A server-sent event stream read event by event.
pub struct SseStream {
    response: reqwest::Response,
    buffer: String,
    /// Comment lines seen so far (keep-alives).
    pub comments: usize,
}

/// One server-sent event: its name and its data, parsed as JSON.
#[derive(Debug, Clone)]
pub struct SseEvent {
    pub name: String,
    pub data: Value,
    /// The data as sent, for checks on the raw text.
    pub raw: String,
}

impl SseStream {
    /// Wraps a response after checking that it is a 200 event stream.
    pub fn new(response: reqwest::Response) -> Self {
        assert_eq!(response.status(), 200, "an event stream answers 200");
        assert_eq!(
            response
                .headers()
                .get("content-type")
                .and_then(|v| v.to_str().ok()),
            Some("text/event-stream"),
        );
        Self {
            response,
            buffer: String::new(),
            comments: 0,
        }
    }

    /// The next event within `limit`; `None` when none came or the stream ended.
    pub async fn next_within(&mut self, limit: Duration) -> Option<SseEvent> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let block: String = self.buffer.drain(..end + 2).collect();
                let mut name = String::from("message");
                let mut data = Vec::new();
                for line in block.lines() {
                    if line.starts_with(':') {
                        self.comments += 1;
                    } else if let Some(v) = line.strip_prefix("event:") {
                        name = v.trim_start().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push(v.strip_prefix(' ').unwrap_or(v).to_owned());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                let raw = data.join("\n");
                let data = serde_json::from_str(&raw).expect("event data is JSON");
                return Some(SseEvent { name, data, raw });
            }
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(Ok(None) | Err(_)) | Err(_) => return None,
            }
        }
    }

    /// Whether the stream ends (cleanly) within `limit`.
    pub async fn ends_within(&mut self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            match tokio::time::timeout_at(deadline, self.response.chunk()).await {
                Ok(Ok(Some(chunk))) => self.buffer.push_str(&String::from_utf8_lossy(&chunk)),
                Ok(Ok(None)) => return true,
                Ok(Err(_)) | Err(_) => return false,
            }
        }
    }
}

/// Opens `GET /events?prefix=` on `app`, with a token if given.
pub async fn open_events(app: &TestApp, prefix: &str, token: Option<&str>) -> reqwest::Response {
    let mut req = app
        .client
        .get(format!("{}/events?prefix={prefix}", app.base))
        .header("accept", "text/event-stream");
    if let Some(token) = token {
        req = req.bearer_auth(token);
    }
    req.send().await.expect("request sent")
}
