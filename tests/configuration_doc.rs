//! docs/configuration.md lists every setting the code declares, with its
//! flag and default, and nothing else: the table is checked against the
//! command line's own declarations (the same ones `baton --help` prints).

use std::collections::BTreeMap;

use baton::config::Cli;
use clap::CommandFactory;

/// A row of the table: flag and default, by variable.
type Rows = BTreeMap<String, (String, String)>;

fn documented() -> Rows {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/docs/configuration.md");
    let text = std::fs::read_to_string(path).expect("docs/configuration.md");
    let unquote = |cell: &str| cell.trim().trim_matches('`').to_owned();
    text.lines()
        .filter(|line| line.starts_with("| `"))
        .map(|line| {
            let cells: Vec<&str> = line.trim_matches('|').split('|').collect();
            assert!(
                cells.len() >= 4,
                "a row has variable, flag, default, meaning: {line}"
            );
            let default = unquote(cells[2]);
            let default = if default == "unset" {
                String::new()
            } else {
                default
            };
            (unquote(cells[0]), (unquote(cells[1]), default))
        })
        .collect()
}

fn declared() -> Rows {
    Cli::command()
        .get_arguments()
        .filter_map(|arg| {
            let variable = arg.get_env()?.to_str()?.to_owned();
            let flag = format!("--{}", arg.get_long()?);
            let default = if arg.is_hide_default_value_set() {
                String::new()
            } else {
                let values: Vec<_> = arg
                    .get_default_values()
                    .iter()
                    .map(|v| v.to_string_lossy().into_owned())
                    .collect();
                values.join(",")
            };
            Some((variable, (flag, default)))
        })
        .collect()
}

#[test]
fn the_configuration_table_matches_the_code() {
    let mut documented = documented();
    let declared = declared();
    assert!(
        declared.len() >= 10,
        "the command line declares its settings"
    );
    assert_eq!(
        documented
            .remove("RUST_LOG")
            .map(|(_, default)| default)
            .as_deref(),
        Some("info"),
        "RUST_LOG is documented with its default"
    );
    for (variable, (flag, default)) in &declared {
        let Some((doc_flag, doc_default)) = documented.get(variable) else {
            panic!("docs/configuration.md lacks {variable} ({flag}, default {default:?})");
        };
        assert_eq!(doc_flag, flag, "{variable}: flag");
        assert_eq!(doc_default, default, "{variable}: default");
    }
    let stale: Vec<_> = documented
        .keys()
        .filter(|v| !declared.contains_key(*v))
        .collect();
    assert!(stale.is_empty(), "documented but not a setting: {stale:?}");
}
