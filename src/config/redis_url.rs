//! How the service reaches Redis: the mode, the URLs each mode takes, and a
//! URL with its passwords hidden wherever it is shown.

use clap::ValueEnum;

use super::error::ConfigError;

/// How the service reaches Redis.
#[derive(ValueEnum, Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RedisMode {
    /// One Redis server (or a proxy in front of several).
    #[default]
    Standalone,
    /// Redis Cluster: `BATON_REDIS_URL` lists seed nodes, comma-separated.
    Cluster,
    /// Redis Sentinel: `BATON_REDIS_URL` lists sentinels, comma-separated.
    Sentinel,
}

/// Whether `url` is what `mode` takes: one Redis URL, or a comma-separated
/// list of them in cluster and sentinel modes.
///
/// # Errors
/// `BATON_REDIS_URL`, its value without passwords, and the forms expected.
pub(super) fn check_urls(mode: RedisMode, url: &str) -> Result<(), ConfigError> {
    let urls: Vec<&str> = match mode {
        RedisMode::Standalone => vec![url.trim()],
        RedisMode::Cluster | RedisMode::Sentinel => url
            .split(',')
            .map(str::trim)
            .filter(|u| !u.is_empty())
            .collect(),
    };
    let expected = match mode {
        RedisMode::Standalone => {
            "expected one Redis URL: redis://[user:password@]host[:port][/db], rediss://… or redis+unix:///path[?db=N&pass=…]"
        }
        RedisMode::Cluster | RedisMode::Sentinel => {
            "expected a comma-separated list of Redis URLs (redis://[user:password@]host[:port], rediss://…)"
        }
    };
    let readable = |url: &&str| redis::IntoConnectionInfo::into_connection_info(*url).is_ok();
    if urls.is_empty() || !urls.iter().all(readable) {
        return Err(ConfigError {
            setting: "BATON_REDIS_URL (--redis-url)".into(),
            value: Some(redact_url(url)),
            expected: expected.into(),
        });
    }
    Ok(())
}

/// Hides every password in a Redis URL (or a comma-separated list of them),
/// in each form baton accepts: `redis://:secret@host`, `redis://user:secret@host`,
/// `rediss://…`, and `redis+unix:///path?pass=secret` / `unix:///path?pass=secret`.
pub fn redact_url(url: &str) -> String {
    url.split(',')
        .map(redact_one_url)
        .collect::<Vec<_>>()
        .join(",")
}

fn redact_one_url(url: &str) -> String {
    let (before_query, query) = match url.split_once('?') {
        Some((before, query)) => (before, Some(query)),
        None => (url, None),
    };
    let mut out = match before_query.split_once("://") {
        Some((scheme, rest)) => match rest.rsplit_once('@') {
            Some((userinfo, host)) => {
                let user = userinfo.split_once(':').map_or(userinfo, |(user, _)| user);
                format!("{scheme}://{user}:***@{host}")
            }
            None => before_query.to_owned(),
        },
        // Not a URL at all: it could be a password pasted in the wrong place.
        None if !before_query.is_empty() => "***".to_owned(),
        None => String::new(),
    };
    if let Some(query) = query {
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((key, _))
                    if key.eq_ignore_ascii_case("pass") || key.eq_ignore_ascii_case("password") =>
                {
                    format!("{key}=***")
                }
                _ => pair.to_owned(),
            })
            .collect();
        out.push('?');
        out.push_str(&pairs.join("&"));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_are_redacted_in_every_url_form() {
        for (url, shown) in [
            ("redis://:s3cret@redis:6379/2", "redis://:***@redis:6379/2"),
            (
                "redis://app:s3cret@redis:6379",
                "redis://app:***@redis:6379",
            ),
            (
                "rediss://app:s3cret@redis:6380",
                "rediss://app:***@redis:6380",
            ),
            (
                "redis+unix:///run/redis.sock?db=1&pass=s3cret",
                "redis+unix:///run/redis.sock?db=1&pass=***",
            ),
            (
                "unix:///run/redis.sock?pass=s3cret",
                "unix:///run/redis.sock?pass=***",
            ),
            (
                "redis://a:s3cret@x:1,redis://b:s3cret@y:2",
                "redis://a:***@x:1,redis://b:***@y:2",
            ),
            ("redis://127.0.0.1:6379", "redis://127.0.0.1:6379"),
        ] {
            assert_eq!(redact_url(url), shown);
        }
    }
}
