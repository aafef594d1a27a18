//! The table: medians of the rounds, per call and side.

use std::collections::BTreeMap;

use crate::stats::Sum;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Medians per label: (usec per call, cpu per call, commands per call).
pub fn report(all: &BTreeMap<String, Vec<Sum>>) {
    let med = |label: &str| -> Option<(f64, f64, f64)> {
        let sums = all.get(label)?;
        let per =
            |f: &dyn Fn(&Sum) -> f64| median(sums.iter().map(|s| f(s) / s.calls as f64).collect());
        Some((
            per(&|s| s.usec as f64),
            per(&|s| s.cpu),
            per(&|s| s.commands as f64),
        ))
    };
    let cell = |v: Option<(f64, f64, f64)>| match v {
        Some((u, c, n)) => format!("{u:6.2} | {c:6.2} | {n:4.1}"),
        None => format!("{:>6} | {:>6} | {:>4}", "-", "-", "-"),
    };
    let add = |a: Option<(f64, f64, f64)>, b: Option<(f64, f64, f64)>| {
        Some((a?.0 + b?.0, a?.1 + b?.1, a?.2 + b?.2))
    };
    println!("Redis time per call, µs (INFO commandstats usec of the top-level call, medians of the rounds);");
    println!("Redis process CPU per call, µs (INFO cpu, coarser); commands Redis ran per call.\n");
    println!("| call | baton µs | cpu | cmds | fa1f1fc µs | cpu | cmds | classic µs | cpu | cmds | baton/fa1f1fc |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    let row = |label: &str,
               b: Option<(f64, f64, f64)>,
               f: Option<(f64, f64, f64)>,
               k: Option<(f64, f64, f64)>| {
        let ratio = match (b, f) {
            (Some(b), Some(f)) if f.0 > 0.0 => format!("{:.2}x", b.0 / f.0),
            _ => "-".to_owned(),
        };
        println!(
            "| {label} | {} | {} | {} | {ratio} |",
            cell(b),
            cell(f),
            cell(k)
        );
    };
    for label in [
        "free name: acquire",
        "free name: release",
        "held name: refused acquire",
        "held name: refresh",
    ] {
        row(
            label,
            med(label),
            med(&format!("first: {label}")),
            med(&format!("classic: {label}")),
        );
    }
    let cycle = |p: &str| {
        add(
            med(&format!("{p}free name: acquire")),
            med(&format!("{p}free name: release")),
        )
    };
    row(
        "uncontended cycle (acquire + release)",
        cycle(""),
        cycle("first: "),
        cycle("classic: "),
    );
    for tag in ["1", "100", "10k"] {
        for what in [
            "refused acquire",
            "join (alone)",
            "release, granting the head (alone)",
        ] {
            let label = format!("line of {tag}: {what}");
            row(&label, med(&label), None, None);
        }
        let handoff = med(&format!("line of {tag}: hand-off (release + join)"));
        // The first version's hand-off: a release and the next holder's acquire.
        row(
            &format!("line of {tag}: hand-off (release + join)"),
            handoff,
            cycle("first: "),
            None,
        );
    }
    // The contended benchmark's 16 clients: the first version's release wakes
    // the 15 waiting, one acquires, 14 are refused (and wait again).
    let herd =
        med("first: held name: refused acquire").map(|r| (14.0 * r.0, 14.0 * r.1, 14.0 * r.2));
    row(
        "16 clients on one name: hand-off (fa1f1fc: + 14 refused)",
        med("line of 100: hand-off (release + join)"),
        add(cycle("first: "), herd),
        None,
    );
    println!(
        "\nThe first version's hand-off is its release and the next holder's acquire; each other"
    );
    println!(
        "waiter it wakes adds one refused acquire (the last row: as the contended benchmark's 16"
    );
    println!("clients, baton's figure there is the line of 100's). Rows marked (alone) are phases of one");
    println!(
        "call each: Redis's caches are colder, and their cpu column counts INFO's own work too."
    );
}
