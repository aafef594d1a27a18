//! The crate is a strict stack: `main` -> `startup` -> `routes` (and
//! `openapi` over it) -> `engine`, `http` (the HTTP plumbing) and `wire`
//! (the bodies on the wire), none of which uses another -> `telemetry` (and
//! beside it `shutdown`, `access`) -> `domain`, `config`. Each module may use
//! only modules below it, so there is no cycle and nothing reaches up. Beside
//! the stack, the client (`cli`) uses only what it names in `ONLY`. This test
//! reads every `crate::` and `super::` path in `src/`, in folder modules to
//! any depth, and fails on a use that breaks the order or a module's `ONLY`,
//! and on a module missing from the order. Inside `engine/` the same holds
//! between its rooms ([`ENGINE_ROOMS`]), and no file takes a thing through
//! `engine/mod.rs`, which only declares and re-exports.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// Each top-level module and its layer: a module may use only lower layers.
const LAYERS: &[(&str, u8)] = &[
    ("domain", 0),
    ("config", 0),
    ("telemetry", 1),
    ("shutdown", 1),
    ("access", 1),
    ("engine", 2),
    ("http", 2),
    ("wire", 2),
    ("cli", 3),
    ("routes", 3),
    ("openapi", 4),
    ("startup", 5),
];

/// Modules that may use only the modules named, whatever their layer: the
/// client shares the command line, the domain types and the bodies on the
/// wire with the service, and nothing of how it serves.
const ONLY: &[(&str, &[&str])] = &[("cli", &["config", "domain", "wire"])];

/// Within `routes/`, files that must not use one another: what the two kinds
/// share lives in a shared module.
const SIBLINGS_APART: &[(&str, &str)] = &[("locks", "semaphores"), ("semaphores", "locks")];

/// The rooms of `engine/`, from the bottom: each may use only rooms below
/// it (and itself).
const ENGINE_ROOMS: &[(&str, u8)] = &[
    ("error", 0),
    ("model", 0),
    ("keys", 0),
    ("connection", 1),
    ("events", 2),
    ("channel", 2),
    ("functions", 3),
    ("freezes", 4),
    ("waiters", 5),
    ("following", 5),
    ("notices", 5),
    ("handle", 6),
    ("leases", 7),
    ("claims", 8),
];

