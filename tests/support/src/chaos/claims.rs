//! A chaos client of claims (`POST /claims`): it claims two or three of a
//! few names at once, holds them a while (extending a third of its claims
//! with `PATCH`), releases the claim (`DELETE`), and records each claim into
//! the history, and each lease of a claim answered 201 as an acquisition of
//! its name, with the claim's `PATCH` and `DELETE` as the refresh and
//! release of each lease: the checker judges them as any other holds.
//!
//! A client that `runs` holds its claims as `baton run` does: it follows
//! the holder's stream of every lease of the claim, stops its work as soon
//! as one says `lost` (a force-release of one of its names), and records
//! when it stopped ([`ClaimRun`]); it never extends its claims, as a loss
//! found by a refresh would not be a force-release's.

use std::time::{Duration, SystemTime};

use serde_json::{json, Value};

use super::{Rng, Run};
use crate::history::{Acquire, Answer, Ask, Call, Claim, ClaimRun, Op, CLAIM_RELEASED};

/// What one claim client does, over and over.
#[derive(Debug, Clone)]
pub struct ClaimWork {
    /// The names it picks from, each with what its claims ask of it (a
    /// semaphore's `Ask::Permits` carries its limit; the permits are picked
    /// from 1 to it, a lock's mode at random).
    pub names: Vec<(String, Ask)>,
    pub ttl_ms: u64,
    /// Its claims' `wait_ms`, each picked from these.
    pub waits: Vec<u64>,
    /// How long it holds a claim before releasing it, at most.
    pub hold_up_to: Duration,
    /// Whether it holds its claims as `baton run` does (see the module).
    pub runs: bool,
}

/// The path of each lease of a claim's 201 body, by name.
fn lease_paths(body: &Value) -> Vec<(String, String)> {
    body["leases"]
        .as_array()
        .map(|leases| {
            leases
                .iter()
                .filter_map(|lease| {
                    let name = lease["name"].as_str()?;
                    let id = lease["id"].as_str()?;
                    let kind = if lease.get("limit").is_some() {
                        "semaphores"
                    } else {
                        "locks"
                    };
                    Some((name.to_owned(), format!("{kind}/{name}/{id}")))
                })
                .collect()
        })
        .unwrap_or_default()
}

/// A claim's answer, as the checker reads it: the claim's own status, and
/// for a 200 or 201 each lease's answer by name, and the claim's id.
async fn claim_answer(
    sent: Result<reqwest::Response, reqwest::Error>,
    names: &[(String, Ask)],
) -> (
    Answer,
    Vec<(String, Answer)>,
    Option<String>,
    Vec<(String, String)>,
) {
    let response = match sent {
        Ok(response) => response,
        Err(err) => {
            let reached = !err.is_connect();
            return (Answer::None { reached }, Vec::new(), None, Vec::new());
        }
    };
    let status = response.status().as_u16();
    if status == 204 {
        let slug = String::new();
        return (
            Answer::Status { status, slug },
            Vec::new(),
            None,
            Vec::new(),
        );
    }
    let Ok(text) = response.text().await else {
        return (Answer::None { reached: true }, Vec::new(), None, Vec::new());
    };
    let body: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
    if matches!(status, 200 | 201) {
        let leases = || {
            let mut leases = Vec::new();
            for (name, asked) in names {
                let lease = body["leases"]
                    .as_array()?
                    .iter()
                    .find(|l| l["name"].as_str() == Some(name))?;
                let granted = match asked {
                    Ask::Lock { .. } => Ask::Lock {
                        shared: lease["shared"].as_bool()?,
                    },
                    Ask::Permits { .. } => Ask::Permits {
                        permits: u32::try_from(lease["permits"].as_u64()?).ok()?,
                        limit: u32::try_from(lease["limit"].as_u64()?).ok()?,
                    },
                };
                let answer = Answer::Lease {
                    token: lease["fencing_token"].as_u64()?,
                    expires_at: humantime::parse_rfc3339(lease["expires_at"].as_str()?).ok()?,
                    granted,
                };
                leases.push((name.clone(), answer));
            }
            Some((leases, body["id"].as_str().map(str::to_owned)))
        };
        return match leases() {
            Some((leases, id)) => {
                let slug = String::new();
                (
                    Answer::Status { status, slug },
                    leases,
                    id,
                    lease_paths(&body),
                )
            }
            None => (
                Answer::Unclear(format!("{status}: {text}")),
                Vec::new(),
                None,
                Vec::new(),
            ),
        };
    }
    let slug = body["type"]
        .as_str()
        .unwrap_or_default()
        .rsplit('/')
        .next()
        .unwrap_or_default()
        .to_owned();
    let answer = if slug.is_empty() {
        Answer::Unclear(format!("{status}: {text}"))
    } else {
        Answer::Status { status, slug }
    };
    (answer, Vec::new(), None, Vec::new())
}

