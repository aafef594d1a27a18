//! The one acquire loop's rules, shared by a lease (`line/wait.rs`, a
//! ticket's wait included) and a claim of several names (`run/claim.rs`): the deadline
//! of `--wait`; a wait longer than the service's maximum waited in steps of
//! its `max_wait_ms`; a pause after an answer that came early (a wait cut
//! short), so that a busy name is not asked in a tight loop; a proxy that
//! cuts long requests off noticed, and waited through in shorter requests;
//! failures that may pass retried with a backoff for up to 60 s in a row;
//! a signal that ends any of it. What a request asks and what its answer
//! grants is the caller's; when and how often it asks again is decided here.

use std::time::Duration;

use tokio::time::Instant;

use crate::cli::answer::{refused, rejected, Answer, Outcome};
use crate::cli::duration::{human, millis};
use crate::cli::exit::{signal_status, Failure, UNAVAILABLE};
use crate::cli::messages::{signal_name, warn};
use crate::cli::signals::Signals;

/// Failures that may pass are retried for at most this long in a row.
const RETRY_FOR: Duration = Duration::from_secs(60);

/// A failure that may pass: an answer (429, 5xx) or none at all.
pub enum Retry {
    Answer(Answer),
    NoAnswer(String),
}

impl Retry {
    fn describe(&self) -> String {
        match self {
            Retry::Answer(answer) => answer.describe(),
            Retry::NoAnswer(why) => why.clone(),
        }
    }

    /// Whether it looks like a proxy's timeout: no answer, or a gateway's
    /// 502 or 504.
    fn cut_off(&self) -> bool {
        match self {
            Retry::Answer(answer) => matches!(answer.status, 502 | 504),
            Retry::NoAnswer(_) => true,
        }
    }
}

/// The state of one acquisition's requests, from the first to the last.
pub struct Attempts<'a> {
    /// What is waited for, for messages: `lock 'x'`, `lock 'a', lock 'b'`.
    label: String,
    deadline: Instant,
    /// The longest wait of one request, once the service or a proxy said so.
    step: Option<Duration>,
    /// Since when failures that may pass have come in a row.
    failing_since: Option<Instant>,
    backoff: Duration,
    /// The request under way: when it was sent, how long it was to wait,
    /// and how long its answer took.
    sent: Instant,
    wait: Duration,
    took: Duration,
    signals: &'a mut Signals,
}

impl<'a> Attempts<'a> {
    /// The requests for `label`, for up to `wait` from now.
    pub fn new(label: String, wait: Duration, signals: &'a mut Signals) -> Self {
        let now = Instant::now();
        Self {
            label,
            deadline: now + wait,
            step: None,
            failing_since: None,
            backoff: Duration::from_secs(1),
            sent: now,
            wait: Duration::ZERO,
            took: Duration::ZERO,
            signals,
        }
    }

    /// When `--wait` runs out.
    pub fn deadline(&self) -> Instant {
        self.deadline
    }

    /// Whether `--wait` has run out.
    pub fn expired(&self) -> bool {
        Instant::now() >= self.deadline
    }

    /// How long the next request may wait: what is left of `--wait`, at
    /// most one step.
    pub fn next_wait(&self) -> Duration {
        let left = self.deadline.saturating_duration_since(Instant::now());
        self.step.map_or(left, |step| left.min(step))
    }

    /// A request that waits `wait` is sent now.
    pub fn sending(&mut self, wait: Duration) {
        self.sent = Instant::now();
        self.wait = wait;
    }

    /// Its answer (or the lack of one) came now.
    pub fn came(&mut self) {
        self.took = self.sent.elapsed();
    }

    /// The signals, for a caller that waits on its request and on them.
    pub fn signals(&mut self) -> &mut Signals {
        self.signals
    }

    /// The end of the wait on a `signal`.
    pub fn signalled(&self, signal: i32) -> Failure {
        Failure::new(
            signal_status(signal),
            format!(
                "got {} while waiting for {}; giving up",
                signal_name(signal),
                self.label
            ),
        )
    }

