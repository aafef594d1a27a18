//! Settings from the `BATON_*` environment variables, each with a default that
//! works on a developer's machine.

use std::time::Duration;

/// The largest `wait_ms` accepted unless `BATON_MAX_WAIT_MS` says otherwise.
pub const DEFAULT_MAX_WAIT_MS: u64 = 300_000;

/// Everything the service can be told at start.
#[derive(Clone)]
pub struct Settings {
    /// `BATON_LISTEN`: address to serve on.
    pub listen: String,
    /// `BATON_REDIS_URL`: `redis://` or `rediss://`, with password and db.
    pub redis_url: String,
    /// `BATON_KEY_PREFIX`: prefix of every Redis key and channel the service uses.
    pub key_prefix: String,
    /// `BATON_MAX_WAIT_MS`: the largest `wait_ms` accepted.
    pub max_wait_ms: u64,
    /// `BATON_API_TOKENS`: bearer tokens for `/locks` and `/semaphores`; empty: open.
    pub api_tokens: Vec<String>,
    /// `BATON_ADMIN_TOKENS`: tokens that may also force-release.
    pub admin_tokens: Vec<String>,
    /// `BATON_MAX_BODY_BYTES`: the largest request body accepted.
    pub max_body_bytes: usize,
    /// `BATON_MAX_WAITERS`: how many requests may wait at once on this instance.
    pub max_waiters: usize,
    /// `BATON_REQUEST_TIMEOUT_MS`: how long a request may take beyond the
    /// longest wait.
    pub request_timeout: Duration,
    /// `BATON_REDIS_TIMEOUT_MS`: how long one Redis call may take.
    pub redis_timeout: Duration,
    /// `BATON_WORKER_THREADS`: threads of the async runtime.
    pub worker_threads: usize,
}

impl Settings {
    /// Reads the process environment.
    ///
    /// # Errors
    /// A sentence naming the variable that could not be read.
    pub fn from_env() -> Result<Self, String> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads settings through `lookup`, so tests need not touch the environment.
    ///
    /// # Errors
    /// A sentence naming the variable that could not be read.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let text = |key: &str, default: &str| lookup(key).unwrap_or_else(|| default.to_owned());
        let number = |key: &str, default: u64| -> Result<u64, String> {
            match lookup(key) {
                None => Ok(default),
                Some(raw) => raw
                    .trim()
                    .parse()
                    .map_err(|_| format!("{key} must be a whole number, not {raw:?}")),
            }
        };
        let tokens = |key: &str| -> Vec<String> {
            lookup(key)
                .unwrap_or_default()
                .split(',')
                .map(str::trim)
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let settings = Self {
            listen: text("BATON_LISTEN", "127.0.0.1:8080"),
            redis_url: text("BATON_REDIS_URL", "redis://127.0.0.1:6379"),
            key_prefix: text("BATON_KEY_PREFIX", "baton:"),
            max_wait_ms: number("BATON_MAX_WAIT_MS", DEFAULT_MAX_WAIT_MS)?,
            api_tokens: tokens("BATON_API_TOKENS"),
            admin_tokens: tokens("BATON_ADMIN_TOKENS"),
            max_body_bytes: usize::try_from(number("BATON_MAX_BODY_BYTES", 16 * 1024)?)
                .map_err(|_| "BATON_MAX_BODY_BYTES is too large".to_string())?,
            max_waiters: usize::try_from(number("BATON_MAX_WAITERS", 100_000)?)
                .map_err(|_| "BATON_MAX_WAITERS is too large".to_string())?,
            request_timeout: Duration::from_millis(number("BATON_REQUEST_TIMEOUT_MS", 10_000)?),
            redis_timeout: Duration::from_millis(number("BATON_REDIS_TIMEOUT_MS", 1_000)?),
            worker_threads: match lookup("BATON_WORKER_THREADS") {
                Some(_) => usize::try_from(number("BATON_WORKER_THREADS", 1)?)
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or("BATON_WORKER_THREADS must be at least 1")?,
                None => default_worker_threads(),
            },
        };
        if settings.max_wait_ms > 86_400_000 {
            return Err("BATON_MAX_WAIT_MS must be at most 86400000 (a day)".into());
        }
        if settings.redis_timeout.is_zero() || settings.request_timeout.is_zero() {
            return Err(
                "BATON_REDIS_TIMEOUT_MS and BATON_REQUEST_TIMEOUT_MS must be above 0".into(),
            );
        }
        Ok(settings)
    }

    /// The Redis URL with any password hidden, for logs.
    pub fn redis_url_redacted(&self) -> String {
        redact_url(&self.redis_url)
    }

    /// The longest any request may take: the longest wait plus the request timeout.
    pub fn request_deadline(&self) -> Duration {
        Duration::from_millis(self.max_wait_ms) + self.request_timeout
    }
}

/// One thread per CPU, but a single one on machines with two CPUs or fewer:
/// the work is waiting on Redis, and there a second thread mostly wakes the
/// first (measured: about 40% more CPU per operation) while Redis wants a core.
fn default_worker_threads() -> usize {
    let cpus = std::thread::available_parallelism().map_or(1, std::num::NonZeroUsize::get);
    if cpus <= 2 {
        1
    } else {
        cpus
    }
}

/// `redis://user:secret@host/0` -> `redis://user:***@host/0`.
fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let Some((userinfo, host)) = rest.rsplit_once('@') else {
        return url.to_owned();
    };
    let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
    format!("{scheme}://{user}:***@{host}")
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use super::*;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, String> {
        let vars: HashMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        Settings::from_lookup(|k| vars.get(k).cloned())
    }

    #[test]
    fn defaults_work_on_a_developer_machine() {
        let s = settings(&[]).unwrap();
        assert_eq!(s.listen, "127.0.0.1:8080");
        assert_eq!(s.redis_url, "redis://127.0.0.1:6379");
        assert_eq!(s.key_prefix, "baton:");
        assert_eq!(s.max_wait_ms, 300_000);
        assert!(s.api_tokens.is_empty() && s.admin_tokens.is_empty());
        assert_eq!(s.max_body_bytes, 16 * 1024);
    }

    #[test]
    fn tokens_are_comma_separated_and_trimmed() {
        let s = settings(&[
            ("BATON_API_TOKENS", " a, b ,,c"),
            ("BATON_ADMIN_TOKENS", "root"),
        ])
        .unwrap();
        assert_eq!(s.api_tokens, ["a", "b", "c"]);
        assert_eq!(s.admin_tokens, ["root"]);
    }

    #[test]
    fn worker_threads_can_be_set_but_not_to_zero() {
        assert_eq!(
            settings(&[("BATON_WORKER_THREADS", "3")])
                .unwrap()
                .worker_threads,
            3
        );
        assert!(settings(&[("BATON_WORKER_THREADS", "0")]).is_err());
        assert!(settings(&[]).unwrap().worker_threads >= 1);
    }

    #[test]
    fn bad_numbers_name_the_variable() {
        let err = settings(&[("BATON_MAX_WAIT_MS", "soon")]).err().unwrap();
        assert!(err.contains("BATON_MAX_WAIT_MS"));
    }

    #[test]
    fn passwords_are_redacted() {
        assert_eq!(
            redact_url("redis://:s3cret@redis:6379/2"),
            "redis://:***@redis:6379/2"
        );
        assert_eq!(
            redact_url("rediss://app:s3cret@redis:6380"),
            "rediss://app:***@redis:6380"
        );
        assert_eq!(
            redact_url("redis://127.0.0.1:6379"),
            "redis://127.0.0.1:6379"
        );
    }
}