fn layer(module: &str) -> u8 {
    LAYERS
        .iter()
        .find(|(name, _)| *name == module)
        .map(|(_, layer)| *layer)
        .unwrap_or_else(|| panic!("src/{module}: add it to LAYERS in tests/layers.rs"))
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The code of a file without its comments (doc links name modules too).
fn code(source: &str) -> String {
    source
        .lines()
        .map(|line| line.split("//").next().unwrap_or(""))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The first segment after every `anchor` (`crate::`, `super::`), with the
/// first segments inside `anchor{a, b::c}` groups.
fn first_segments(code: &str, anchor: &str) -> Vec<String> {
    let mut found = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find(anchor) {
        let preceded_by_ident = rest[..at].chars().next_back().is_some_and(is_ident);
        rest = &rest[at + anchor.len()..];
        if preceded_by_ident {
            continue;
        }
        if let Some(group) = rest.strip_prefix('{') {
            // The first segment of each item at the group's own depth.
            let (mut depth, mut at_item_start) = (0, true);
            for (i, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => break,
                    '}' => depth -= 1,
                    ',' if depth == 0 => at_item_start = true,
                    c if at_item_start && is_ident(c) => {
                        let name: String =
                            group[i..].chars().take_while(|c| is_ident(*c)).collect();
                        found.push(name);
                        at_item_start = false;
                    }
                    _ => {}
                }
            }
        } else {
            let name: String = rest.chars().take_while(|c| is_ident(*c)).collect();
            found.push(name);
        }
    }
    found
}

/// The top-level modules `file` (under `src/`) uses.
fn modules_used(relative: &Path, source: &str) -> BTreeSet<String> {
    let code = code(source);
    let mut used: BTreeSet<String> = first_segments(&code, "crate::").into_iter().collect();
    // A top-level module's own file: `super::x` is the crate's `x`.
    let depth = relative.components().count();
    let is_root = depth == 1 || relative.file_name().is_some_and(|f| f == "mod.rs") && depth == 2;
    if is_root {
        used.extend(first_segments(&code, "super::"));
    }
    used.extend(first_segments(&code, "super::super::"));
    used.retain(|m| LAYERS.iter().any(|(name, _)| name == m) || m == "super");
    used.remove("super");
    used
}

/// Every use in `files` (path under `src/`, source) that reaches up or sideways,
/// and how many uses were looked at.
fn breaches(files: &[(PathBuf, String)]) -> (Vec<String>, usize) {
    let mut found = Vec::new();
    let mut checked = 0;
    for (relative, source) in files {
        let first = relative.components().next().unwrap();
        let module = first
            .as_os_str()
            .to_string_lossy()
            .trim_end_matches(".rs")
            .to_owned();
        if module == "lib" || module == "main" || module == "bin" {
            continue;
        }
        let own = layer(&module);
        let only = ONLY
            .iter()
            .find(|(name, _)| *name == module)
            .map(|(_, allowed)| *allowed);
        for used in modules_used(relative, source) {
            checked += 1;
            let outside_only = only.is_some_and(|allowed| !allowed.contains(&used.as_str()));
            if used != module && (layer(&used) >= own || outside_only) {
                found.push(format!("{} uses {used}", relative.display()));
            }
        }
    }
    (found, checked)
}

/// Every use inside `engine/` (files under `src/`) that reaches a room above
/// or beside its own, or reaches through `engine/mod.rs`.
fn engine_breaches(files: &[(PathBuf, String)]) -> Vec<String> {
    let floor = |room: &str| {
        ENGINE_ROOMS
            .iter()
            .find(|(r, _)| *r == room)
            .map(|(_, f)| *f)
    };
    let mut found = Vec::new();
    for (relative, source) in files {
        let parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        if parts.first().map(String::as_str) != Some("engine") || parts.len() < 2 {
            continue;
        }
        let own = parts[1].trim_end_matches(".rs").to_owned();
        if own == "mod" {
            continue;
        }
        let own_floor = floor(&own).unwrap_or_else(|| {
            panic!("src/engine/{own}: add it to ENGINE_ROOMS in tests/layers.rs")
        });
        let code = code(source);
        let mut used = first_segments(&code, "crate::engine::");
        // (A test module's `super::` is its own file.)
        let outside_tests = code.split("#[cfg(test)]").next().unwrap_or_default();
        used.extend(first_segments(
            outside_tests,
            if parts.len() == 2 {
                "super::"
            } else {
                "super::super::"
            },
        ));
        for room in used {
            match floor(&room) {
                None => found.push(format!(
                    "{} takes {room} through engine/mod.rs",
                    relative.display()
                )),
                Some(f) if room != own && f >= own_floor => {
                    found.push(format!("{} uses engine/{room}", relative.display()))
                }
                Some(_) => {}
            }
        }
    }
    found
}

#[test]
fn every_module_uses_only_modules_below_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut paths = Vec::new();
    rust_files(&src, &mut paths);
    let files: Vec<(PathBuf, String)> = paths
        .iter()
        .map(|p| {
            (
                p.strip_prefix(&src).unwrap().to_owned(),
                std::fs::read_to_string(p).unwrap(),
            )
        })
        .collect();
    let (found, checked) = breaches(&files);
    assert!(
        checked > 10,
        "the scan found too few uses ({checked}) to mean anything"
    );
    assert!(
        found.is_empty(),
        "uses that reach up or sideways:\n{}",
        found.join("\n")
    );
    let inside = engine_breaches(&files);
    assert!(
        inside.is_empty(),
        "uses inside engine/ that reach up or sideways:\n{}",
        inside.join("\n")
    );
}

