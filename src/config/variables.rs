//! The variables baton knows: every setting's, and those its client and
//! scripts read; a `BATON_*` variable that is neither is warned about.

use clap::CommandFactory;

use super::settings::Cli;

/// Variables that are not settings of the service but that the client
/// subcommands and baton's own scripts read (scripts/run.sh, scripts/with-lock);
/// never warned about.
const SCRIPT_VARIABLES: &[&str] = &[
    "BATON_URL",
    "BATON_TOKEN",
    "BATON_PORT",
    "BATON_PID",
    "BATON_BIN",
    "BATON_DATA_DIR",
    "BATON_DEV_REDIS_PORT",
    "BATON_UPDATE_OPENAPI",
    "BATON_LEASE_ID",
    "BATON_LOCK_NAME",
    "BATON_FENCING_TOKEN",
    "BATON_CACHE_DIR",
    "BATON_GIT_REVISION",
];

/// Every setting's variable and flag, as the command line declares them.
pub fn variables() -> Vec<(String, String)> {
    Cli::command()
        .get_arguments()
        .filter_map(|arg| {
            let variable = arg.get_env()?.to_str()?.to_owned();
            Some((variable, arg.get_long()?.to_owned()))
        })
        .collect()
}

/// `BATON_*` names in `names` that are neither a setting nor a variable of
/// baton's scripts, each with the closest known setting.
pub fn unknown_variables<'a>(names: impl IntoIterator<Item = &'a str>) -> Vec<(String, String)> {
    let known: Vec<String> = variables().into_iter().map(|(v, _)| v).collect();
    names
        .into_iter()
        .filter(|name| name.starts_with("BATON_"))
        .filter(|name| !known.iter().any(|k| k == name) && !SCRIPT_VARIABLES.contains(name))
        .map(|name| {
            let closest = known
                .iter()
                .min_by_key(|k| strsim::levenshtein(k, name))
                .cloned()
                .unwrap_or_default();
            (name.to_owned(), closest)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_variables_get_the_closest_known_one() {
        let unknown = unknown_variables(["BATON_MAX_WAITMS", "BATON_LISTEN", "BATON_URL", "PATH"]);
        assert_eq!(
            unknown,
            [(
                "BATON_MAX_WAITMS".to_owned(),
                "BATON_MAX_WAIT_MS".to_owned()
            )]
        );
    }
}
