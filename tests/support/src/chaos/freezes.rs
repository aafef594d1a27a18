//! A chaos admin of freezes: once in a run it freezes one name
//! (`POST /freezes`, with an `until` of its own as a backstop), keeps it
//! frozen a while, and deletes the freeze (`DELETE /freezes/{id}`),
//! recording the window into the history for the checker.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::Run;
use crate::history::Freeze;

/// Freezes `name` after `after` for `hold` (the freeze's own `until` is
/// `hold` and a few seconds more), through the instances in turn, unless
/// the run stops first.
pub async fn freeze_once(name: String, after: Duration, hold: Duration, run: Run) {
    let Run {
        bases,
        http,
        record,
        mut stop,
        ..
    } = run;
    if tokio::time::timeout(after, stop.wait_for(|s| *s))
        .await
        .is_ok()
    {
        return;
    }
    let until = SystemTime::now() + hold + Duration::from_secs(5);
    let body = json!({"match": name, "until": humantime::format_rfc3339_millis(until).to_string(),
        "reason": "chaos freeze"});
    let sent = SystemTime::now();
    let response = http
        .post(format!("{}/freezes", bases[0]))
        .body(body.to_string())
        .timeout(Duration::from_millis(2500))
        .send()
        .await;
    let id = match response {
        Ok(r) if r.status().as_u16() == 201 => r
            .json::<Value>()
            .await
            .ok()
            .and_then(|b| b["id"].as_str().map(str::to_owned)),
        _ => None,
    };
    let mut freeze = Freeze {
        name,
        opened: (sent, SystemTime::now()),
        made: id.is_some(),
        until,
        closed: None,
    };
    if let Some(id) = id {
        tokio::time::sleep(hold).await;
        let first = SystemTime::now();
        for attempt in 0..10 {
            let base = &bases[(attempt + 1) % bases.len()];
            let response = http
                .delete(format!("{base}/freezes/{id}"))
                .timeout(Duration::from_millis(2500))
                .send()
                .await;
            if response.is_ok_and(|r| matches!(r.status().as_u16(), 204 | 404)) {
                freeze.closed = Some((first, SystemTime::now()));
                break;
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    record.lock().unwrap().freezes.push(freeze);
}
