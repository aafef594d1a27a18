//! Reading the settings: from the command line, or from the environment
//! through the same parser, then the checks across settings (the Redis URLs
//! for the mode, the token files read); and a clap error as one line.

use std::ffi::OsString;

use clap::error::{ContextKind, ContextValue, ErrorKind};
use clap::{CommandFactory, FromArgMatches};

use super::error::ConfigError;
use super::redis_url::{check_urls, redact_url};
use super::secrets::read_tokens;
use super::settings::{Cli, Settings};
use super::variables::variables;

/// What the command line asked for.
pub enum Invocation {
    /// Serve with these settings.
    Run(Box<Settings>),
    /// `--help` or `--version`: print this on stdout and exit 0.
    Print(String),
}

impl Cli {
    /// Reads the command line and the process environment.
    ///
    /// # Errors
    /// The first setting or flag that could not be read.
    pub fn from_args<I, T>(args: I) -> Result<Invocation, ConfigError>
    where
        I: IntoIterator<Item = T>,
        T: Into<OsString> + Clone,
    {
        parse(Self::command(), args)
    }
}

fn parse<I, T>(command: clap::Command, args: I) -> Result<Invocation, ConfigError>
where
    I: IntoIterator<Item = T>,
    T: Into<OsString> + Clone,
{
    // The declared arguments, with their variables, to name them in errors.
    let reference = Cli::command();
    let matches = match command.try_get_matches_from(args) {
        Ok(matches) => matches,
        Err(err)
            if matches!(
                err.kind(),
                ErrorKind::DisplayHelp | ErrorKind::DisplayVersion
            ) =>
        {
            return Ok(Invocation::Print(err.render().to_string()));
        }
        Err(err) => return Err(one_line(&reference, &err)),
    };
    let cli = Cli::from_arg_matches(&matches).map_err(|err| one_line(&reference, &err))?;
    Ok(Invocation::Run(Box::new(cli.settings.check()?)))
}

impl Settings {
    /// Reads the process environment (no flags).
    ///
    /// # Errors
    /// The first setting that could not be read.
    pub fn from_env() -> Result<Self, ConfigError> {
        Self::from_lookup(|key| std::env::var(key).ok())
    }