#[test]
fn a_use_inside_the_engine_that_reaches_up_or_through_its_map_is_found() {
    let file = |path: &str, source: &str| (PathBuf::from(path), source.to_owned());
    let found = engine_breaches(&[
        file(
            "engine/connection/store.rs",
            "use crate::engine::events::Audience;",
        ),
        file("engine/functions/invoker.rs", "use crate::engine::Error;"),
        file(
            "engine/handle.rs",
            "use super::leases::Leases; use super::keys::Keys;",
        ),
        file(
            "engine/waiters/registry.rs",
            "use super::super::handle::Engine;",
        ),
        file("engine/leases/acquire.rs", "use super::operations::Leases;"),
    ]);
    assert_eq!(
        found,
        [
            "engine/connection/store.rs uses engine/events",
            "engine/functions/invoker.rs takes Error through engine/mod.rs",
            "engine/handle.rs uses engine/leases",
            "engine/waiters/registry.rs uses engine/handle",
        ]
    );
}

#[test]
fn a_use_that_reaches_up_or_sideways_is_found() {
    let file = |path: &str, source: &str| (PathBuf::from(path), source.to_owned());
    let (found, _) = breaches(&[
        file("engine/lock.rs", "use crate::routes::AppError;"),
        file(
            "routes/error.rs",
            "use crate::engine; use crate::openapi::ApiDoc;",
        ),
        file("config/settings.rs", "use crate::domain::Name;"),
        file("startup.rs", "use crate::{openapi, routes::api};"),
        file("http/parked.rs", "use crate::routes::AppError;"),
        file("http/deadline.rs", "use crate::engine::Error;"),
        file(
            "http/server/connection.rs",
            "use crate::startup::Application;",
        ),
    ]);
    assert_eq!(
        found,
        [
            "engine/lock.rs uses routes",
            "routes/error.rs uses openapi",
            "config/settings.rs uses domain",
            "http/parked.rs uses routes",
            "http/deadline.rs uses engine",
            "http/server/connection.rs uses startup",
        ]
    );
}

#[test]
fn the_client_uses_only_the_command_line_the_domain_and_the_wire() {
    let file = |path: &str, source: &str| (PathBuf::from(path), source.to_owned());
    let (found, _) = breaches(&[
        file(
            "cli/calls.rs",
            "use crate::wire::StatusBody; use crate::{config, domain::Kind};",
        ),
        file("cli/run.rs", "use crate::telemetry::audit;"),
        file("cli/line.rs", "use crate::engine::Status;"),
        file("cli/http.rs", "use crate::routes::AppError;"),
        file("wire/status.rs", "use crate::engine::Status;"),
        file("engine/lease.rs", "use crate::wire::LeaseBody;"),
    ]);
    assert_eq!(
        found,
        [
            "cli/run.rs uses telemetry",
            "cli/line.rs uses engine",
            "cli/http.rs uses routes",
            "wire/status.rs uses engine",
            "engine/lease.rs uses wire",
        ]
    );
}

#[test]
fn the_lock_and_semaphore_routes_do_not_use_each_other() {
    let routes = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/routes");
    for (file, other) in SIBLINGS_APART {
        let source = std::fs::read_to_string(routes.join(format!("{file}.rs"))).unwrap();
        let used = first_segments(&code(&source), "super::");
        assert!(
            !used.iter().any(|m| m == other),
            "routes/{file}.rs uses routes/{other}.rs: move what they share to a shared module"
        );
    }
}

#[test]
fn the_scan_sees_uses_in_every_form() {
    let source = "use crate::engine::Error;\nuse crate::{config::{Settings, LogFormat}, domain};\n\
                  // crate::startup in a comment\nlet x = crate::telemetry::f();\nnotcrate::routes";
    let used = modules_used(Path::new("routes/locks.rs"), source);
    let expected: BTreeSet<String> = ["engine", "config", "domain", "telemetry"]
        .into_iter()
        .map(String::from)
        .collect();
    assert_eq!(used, expected);
    let root = modules_used(Path::new("startup.rs"), "use super::routes::api;");
    assert!(root.contains("routes"));
}