/// One claim client, `id`, until `stop`.
pub async fn claim_loop(id: usize, work: ClaimWork, run: Run) {
    let Run {
        bases,
        http,
        record,
        stop,
        seed,
    } = run;
    let mut rng = Rng::new(seed ^ (id as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    let mut turn = id;
    while !*stop.borrow() {
        turn += 1;
        let instance = turn % bases.len();
        // Two or three of the names, each asking at random.
        let mut pool = work.names.clone();
        let count = 2 + (rng.next_u64() % 2) as usize;
        let mut names: Vec<(String, Ask)> = Vec::new();
        while names.len() < count.min(work.names.len()) {
            let (name, ask) = pool.remove((rng.next_u64() % pool.len() as u64) as usize);
            let ask = match ask {
                Ask::Lock { .. } => Ask::Lock {
                    shared: rng.next_u64().is_multiple_of(2),
                },
                Ask::Permits { limit, .. } => Ask::Permits {
                    permits: 1 + (rng.next_u64() % u64::from(limit)) as u32,
                    limit,
                },
            };
            names.push((name, ask));
        }
        let wait_ms = work.waits[(rng.next_u64() % work.waits.len() as u64) as usize];
        let (mut locks, mut semaphores) = (Vec::new(), Vec::new());
        for (name, ask) in &names {
            match ask {
                Ask::Lock { shared } => locks.push(json!({"name": name, "shared": shared})),
                Ask::Permits { permits, limit } => {
                    semaphores.push(json!({"name": name, "limit": limit, "permits": permits}))
                }
            }
        }
        let body = json!({"locks": locks, "semaphores": semaphores, "ttl_ms": work.ttl_ms,
            "wait_ms": wait_ms, "owner": format!("claimer-{id}")});
        let timeout = Duration::from_millis(wait_ms) + Duration::from_secs(5);
        let sent = SystemTime::now();
        let response = http
            .post(format!("{}/claims", bases[instance]))
            .body(body.to_string())
            .timeout(timeout)
            .send()
            .await;
        let (answer, leases, claim_id, paths) = claim_answer(response, &names).await;
        let answered = SystemTime::now();
        let tokens: Vec<(String, u64)> = leases
            .iter()
            .filter_map(|(name, lease)| match lease {
                Answer::Lease { token, .. } => Some((name.clone(), *token)),
                _ => None,
            })
            .collect();
        {
            let mut history = record.lock().unwrap();
            for ((name, lease), (_, ask)) in leases.into_iter().zip(&names) {
                let acquire = Acquire {
                    ask: *ask,
                    ttl_ms: work.ttl_ms,
                    wait_ms: 0,
                    newest_wins: false,
                    priority: 0,
                };
                history.calls.push(Call {
                    client: id,
                    name,
                    instance,
                    op: Op::Acquire(acquire),
                    sent,
                    answered,
                    answer: lease,
                });
            }
            history.claims.push(Claim {
                client: id,
                instance,
                names: names.clone(),
                ttl_ms: work.ttl_ms,
                wait_ms,
                sent,
                answered,
                answer,
            });
        }
        let Some(claim_id) = claim_id else {
            tokio::time::sleep(rng.ms(10, 300)).await;
            continue;
        };
        let path = format!("claims/{claim_id}");
        let hold_up_to = work.hold_up_to.as_millis() as u64;
        // A run's work: each lease's stream followed, a loss heard at once.
        let (lost_tx, mut lost_rx) = tokio::sync::mpsc::unbounded_channel();
        if work.runs {
            for (name, lease_path) in &paths {
                let Some((_, token)) = tokens.iter().find(|(n, _)| n == name) else {
                    continue;
                };
                let instance = turn % bases.len();
                let url = format!("{}/{lease_path}/events", bases[instance]);
                tokio::spawn(super::follow(
                    http.clone(),
                    url,
                    (id, name.clone(), *token, instance),
                    record.clone(),
                    Some(lost_tx.clone()),
                ));
            }
        }
        drop(lost_tx);
        let mut lost_heard = None;
        let first = rng.ms(0, hold_up_to / 2);
        let rest = rng.ms(0, hold_up_to / 2);
        tokio::select! {
            () = tokio::time::sleep(first) => {}
            Some(at) = lost_rx.recv() => lost_heard = Some(at),
        }
        // A third are extended mid-hold (every lease, to a longer ttl).
        if !work.runs && rng.next_u64().is_multiple_of(3) {
            let ttl_ms = rng.ms(work.ttl_ms + 1000, 2 * work.ttl_ms).as_millis() as u64;
            let instance = (turn + 1) % bases.len();
            let sent = SystemTime::now();
            let response = http
                .patch(format!("{}/{path}", bases[instance]))
                .body(json!({ "ttl_ms": ttl_ms }).to_string())
                .timeout(Duration::from_millis(2500))
                .send()
                .await;
            let (answer, leases, _, _) = claim_answer(response, &names).await;
            let answered = SystemTime::now();
            let mut history = record.lock().unwrap();
            for (name, token) in &tokens {
                let lease = leases
                    .iter()
                    .find(|(n, _)| n == name)
                    .map_or_else(|| answer.clone(), |(_, lease)| lease.clone());
                history.calls.push(Call {
                    client: id,
                    name: name.clone(),
                    instance,
                    op: Op::Refresh {
                        lease: *token,
                        ttl_ms,
                    },
                    sent,
                    answered,
                    answer: lease,
                });
            }
        }
        if lost_heard.is_none() {
            tokio::select! {
                () = tokio::time::sleep(rest) => {}
                Some(at) = lost_rx.recv() => lost_heard = Some(at),
            }
        }
        if work.runs {
            record.lock().unwrap().claim_runs.push(ClaimRun {
                client: id,
                names: names.iter().map(|(n, _)| n.clone()).collect(),
                granted: answered,
                lost_heard,
                stopped: SystemTime::now(),
            });
        }
        // Release, through either instance, until answered 204 or 404.
        for attempt in 0..30 {
            let instance = (turn + attempt) % bases.len();
            let sent = SystemTime::now();
            let response = http
                .delete(format!("{}/{path}", bases[instance]))
                .timeout(Duration::from_millis(2500))
                .send()
                .await;
            let (answer, _, _, _) = claim_answer(response, &names).await;
            let answered = SystemTime::now();
            let recorded = match &answer {
                Answer::Status { status: 204, .. } => Answer::Status {
                    status: 204,
                    slug: CLAIM_RELEASED.to_owned(),
                },
                other => other.clone(),
            };
            {
                let mut history = record.lock().unwrap();
                for (name, token) in &tokens {
                    history.calls.push(Call {
                        client: id,
                        name: name.clone(),
                        instance,
                        op: Op::Release { lease: *token },
                        sent,
                        answered,
                        answer: recorded.clone(),
                    });
                }
            }
            if matches!(
                answer,
                Answer::Status {
                    status: 204 | 404,
                    ..
                } | Answer::Unclear(_)
            ) {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}