    /// Reads settings through `lookup` instead of the environment, so tests
    /// need not touch the process environment.
    ///
    /// # Errors
    /// The first setting that could not be read.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self, ConfigError> {
        // The same parser as the command line, fed each variable as its flag,
        // with clap's own reading of the environment turned off.
        let command = Cli::command().mut_args(|arg| arg.env(None::<&'static str>));
        let mut args = vec![OsString::from("baton")];
        for (variable, flag) in variables() {
            if let Some(value) = lookup(&variable) {
                args.push(format!("--{flag}={value}").into());
            }
        }
        match parse(command, args)? {
            Invocation::Run(settings) => Ok(*settings),
            Invocation::Print(_) => unreachable!("no --help or --version is passed"),
        }
    }

    /// The checks that involve more than one setting, and the token files read.
    fn check(mut self) -> Result<Self, ConfigError> {
        check_urls(self.redis_mode, &self.redis_url)?;
        if !self.webhook_hosts.is_empty() && self.webhook_secret.is_empty() {
            return Err(ConfigError {
                setting: "BATON_WEBHOOK_SECRET (--webhook-secret)".to_owned(),
                value: None,
                expected: "a key to sign turn notices with, since BATON_WEBHOOK_HOSTS is set"
                    .to_owned(),
            });
        }
        if let Some(path) = &self.api_tokens_file {
            let tokens = read_tokens(path, "BATON_API_TOKENS_FILE (--api-tokens-file)")?;
            self.api_tokens.extend(tokens);
        }
        if let Some(path) = &self.admin_tokens_file {
            let tokens = read_tokens(path, "BATON_ADMIN_TOKENS_FILE (--admin-tokens-file)")?;
            self.admin_tokens.extend(tokens);
        }
        Ok(self)
    }
}

/// Turns a clap error into one line naming the variable and its flag; an
/// unknown flag or subcommand keeps clap's "did you mean".
pub fn one_line(command: &clap::Command, err: &clap::Error) -> ConfigError {
    let context = |kind| match err.get(kind) {
        Some(ContextValue::String(s)) => Some(s.clone()),
        _ => None,
    };
    let arg = context(ContextKind::InvalidArg);
    // "--max-wait-ms <MAX_WAIT_MS>" -> the argument declared as max-wait-ms.
    let declared = arg.as_deref().and_then(|shown| {
        let long = shown.trim_start_matches('-').split([' ', '=']).next()?;
        command.get_arguments().find(|a| a.get_long() == Some(long))
    });
    let about_a_value = match (err.kind(), err.get(ContextKind::ValidValue)) {
        (ErrorKind::ValueValidation, _) => true,
        (ErrorKind::InvalidValue, Some(ContextValue::Strings(valid))) => !valid.is_empty(),
        _ => false,
    };
    let (Some(declared), true) = (declared, about_a_value) else {
        // Not about a value: an unknown flag or subcommand, a missing value.
        let rendered = err.render().to_string();
        let first = rendered
            .lines()
            .next()
            .unwrap_or("bad command line")
            .trim_start_matches("error: ");
        let tip = rendered
            .lines()
            .find_map(|line| line.trim().strip_prefix("tip: "))
            .map(|tip| format!(" ({tip})"))
            .unwrap_or_default();
        return ConfigError {
            setting: "command line".into(),
            value: None,
            expected: format!("{first}{tip}; see baton --help"),
        };
    };
    let long = declared.get_long().unwrap_or_default();
    let setting = match declared.get_env().and_then(|e| e.to_str()) {
        Some(variable) => format!("{variable} (--{long})"),
        None => format!("--{long}"),
    };
    let raw = context(ContextKind::InvalidValue).unwrap_or_default();
    let value = match long {
        "redis-url" => Some(redact_url(&raw)),
        "api-tokens" | "admin-tokens" => None,
        _ => Some(raw),
    };
    let expected = match (err.kind(), err.get(ContextKind::ValidValue)) {
        (ErrorKind::InvalidValue, Some(ContextValue::Strings(valid))) => {
            format!("expected one of {}", valid.join(", "))
        }
        _ => std::error::Error::source(err)
            .map_or_else(|| "not a valid value".to_owned(), ToString::to_string),
    };
    ConfigError {
        setting,
        value,
        expected,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;
    use std::time::Duration;

    use super::*;
    use crate::config::redis_url::RedisMode;
    use crate::config::settings::LogFormat;

    fn settings(vars: &[(&str, &str)]) -> Result<Settings, ConfigError> {
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
        assert_eq!(s.redis_mode, RedisMode::Standalone);
        assert_eq!(s.redis_sentinel_master, "mymaster");
        assert_eq!(s.redis_wait_replicas, 0);
        assert_eq!(s.log_format, LogFormat::Text);
        assert_eq!(s.header_timeout, Duration::from_secs(10));
        assert_eq!(s.idle_timeout, Duration::from_secs(60));
        assert_eq!(s.max_connections, 10_000);
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
    fn tokens_can_come_from_files_as_container_secrets() {
        let dir = std::env::temp_dir().join(format!("baton-config-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let api = dir.join("api");
        let admin = dir.join("admin");
        std::fs::write(&api, "tok-1\ntok-2, tok-3\n").unwrap();
        std::fs::write(&admin, "root\n").unwrap();
        let s = settings(&[
            ("BATON_API_TOKENS", "a"),
            ("BATON_API_TOKENS_FILE", api.to_str().unwrap()),
            ("BATON_ADMIN_TOKENS_FILE", admin.to_str().unwrap()),
        ])
        .unwrap();
        assert_eq!(s.api_tokens, ["a", "tok-1", "tok-2", "tok-3"]);
        assert_eq!(s.admin_tokens, ["root"]);
        let missing = dir.join("missing");
        let err = settings(&[("BATON_API_TOKENS_FILE", missing.to_str().unwrap())]).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("BATON_API_TOKENS_FILE (--api-tokens-file) = ")
                && err.to_string().contains("a readable file of tokens"),
            "{err}"
        );
        std::fs::write(&api, "\n").unwrap();
        let err = settings(&[("BATON_API_TOKENS_FILE", api.to_str().unwrap())]).unwrap_err();
        assert!(err.to_string().contains("at least one token"), "{err}");
        let shown = format!("{s:?}");
        assert!(!shown.contains("tok-"), "{shown}");
        std::fs::remove_dir_all(&dir).unwrap();
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
    fn a_bad_number_names_the_variable_the_value_and_the_form() {
        let err = settings(&[("BATON_MAX_WAIT_MS", "soon")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "BATON_MAX_WAIT_MS (--max-wait-ms) = \"soon\": expected a whole number of milliseconds from 0 to 86400000"
        );
        let err = settings(&[("BATON_MAX_WAIT_MS", "86400001")]).unwrap_err();
        assert!(err.to_string().contains("86400001"), "{err}");
    }

    #[test]
    fn a_bad_choice_lists_the_choices() {
        let err = settings(&[("BATON_LOG_FORMAT", "xml")]).unwrap_err();
        assert_eq!(
            err.to_string(),
            "BATON_LOG_FORMAT (--log-format) = \"xml\": expected one of text, json"
        );
        let err = settings(&[("BATON_REDIS_MODE", "cluster ")]).unwrap_err();
        assert!(err.to_string().starts_with("BATON_REDIS_MODE"), "{err}");
    }

    #[test]
    fn new_settings_are_read() {
        let s = settings(&[
            ("BATON_REDIS_MODE", "sentinel"),
            ("BATON_REDIS_URL", "redis://a:26379, redis://b:26379"),
            ("BATON_REDIS_SENTINEL_MASTER", "main"),
            ("BATON_LOG_FORMAT", "json"),
            ("BATON_HEADER_TIMEOUT_MS", "250"),
            ("BATON_IDLE_TIMEOUT_MS", "500"),
            ("BATON_MAX_CONNECTIONS", "50"),
            ("BATON_REDIS_WAIT_REPLICAS", "1"),
        ])
        .unwrap();
        assert_eq!(s.redis_wait_replicas, 1);
        assert_eq!(s.redis_mode, RedisMode::Sentinel);
        assert_eq!(s.redis_sentinel_master, "main");
        assert_eq!(s.log_format, LogFormat::Json);
        assert_eq!(s.header_timeout, Duration::from_millis(250));
        assert_eq!(s.idle_timeout, Duration::from_millis(500));
        assert_eq!(s.max_connections, 50);
    }

    #[test]
    fn a_bad_redis_url_is_shown_without_its_password() {
        let err = settings(&[("BATON_REDIS_URL", "http://:hunter2@redis:6379")]).unwrap_err();
        let line = err.to_string();
        assert!(
            line.starts_with(
                "BATON_REDIS_URL (--redis-url) = \"http://:***@redis:6379\": expected"
            ),
            "{line}"
        );
        assert!(!line.contains("hunter2"), "{line}");
        // Several URLs are for cluster and sentinel modes only.
        assert!(settings(&[("BATON_REDIS_URL", "redis://a:1,redis://b:2")]).is_err());
        assert!(settings(&[
            ("BATON_REDIS_MODE", "cluster"),
            ("BATON_REDIS_URL", "redis://a:1,redis://b:2")
        ])
        .is_ok());
    }

    #[test]
    fn a_bad_listen_address_says_host_and_port() {
        let err = settings(&[("BATON_LISTEN", "8080")]).unwrap_err();
        assert!(err.to_string().contains("expected host:port"), "{err}");
    }

    #[test]
    fn flags_mirror_variables_and_win_over_them() {
        let Ok(Invocation::Run(s)) = Cli::from_args(["baton", "--max-wait-ms", "5"]) else {
            panic!("parses");
        };
        assert_eq!(s.max_wait_ms, 5);
        for (variable, flag) in variables() {
            assert_eq!(
                variable,
                format!("BATON_{}", flag.replace('-', "_").to_uppercase())
            );
        }
    }

    #[test]
    fn debug_hides_secrets() {
        let s = settings(&[
            ("BATON_REDIS_URL", "redis://:hunter2@redis:6379"),
            ("BATON_API_TOKENS", "tok-1,tok-2"),
        ])
        .unwrap();
        let shown = format!("{s:?}");
        assert!(
            !shown.contains("hunter2") && !shown.contains("tok-"),
            "{shown}"
        );
        assert!(shown.contains("api_tokens: 2"), "{shown}");
    }

    #[test]
    fn webhook_hosts_are_listed_and_need_a_secret() {
        let s = settings(&[
            (
                "BATON_WEBHOOK_HOSTS",
                " Hooks.example.com, relay.internal ,",
            ),
            ("BATON_WEBHOOK_SECRET", "s3cret-key"),
        ])
        .unwrap();
        assert_eq!(s.webhook_hosts, ["hooks.example.com", "relay.internal"]);
        assert!(!format!("{s:?}").contains("s3cret"));
        let err = settings(&[("BATON_WEBHOOK_HOSTS", "hooks.example.com")]).unwrap_err();
        assert!(err.to_string().contains("BATON_WEBHOOK_SECRET"), "{err}");
        let err = settings(&[
            ("BATON_WEBHOOK_HOSTS", "https://hooks.example.com/x"),
            ("BATON_WEBHOOK_SECRET", "k"),
        ])
        .unwrap_err();
        assert!(err.to_string().contains("BATON_WEBHOOK_HOSTS"), "{err}");
        assert!(settings(&[]).unwrap().webhook_hosts.is_empty());
    }
}
