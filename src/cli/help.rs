//! The text for people of `baton --help` and each subcommand's `--help`
//! that is more than one option's line: what `baton run` promises, how a
//! freeze's window is written, and the exit statuses each subcommand can
//! return (only those). The sentences a failing command prints are in
//! [`crate::cli::answer`] (answers) and beside the code that ends so.

pub(crate) const EXIT_STATUSES: &str = "Exit status:
  64    bad usage, or the service found the request invalid (400)
  66    no such freeze or ticket (404)
  69    the service could not be reached, or answered 5xx
  75    not acquired within --wait; with freeze --check: the name is frozen
  76    the lease was lost (expired or force-released)
  77    the service refused the token (401, 403)
  79    superseded: a newer --newest-wins request took this one's place in line";

pub(crate) const RUN_AFTER_HELP: &str =
    "COMMAND runs in a process group of its own, with BATON_LOCK_NAME,
BATON_FENCING_TOKEN and BATON_LEASE_ID (a secret) in its environment; the lease
is refreshed every ttl/3 and held until every process of the group has exited.
If the lease is lost (a refresh answered 404, or refreshes failing), the group
gets SIGTERM, then SIGKILL after --grace, so early that it has ended before the
lease can lapse: SIGTERM goes out --grace plus one refresh round trip (ttl/10,
0.5s to 5s) before the earliest possible expiry. SIGINT, SIGTERM, SIGHUP: the
group is stopped the same way, the lease released, and baton exits 128+N.
Should baton itself be killed (SIGKILL of it or of its process group), a
guard process in a session of its own stops the group the same way and then
releases the lease: COMMAND never runs on beside the next holder.
Inside a `baton run` of NAME (BATON_LOCK_NAME and BATON_LEASE_ID set), a
nested `baton run` of the same NAME runs its command at once only when the
service confirms that lease is still held, of the same kind, and covers what
the nested run asks (an exclusive lease covers --shared, not the other way
round; a semaphore lease covers as many --permits as it has); else it waits
in line like any other. COMMAND also gets BATON_KIND (lock or semaphore) and,
for a semaphore, BATON_LIMIT.
Under a claim (--lock, --semaphore) the same holds for every lease of it: the
loss of any stops COMMAND, --on-yield answers a yield request on any of its
names, and a nested `baton run` of a name the claim holds (BATON_CLAIM_ID set)
runs at once only when the service confirms that the claim still holds that
name in a mode that covers the nested run.
A DURATION is seconds, or with a unit: 90, 1.5, 30s, 10m, 1h. While
acquiring, a service that answers 5xx is retried until --wait runs out (at
most 60s in a row); a URL where nothing answers at all fails at once (69).

Exit status:
  its own  COMMAND ran under the lock and exited
  64       bad usage, or the service found the request invalid (400)
  69       the service could not be reached, or answered 5xx; COMMAND did not run
  75       not acquired within --wait; COMMAND did not run
  76       the lease was lost while COMMAND ran; COMMAND was stopped
  77       the service refused the token (401, 403); COMMAND did not run
  79       superseded: a newer --newest-wins request took this one's place in
           line; COMMAND did not run
  127      COMMAND not found (nothing was acquired)
  128+N    baton got signal N (129 SIGHUP, 130 SIGINT, 143 SIGTERM)";

/// One line of an exit status in a subcommand's help.
pub(crate) const USAGE_400: &str =
    "  64    bad usage, or the service found the request invalid (400)";
pub(crate) const NO_SUCH_404: &str = "  66    no such freeze or ticket (404)";
pub(crate) const UNAVAILABLE_5XX: &str =
    "  69    the service could not be reached, or answered 5xx";
pub(crate) const NOT_ACQUIRED_IN_WAIT: &str = "  75    not acquired within --wait";
pub(crate) const LOST_LEASE: &str = "  76    the lease was lost (expired or force-released)";
pub(crate) const REFUSED_TOKEN: &str = "  77    the service refused the token (401, 403)";
pub(crate) const SUPERSEDED_LINE: &str =
    "  79    superseded: a newer --newest-wins request took this one's place in line";
pub(crate) const FROZEN_NOW: &str = "  75    with --check: NAME is frozen now";
pub(crate) const SIGNALLED: &str =
    "  128+N baton got signal N while waiting (130 SIGINT, 143 SIGTERM)";

/// The end of a one-call subcommand's help: where the service is, and the
/// exit statuses that subcommand can return (only those).
pub(crate) fn call_help(statuses: &[&str]) -> String {
    format!(
        "The service is BATON_URL (or --url), the token BATON_TOKEN.\n\nExit status:\n{}",
        statuses.join("\n")
    )
}

/// The same for the freeze subcommands, with how a window is written.
pub(crate) fn freeze_help(statuses: &[&str]) -> String {
    format!(
        "The service is BATON_URL (or --url), the token BATON_TOKEN.
A freeze is one-off (--for DURATION, or --until TIME [--from TIME]: RFC 3339,
or a date YYYY-MM-DD, which is midnight UTC at the start of that day) or
recurring (--start CRON --end CRON [--timezone ZONE], five-field cron as
GitLab's deploy freezes write them, e.g. --start '0 23 * * 5' --end '0 7 * * 1').
`baton freeze --check NAME` is a deploy job's guard, like GitLab's
$CI_DEPLOY_FREEZE: it prints the freezes that hold NAME now and exits 75, or
exits 0 when none does.

Exit status:\n{}",
        statuses.join("\n")
    )
}
