//! A chaos client of tickets: it acquires a lock (exclusive) with
//! `keep_place_ms` and a short wait, so that many of its requests become
//! tickets (202), and then collects the ticket (`POST .../tickets/{id}`,
//! again until granted), leaves it (`DELETE`), or never comes back for it
//! (granted, its lease is held until `pickup_by`, then ends `not-collected`).
//! Every call is recorded in the history's tickets, judged by the
//! checker's `rules/tickets.rs`.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::{Rng, Run};
use crate::history::{Ticket, TicketCall, TicketOp};

/// How long a ticket keeps its place past each call.
pub const KEEP_PLACE_MS: u64 = 8000;
/// The chaos instances' `BATON_PICKUP_MS`: an uncollected ticket holds the
/// lock this long after its grant.
pub const PICKUP_MS: u64 = 1500;

/// What a call answered: the recorded call, and the ticket or lease id.
async fn send(
    op: TicketOp,
    instance: usize,
    request: reqwest::RequestBuilder,
    timeout: Duration,
) -> (TicketCall, Option<String>) {
    let sent = SystemTime::now();
    let response = request
        .header("content-type", "application/json")
        .timeout(timeout)
        .send()
        .await;
    let (mut status, mut token, mut id) = (0, None, None);
    if let Ok(response) = response {
        let code = response.status().as_u16();
        if let Ok(text) = response.text().await {
            status = code;
            let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
            token = body["fencing_token"].as_u64();
            let key = if code == 202 { "ticket" } else { "id" };
            id = body[key].as_str().map(str::to_owned);
        }
    }
    let answered = SystemTime::now();
    let call = TicketCall {
        op,
        instance,
        sent,
        answered,
        status,
        token,
    };
    (call, id)
}

/// Holds a granted lease a little, then releases it.
async fn hold(run: &Run, rng: &mut Rng, instance: usize, name: &str, lease: &str) {
    tokio::time::sleep(rng.ms(50, 300)).await;
    let url = format!("{}/locks/{name}/{lease}", run.bases[instance]);
    let _ = run
        .http
        .delete(url)
        .timeout(Duration::from_secs(3))
        .send()
        .await;
}

/// One ticket client, `id`, on the lock `name`, until `stop`.
pub async fn ticket_loop(id: usize, name: String, run: Run) {
    let mut rng = Rng::new(run.seed ^ (id as u64 + 7).wrapping_mul(0x2545_F491_4F6C_DD1D));
    let bases = run.bases.len();
    let mut turn = id;
    while !*run.stop.borrow() {
        turn += 1;
        let instance = turn % bases;
        let priority = (rng.next_u64() % 3) as u8;
        let wait_ms = [0, 200, 500][(rng.next_u64() % 3) as usize];
        let body = json!({"ttl_ms": 3000, "wait_ms": wait_ms, "priority": priority,
            "keep_place_ms": KEEP_PLACE_MS, "owner": format!("ticket-{id}")});
        let request = run
            .http
            .post(format!("{}/locks/{name}", run.bases[instance]))
            .body(body.to_string());
        let timeout = Duration::from_millis(wait_ms) + Duration::from_secs(5);
        let (take, handle) = send(TicketOp::Take, instance, request, timeout).await;
        let mut ticket = Ticket {
            client: id,
            name: name.clone(),
            priority,
            abandoned: false,
            calls: vec![take.clone()],
        };
        match (take.status, handle) {
            (201, Some(lease)) => hold(&run, &mut rng, instance, &name, &lease).await,
            (202, Some(handle)) => {
                let dice = rng.next_u64() % 4;
                ticket.abandoned = dice == 3;
                if !ticket.abandoned {
                    follow_up(&run, &mut rng, turn, &name, &handle, dice == 2, &mut ticket).await;
                }
            }
            _ => {}
        }
        run.record.lock().unwrap().tickets.push(ticket);
        tokio::time::sleep(rng.ms(20, 300)).await;
    }
}

/// Collects the ticket (waiting again until granted or gone), or, to
/// `leave`, looks once without waiting and leaves it.
async fn follow_up(
    run: &Run,
    rng: &mut Rng,
    mut turn: usize,
    name: &str,
    handle: &str,
    leave: bool,
    ticket: &mut Ticket,
) {
    let path = format!("locks/{name}/tickets/{handle}");
    // A few rounds at most: its place stays for `KEEP_PLACE_MS` after each.
    for round in 0..6 {
        if *run.stop.borrow() {
            return;
        }
        tokio::time::sleep(rng.ms(0, 400)).await;
        turn += 1;
        let instance = turn % run.bases.len();
        let wait_ms = if leave { 0 } else { 1500 };
        let body = json!({"wait_ms": wait_ms, "keep_place_ms": KEEP_PLACE_MS});
        let url = format!("{}/{path}", run.bases[instance]);
        let request = run.http.post(url).body(body.to_string());
        let timeout = Duration::from_millis(wait_ms) + Duration::from_secs(5);
        let (call, lease) = send(TicketOp::Collect, instance, request, timeout).await;
        let status = call.status;
        ticket.calls.push(call);
        match (status, lease) {
            (201, Some(lease)) => return hold(run, rng, instance, name, &lease).await,
            (404, _) => return,
            _ if leave || round == 5 => {
                let url = format!("{}/{path}", run.bases[instance]);
                let request = run.http.delete(url);
                let timeout = Duration::from_secs(5);
                let (call, _) = send(TicketOp::Leave, instance, request, timeout).await;
                ticket.calls.push(call);
                return;
            }
            _ => {}
        }
    }
}
