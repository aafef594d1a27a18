//! A `baton run` inside another's COMMAND, on the same name: it goes ahead
//! at once only when the service confirms that the outer run's lease (its
//! variables) is still held and covers what the inner one asks.

use reqwest::Method;

use super::exit::{Failure, REFUSED, UNAVAILABLE};
use super::http::{unreadable, Service};
use super::line::Request;
use super::messages::say;
use super::variables::{self, LeaseVariables};
use crate::domain::LeaseId;
use crate::wire::LeaseBody;

/// Whether the lease of a `baton run` around this one (its variables, for
/// this name) covers `request`: the service must confirm that it is still
/// held, of the same kind (a lease id is of one kind only), and at least
/// what `request` asks (an exclusive lease covers a shared ask, not the
/// other way round; a semaphore lease covers as many permits as it has).
///
/// # Errors
/// The service refused the token (77), or cannot be asked (69).
pub(super) async fn covered(
    service: &Service,
    request: &Request,
    outer: &LeaseVariables,
) -> Result<bool, Failure> {
    let target = &request.target;
    let not_covered = |why: &str| {
        say(format!(
            "{} names {target}, but {why}: waiting in line like any other",
            variables::NAME
        ));
        Ok(false)
    };
    if LeaseId::parse(&outer.id).is_err() {
        return not_covered(&format!("{} is not a lease id", variables::ID));
    }
    let path = target.lease_path(&outer.id);
    let answer = super::http::call(service, Method::GET, &path, None).await?;
    match answer.status {
        200 => {}
        404 => {
            return not_covered(&format!(
                "its lease is no longer held{}",
                if outer.kind == target.kind {
                    String::new()
                } else {
                    format!(" or is a {}'s", outer.kind)
                }
            ))
        }
        401 | 403 => {
            return Err(Failure::new(
                REFUSED,
                format!(
                    "the service refused the request: {} (check --token or BATON_TOKEN)",
                    answer.describe()
                ),
            ))
        }
        _ => {
            return Err(Failure::new(
                UNAVAILABLE,
                format!(
                    "cannot check the lease of the baton run around this one: {} (check --url or BATON_URL)",
                    answer.describe()
                ),
            ))
        }
    }
    let held =
        LeaseBody::from_json(target.kind, &answer.body).map_err(|err| unreadable("lease", &err))?;
    match held {
        LeaseBody::Lock(lease) if lease.shared && !request.shared => {
            not_covered("its lease is shared, and this run asks for the lock alone")
        }
        LeaseBody::Lock(_) => Ok(true),
        LeaseBody::Semaphore(lease) => {
            let (has, asks) = (lease.permits, request.permits.map_or(1, u64::from));
            if has < asks {
                not_covered(&format!(
                    "its lease has {has} permits, and this run asks for {asks}"
                ))
            } else {
                Ok(true)
            }
        }
    }
}
