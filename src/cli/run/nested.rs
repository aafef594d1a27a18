//! A `baton run` inside another's COMMAND, on a name the outer run holds:
//! it goes ahead at once only when the service confirms that the outer
//! run's lease (its variables), or the lease of that name in the outer
//! run's claim (`BATON_CLAIM_ID`), is still held and covers what the inner
//! one asks.

use reqwest::Method;

use crate::cli::answer::{refused, unexpected, unreadable, Answer, Outcome};
use crate::cli::exit::Failure;
use crate::cli::http::Service;
use crate::cli::line::request::Request;
use crate::cli::messages::say;
use crate::cli::run::claim::CLAIM_ID;
use crate::cli::variables::{self, LeaseVariables};
use crate::domain::{ClaimId, LeaseId};
use crate::wire::{ClaimBody, LeaseBody};

/// Whether the lease of a `baton run` around this one (its variables, for
/// this name) covers `request`: the service must confirm that it is still
/// held, of the same kind (a lease id is of one kind only), and at least
/// what `request` asks (an exclusive lease covers a shared ask, not the
/// other way round; a semaphore lease covers as many permits as it has).
///
/// # Errors
/// The service refused the token (77), or cannot be asked (69).
pub(crate) async fn covered(
    service: &Service,
    request: &Request,
    outer: &LeaseVariables,
) -> Result<bool, Failure> {
    let target = &request.target;
    if LeaseId::parse(&outer.id).is_err() {
        return not_covered(request, &format!("{} is not a lease id", variables::ID));
    }
    let path = target.lease_path(&outer.id);
    let answer = crate::cli::http::call(service, Method::GET, &path, None).await?;
    match answer.status {
        200 => {}
        404 => {
            return not_covered(
                request,
                &format!(
                    "its lease is no longer held{}",
                    if outer.kind == target.kind {
                        String::new()
                    } else {
                        format!(" or is a {}'s", outer.kind)
                    }
                ),
            )
        }
        _ => return Err(unanswered(&answer)),
    }
    let held =
        LeaseBody::from_json(target.kind, &answer.body).map_err(|err| unreadable("lease", &err))?;
    match covers(&held, request) {
        Ok(()) => Ok(true),
        Err(why) => not_covered(request, &why),
    }
}

/// The lease of `request`'s name in the claim `claim_id` of a `baton run`
/// around this one, when the service confirms that the claim still holds
/// it and that it covers `request` (as [`covered`] judges a lease): the
/// variables of that lease, for COMMAND. `None` otherwise: then this run
/// waits in line like any other.
///
/// # Errors
/// The service refused the token (77), or cannot be asked (69).
pub(crate) async fn covered_by_claim(
    service: &Service,
    request: &Request,
    claim_id: &str,
) -> Result<Option<LeaseVariables>, Failure> {
    let target = &request.target;
    let not_held = |why: &str| {
        say(format!(
            "{CLAIM_ID} is set, but {why}: waiting in line for {target} like any other"
        ));
        Ok(None)
    };
    let Ok(id) = ClaimId::parse(claim_id) else {
        return not_held(&format!("{CLAIM_ID} is not a claim id"));
    };
    let path = format!("/claims/{}", id.expose());
    let answer = crate::cli::http::call(service, Method::GET, &path, None).await?;
    match answer.status {
        200 => {}
        404 => return not_held("that claim no longer holds any lease"),
        _ => return Err(unanswered(&answer)),
    }
    let claim = ClaimBody::from_json(&answer.body).map_err(|err| unreadable("claim", &err))?;
    // GET /claims/{id} shows the leases of it still held, each checked.
    let Some(held) = claim
        .leases
        .iter()
        .find(|lease| lease.kind() == target.kind && lease.name() == target.name.as_str())
    else {
        return not_held(&format!("the claim around this run does not hold {target}"));
    };
    if let Err(why) = covers(held, request) {
        return not_held(&format!("the claim's lease of {target}: {why}"));
    }
    Ok(Some(LeaseVariables {
        name: target.name.to_string(),
        id: held.id().to_owned(),
        fencing_token: Some(held.fencing_token()),
        kind: target.kind,
        limit: match held {
            LeaseBody::Semaphore(lease) => Some(lease.limit),
            LeaseBody::Lock(_) => None,
        },
    }))
}

/// Whether the lease `held` (of `request`'s name and kind) covers what
/// `request` asks; else why not.
fn covers(held: &LeaseBody, request: &Request) -> Result<(), String> {
    match held {
        LeaseBody::Lock(lease) if lease.shared && !request.shared => {
            Err("its lease is shared, and this run asks for the lock alone".to_owned())
        }
        LeaseBody::Lock(_) => Ok(()),
        LeaseBody::Semaphore(lease) => {
            let (has, asks) = (lease.permits, request.permits.map_or(1, u64::from));
            if has < asks {
                Err(format!(
                    "its lease has {has} permits, and this run asks for {asks}"
                ))
            } else {
                Ok(())
            }
        }
    }
}

fn not_covered(request: &Request, why: &str) -> Result<bool, Failure> {
    say(format!(
        "{} names {}, but {why}: waiting in line like any other",
        variables::NAME,
        request.target
    ));
    Ok(false)
}

/// The failure of an answer that is neither yes nor no.
fn unanswered(answer: &Answer) -> Failure {
    match answer.outcome() {
        Outcome::Refused => refused("request", answer, false),
        _ => unexpected(
            "cannot check the lease of the baton run around this one",
            answer,
            "",
        ),
    }
}
