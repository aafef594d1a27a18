//! `baton freeze`, `baton freezes`, `baton unfreeze` on the real binary, and
//! `baton run` telling, while it waits, that its name is frozen and until when.

use std::time::Duration;

use baton_testkit::service::{baton, run, Service};
use baton_testkit::{shared_redis, unique_prefix};

const LIMIT: Duration = Duration::from_secs(30);

#[tokio::test]
async fn a_shell_freezes_a_prefix_lists_it_waits_it_out_and_unfreezes() {
    let redis = shared_redis();
    let prefix = unique_prefix();
    let service = Service::start(&[
        ("BATON_REDIS_URL", &redis.url()),
        ("BATON_KEY_PREFIX", &prefix),
    ])
    .await;
    let url = service.base.clone();
    let made = run(
        baton().args([
            "freeze",
            "--url",
            &url,
            "--for",
            "4s",
            "--reason",
            "release weekend",
            "deploy-*",
        ]),
        LIMIT,
    );
    let said = String::from_utf8_lossy(&made.stdout).into_owned();
    assert!(
        made.status.success(),
        "{said}{}",
        String::from_utf8_lossy(&made.stderr)
    );
    assert!(
        said.starts_with("froze ") && said.contains("deploy-*"),
        "{said}"
    );
    let id = said.split_whitespace().nth(1).expect("an id").to_owned();

    let listed = run(baton().args(["freezes", "--url", &url]), LIMIT);
    let list = String::from_utf8_lossy(&listed.stdout);
    assert!(
        list.contains(&id) && list.contains("active until"),
        "{list}"
    );

    let refused = run(
        baton().args(["acquire", "--url", &url, "--wait", "0", "deploy-prod"]),
        LIMIT,
    );
    assert_eq!(refused.status.code(), Some(75));
    let why = String::from_utf8_lossy(&refused.stderr);
    assert!(why.contains("frozen"), "{why}");
    // `baton status` says the freeze, until when and why.
    let shown = run(
        baton().args(["status", "--url", &url, "deploy-prod"]),
        LIMIT,
    );
    let said = String::from_utf8_lossy(&shown.stdout);
    assert!(
        said.contains("free; 0 waiting; frozen until ") && said.contains("(release weekend)"),
        "{said}{}",
        String::from_utf8_lossy(&shown.stderr)
    );

    // A run waits the freeze out, saying so, then runs its command.
    let waited = run(
        baton().args([
            "run",
            "--url",
            &url,
            "--wait",
            "30s",
            "deploy-prod",
            "--",
            "true",
        ]),
        LIMIT,
    );
    let told = String::from_utf8_lossy(&waited.stderr);
    assert_eq!(waited.status.code(), Some(0), "{told}");
    assert!(told.contains("frozen until"), "{told}");
    assert!(told.contains("release weekend"), "{told}");

    let deleted = run(baton().args(["unfreeze", "--url", &url, &id]), LIMIT);
    // Its one-off window may have ended (and its key with it) by now.
    assert!(matches!(deleted.status.code(), Some(0 | 66)), "{deleted:?}");
    let again = run(baton().args(["unfreeze", "--url", &url, &id]), LIMIT);
    assert_eq!(again.status.code(), Some(66), "no such freeze");
    let bad = run(baton().args(["freeze", "--url", &url, "deploy-*"]), LIMIT);
    assert_eq!(bad.status.code(), Some(64), "no window given");
}