    /// An answer that is no failure came: the retries start over.
    pub fn answered(&mut self) {
        self.failing_since = None;
        self.backoff = Duration::from_secs(1);
    }

    /// Whether the answer came before half its wait was over (a wait cut
    /// short: a step of `max_wait_ms`, a proxy, a grant that went to
    /// another).
    pub fn early(&self) -> bool {
        self.took < self.wait / 2
    }

    /// After an early answer, a pause of a second (less when `--wait` ends
    /// sooner) before the next request.
    ///
    /// # Errors
    /// A signal came meanwhile.
    pub async fn pause_if_early(&mut self) -> Result<(), Failure> {
        if self.early() {
            let left = self.deadline.saturating_duration_since(Instant::now());
            self.nap(Duration::from_secs(1).min(left)).await?;
        }
        Ok(())
    }

    /// The service refused the wait as longer than its maximum,
    /// `max_wait_ms`: whether the next requests wait in steps of it instead.
    pub fn step_down(&mut self, max_wait_ms: Option<u64>) -> bool {
        match max_wait_ms {
            Some(max) if max > 0 && max < millis(self.wait) => {
                self.step = Some(Duration::from_millis(max));
                true
            }
            _ => false,
        }
    }

    /// A failure that may pass: after a proxy's cut, shorter requests at
    /// once; else the next try after a backoff (1 s, doubled up to 8 s).
    ///
    /// # Errors
    /// Failures have come for 60 s in a row, or `--wait` ran out (69); a
    /// signal came during the backoff.
    pub async fn failed(&mut self, why: Retry) -> Result<(), Failure> {
        // A waiting request cut off early (no answer, or a gateway's 502/504
        // after 10 s or more): a proxy's timeout, most likely. Wait in
        // shorter requests.
        let took = self.took;
        if took >= Duration::from_secs(10) && took < self.wait && why.cut_off() {
            let shorter = took * 3 / 4;
            self.step = Some(shorter);
            warn(format!(
                "a waiting request was cut off after {} ({}); waiting in requests of {}",
                human(took),
                why.describe(),
                human(shorter)
            ));
            return Ok(());
        }
        let now = Instant::now();
        let since = *self.failing_since.get_or_insert(now);
        if now >= self.deadline || now - since >= RETRY_FOR {
            return Err(Failure::new(
                UNAVAILABLE,
                format!("{}; gave up after {}", why.describe(), human(now - since)),
            ));
        }
        warn(format!(
            "{}; retrying in {}",
            why.describe(),
            human(self.backoff)
        ));
        self.nap(self.backoff.min(self.deadline - now)).await?;
        self.backoff = (self.backoff * 2).min(Duration::from_secs(8));
        Ok(())
    }

    /// What every acquisition does with an answer that neither grants nor
    /// keeps a place: a wait over the service's maximum steps down to it, a
    /// failure that may pass is tried again; a rejection (64), a refusal
    /// (77) of the `noun` (request, claim) or anything else (`unexpected`
    /// says what) ends it.
    ///
    /// # Errors
    /// The end, as above; or as [`Attempts::failed`].
    pub async fn otherwise(
        &mut self,
        answer: Answer,
        noun: &str,
        unexpected: impl FnOnce(&Answer) -> Failure,
    ) -> Result<(), Failure> {
        match answer.outcome() {
            Outcome::Rejected { max_wait_ms } if self.step_down(max_wait_ms) => Ok(()),
            Outcome::Rejected { .. } => Err(rejected(noun, &answer)),
            Outcome::Refused => Err(refused(noun, &answer, false)),
            Outcome::Retry => self.failed(Retry::Answer(answer)).await,
            _ => Err(unexpected(&answer)),
        }
    }

    /// A pause that a signal ends.
    ///
    /// # Errors
    /// The signal.
    pub async fn nap(&mut self, pause: Duration) -> Result<(), Failure> {
        tokio::select! {
            () = tokio::time::sleep(pause) => Ok(()),
            signal = self.signals.recv() => Err(self.signalled(signal)),
        }
    }
}
