//! Waiting on a ticket (`--ticket`, or the place a long wait keeps): how
//! long it keeps its place, giving it up, and the waiting line from its
//! own place (`GET .../tickets/ID`).

use std::time::Duration;

use reqwest::Method;
use tokio::time::Instant;

use crate::cli::duration::human;
use crate::cli::http::Service;
use crate::cli::line::request::Request;
use crate::cli::line::waiting::{describe_holder, Echo};
use crate::wire::{StatusBody, TicketFrozen, TicketStateBody};

/// How long a ticket keeps its place: the wait left and a minute, so that a
/// restart of the service or a dropped connection loses nothing.
pub(crate) fn keep_for(deadline: Instant) -> Duration {
    deadline.saturating_duration_since(Instant::now()) + Duration::from_secs(60)
}

/// Gives a ticket up (best effort: its place expires anyway).
pub(crate) async fn leave_ticket(service: &Service, ticket: Option<&str>) {
    if let Some(at) = ticket {
        let _ = service
            .call(Method::DELETE, at, None, Duration::from_secs(5))
            .await;
    }
}

/// Every 5 s while waiting on the ticket at `at` (the first after 1 s): its
/// place, from the ticket itself (`GET .../tickets/ID`), and who is in the
/// way, from the name's status, through `echo`.
pub(crate) async fn progress(
    service: &Service,
    request: &Request,
    at: &str,
    started: Instant,
    echo: &mut Echo,
) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    loop {
        if let Ok(answer) = service
            .call(Method::GET, at, None, Duration::from_secs(5))
            .await
        {
            // An answer it cannot read says nothing: the next one may.
            let ticket = (answer.status == 200)
                .then(|| answer.read::<TicketStateBody>("ticket").ok())
                .flatten();
            if let Some(ticket) = ticket {
                // Who is in the way, from the name's status.
                let holder = match service
                    .call(
                        Method::GET,
                        &request.target.path(),
                        None,
                        Duration::from_secs(5),
                    )
                    .await
                {
                    Ok(status) if status.status == 200 => {
                        StatusBody::from_json(request.target.kind, &status.body)
                            .ok()
                            .map(|status| format!("; {}", describe_holder(&status)))
                    }
                    _ => None,
                };
                let place = describe_place(&ticket, &holder.unwrap_or_default());
                echo.say(
                    ticket.frozen.is_some(),
                    format!(
                        "waiting for {}: {place}; waited {} of {}",
                        request.target,
                        human(started.elapsed()),
                        human(request.wait)
                    ),
                );
            }
        }
        tokio::time::sleep(Duration::from_secs(5)).await;
    }
}

/// `place 3 of 5 in line; ticket kept until 2026-12-05T19:00:00Z` (with
/// `frozen until TIME (reason); ` before it and `about 2m00s left; ` before the ticket when the
/// ticket says so; `holder`, `; held by X`, after the place), or `granted,
/// collecting` once its turn came.
fn describe_place(ticket: &TicketStateBody, holder: &str) -> String {
    if ticket.state == "granted" {
        return "granted, collecting".to_owned();
    }
    let (place, waiting, until) = (ticket.place, ticket.waiting, &ticket.place_expires_at);
    // `frozen until TIME (reason); `, as the status-based line says it.
    let frozen = match &ticket.frozen {
        None => String::new(),
        Some(TicketFrozen {
            until,
            reason: Some(reason),
            ..
        }) => format!("frozen until {until} ({reason}); "),
        Some(TicketFrozen { until, .. }) => format!("frozen until {until}; "),
    };
    let eta = ticket
        .eta_ms
        .map(|ms| format!("about {} left; ", human(Duration::from_millis(ms))))
        .unwrap_or_default();
    format!("{frozen}place {place} of {waiting} in line{holder}; {eta}ticket kept until {until}")
}

#[cfg(test)]
mod tests {
    use serde_json::{json, Value};

    use super::*;

    fn place(ticket: Value, holder: &str) -> String {
        describe_place(&serde_json::from_value(ticket).unwrap(), holder)
    }

    #[test]
    fn the_waiting_line_shows_the_ticket_s_place() {
        let waiting = json!({"state": "waiting", "place": 3, "waiting": 5,
            "place_expires_at": "2026-12-05T19:00:00Z", "eta_ms": 120_000});
        assert_eq!(
            place(waiting, ""),
            "place 3 of 5 in line; about 2m00s left; ticket kept until 2026-12-05T19:00:00Z"
        );
        let frozen = json!({"state": "waiting", "place": 1, "waiting": 1,
            "place_expires_at": "2026-12-05T19:00:00Z", "frozen": {"until": "2026-12-06T07:00:00Z", "reason": "incident"}});
        assert_eq!(
            place(frozen, "; held by x"),
            "frozen until 2026-12-06T07:00:00Z (incident); place 1 of 1 in line; held by x; ticket kept until 2026-12-05T19:00:00Z"
        );
        let granted = json!({"state": "granted", "place": 0, "waiting": 0,
            "place_expires_at": "2026-12-05T19:00:00Z", "pickup_by": "2026-12-05T19:00:00Z"});
        assert_eq!(place(granted, ""), "granted, collecting");
    }
}
