//! Redis's own CPU per call of baton's functions, beside the first version's
//! scripts and the classic recipe, on one Redis (issue 46). Run by
//! `scripts/redis_cost.sh`, which starts a private redis-server and hands
//! this program its address and the first version's scripts:
//!
//!   redis_cost --redis 127.0.0.1:PORT --first DIR [--rounds 3] [--reps 10]
//!
//! Every call goes from one connection, pipelined, in phases of one kind of
//! call each: `CONFIG RESETSTAT`, the phase, then `INFO commandstats`. A
//! call's Redis time is the `usec` of its top-level command (`FCALL`,
//! `EVALSHA`, the classic `SET`), which includes the commands it runs inside
//! (commandstats counts those too: the "cmds" column is every command Redis
//! ran per call, the script call included, as the benchmark counts them).
//! Beside it, Redis's process CPU (`INFO cpu`, used_cpu_sys + used_cpu_user)
//! per call over the same phases: coarser (clock ticks), and it includes
//! reading and answering the connection. Each figure is the median of the
//! rounds; each round starts from an empty Redis.
//!
//! The states: a free name (acquired and released before, its history full:
//! 1,000 entries as the service's default keeps), a held name (refused
//! acquire, refresh), and a line of 1, 100 and 10,000 waiters behind a held
//! lock, where a new waiter joins, a request that does not wait is refused,
//! and the holder's release hands the lock to the head of the line (then a
//! new waiter joins, so the line keeps its length: the contended benchmark's
//! cycle). The first version has no line: its hand-off is a release and the
//! next holder's acquire, plus one refused acquire per waiter it wakes.

use std::collections::BTreeMap;
use std::process::ExitCode;
use std::time::Instant;

use baton::domain::{Demand, Kind, Name};
use baton::engine::{call_context, function_name, history_terms, library_code, Keys};
use redis::{Cmd, Connection};

use report::report;
use stats::{commandstats, cpu_us, run, Sum};

mod line;
mod report;
mod stats;

const PREFIX: &str = "rc:";
const ME: &str = "instance-a";
const TTL: &str = "30000";
const CLASSIC_UNLOCK: &str =
    "if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0";

struct Harness {
    conn: Connection,
    keys: Keys,
    first: BTreeMap<&'static str, String>,
    unlock: String,
    round: BTreeMap<String, Sum>,
    hand_offs: Vec<Cmd>,
}

/// The history's entries a name keeps: the service's default (1,000), or
/// REDIS_COST_HISTORY.
fn history_max() -> u32 {
    std::env::var("REDIS_COST_HISTORY")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

fn name(label: &str) -> Name {
    Name::parse(label).expect("a valid name")
}

impl Harness {
    /// One phase: `cmds`, all calls of `label`, whose top-level command is `top`.
    fn phase(&mut self, label: &str, top: &[&str], cmds: &[Cmd]) -> redis::RedisResult<()> {
        self.phase_of(label, top, cmds, cmds.len())
    }

    /// One phase of `ops` operations (each one or more of `cmds`).
    fn phase_of(
        &mut self,
        label: &str,
        top: &[&str],
        cmds: &[Cmd],
        ops: usize,
    ) -> redis::RedisResult<()> {
        redis::cmd("CONFIG")
            .arg("RESETSTAT")
            .query::<()>(&mut self.conn)?;
        let before = cpu_us(&mut self.conn)?;
        run(&mut self.conn, cmds)?;
        let after = cpu_us(&mut self.conn)?;
        let stats = commandstats(&mut self.conn)?;
        let sum = self.round.entry(label.to_owned()).or_default();
        sum.calls += ops as u64;
        sum.cpu += after - before;
        for (cmd, (calls, usec)) in stats {
            if cmd == "info" || cmd == "config" {
                continue;
            }
            sum.commands += calls;
            if top.contains(&cmd.as_str()) {
                sum.usec += usec;
            }
        }
        Ok(())
    }

    fn fcall(&self, op: &str, name: &Name, args: &[&str], instance: &str) -> Cmd {
        let mut c = redis::cmd("FCALL");
        c.arg(function_name(op).expect("a function"))
            .arg(1)
            .arg(self.keys.owners(Kind::Lock, name))
            .arg("")
            .arg(call_context(
                "",
                Kind::Lock,
                "PUBLISH",
                instance,
                &self.keys.name_channel(Kind::Lock, name),
                &history_terms(history_max(), 7),
                name,
            ));
        for a in args {
            c.arg(*a);
        }
        c
    }

    fn acquire(&self, name: &Name, id: &str, join: bool) -> Cmd {
        let full = Demand::LOCK_CAPACITY;
        let waiter = format!("{id}|1|{ME}|{TTL}|{full}|{full}|0|0|\n\n");
        self.fcall(
            "acquire",
            name,
            &[&waiter, if join { "1" } else { "0" }],
            ME,
        )
    }

    fn release(&self, name: &Name, id: &str) -> Cmd {
        self.fcall("release", name, &[id, "release", ""], ME)
    }

    fn refresh(&self, name: &Name, id: &str) -> Cmd {
        self.fcall("refresh", name, &[id, ""], ME)
    }

    fn first_call(&self, script: &str, n: &str, args: &[&str]) -> Cmd {
        let mut c = redis::cmd("EVALSHA");
        let key = format!("{PREFIX}{{lock:{n}}}");
        c.arg(&self.first[script]);
        if script == "lock_acquire" {
            c.arg(2).arg(&key).arg(format!("{key}:fence"));
        } else {
            c.arg(1).arg(&key);
        }
        for a in args {
            c.arg(*a);
        }
        c
    }

    fn classic_lock(n: &str, id: &str) -> Cmd {
        let mut c = redis::cmd("SET");
        c.arg(format!("{PREFIX}classic:{n}"))
            .arg(id)
            .arg("NX")
            .arg("PX")
            .arg(TTL);
        c
    }

    fn classic_unlock(&self, n: &str, id: &str) -> Cmd {
        let mut c = redis::cmd("EVALSHA");
        c.arg(&self.unlock)
            .arg(1)
            .arg(format!("{PREFIX}classic:{n}"))
            .arg(id);
        c
    }

    /// The history of `name` filled to HISTORY_MAX entries like its last one.
    fn fill_history(&mut self, name: &Name) -> redis::RedisResult<()> {
        let owners = self.keys.owners(Kind::Lock, name);
        let key = format!("{}:history", &owners[..owners.len() - ":owners".len()]);
        let last: Vec<(String, Vec<(String, String)>)> = redis::cmd("XREVRANGE")
            .arg(&key)
            .arg("+")
            .arg("-")
            .arg("COUNT")
            .arg(1)
            .query(&mut self.conn)?;
        let Some((_, fields)) = last.first() else {
            return Ok(());
        };
        let entry = fields[0].1.clone();
        let adds: Vec<Cmd> = (0..history_max())
            .map(|_| {
                let mut c = redis::cmd("XADD");
                c.arg(&key)
                    .arg("MAXLEN")
                    .arg(history_max())
                    .arg("*")
                    .arg("e")
                    .arg(&entry);
                c
            })
            .collect();
        run(&mut self.conn, &adds).map(drop)
    }

    /// Every instance of the line alive for a minute (as its keep-alive would).
    fn alive(&mut self, name: &Name) -> redis::RedisResult<()> {
        let owners = self.keys.owners(Kind::Lock, name);
        let key = format!("{}:instances", &owners[..owners.len() - ":owners".len()]);
        let t: (u64, u64) = redis::cmd("TIME").query(&mut self.conn)?;
        redis::cmd("ZADD")
            .arg(key)
            .arg(t.0 * 1000 + 60_000)
            .arg(ME)
            .query(&mut self.conn)
    }

    fn round(&mut self, names: usize, reps: usize) -> redis::RedisResult<()> {
        redis::cmd("FLUSHALL").query::<()>(&mut self.conn)?;
        let free: Vec<Name> = (0..names).map(|i| name(&format!("free-{i}"))).collect();
        let id =
            |r: usize, i: usize, s: &str| format!("{s}{r:04}{i:06}-0000-4000-8000-000000000000");
        // Warm: one cycle on each name, then its history full.
        let warm: Vec<Cmd> = free
            .iter()
            .enumerate()
            .flat_map(|(i, n)| {
                [
                    self.acquire(n, &id(9999, i, "w"), false),
                    self.release(n, &id(9999, i, "w")),
                ]
            })
            .collect();
        run(&mut self.conn, &warm)?;
        for n in &free {
            self.fill_history(n)?;
        }
        let fb = ["fcall"];
        for r in 0..reps {
            let acq: Vec<Cmd> = free
                .iter()
                .enumerate()
                .map(|(i, n)| self.acquire(n, &id(r, i, "a"), false))
                .collect();
            self.phase("free name: acquire", &fb, &acq)?;
            let refused: Vec<Cmd> = free
                .iter()
                .enumerate()
                .map(|(i, n)| self.acquire(n, &id(r, i, "b"), false))
                .collect();
            self.phase("held name: refused acquire", &fb, &refused)?;
            let refresh: Vec<Cmd> = free
                .iter()
                .enumerate()
                .map(|(i, n)| self.refresh(n, &id(r, i, "a")))
                .collect();
            self.phase("held name: refresh", &fb, &refresh)?;
            let rel: Vec<Cmd> = free
                .iter()
                .enumerate()
                .map(|(i, n)| self.release(n, &id(r, i, "a")))
                .collect();
            self.phase("free name: release", &fb, &rel)?;
        }
        // The first version and the classic recipe on their own keys.
        let eb = ["evalsha"];
        for r in 0..reps {
            let ids: Vec<String> = (0..names).map(|i| id(r, i, "a")).collect();
            let ns: Vec<String> = (0..names).map(|i| format!("free-{i}")).collect();
            let acq: Vec<Cmd> = ns
                .iter()
                .zip(&ids)
                .map(|(n, i)| self.first_call("lock_acquire", n, &[i, TTL, ""]))
                .collect();
            self.phase("first: free name: acquire", &eb, &acq)?;
            let refused: Vec<Cmd> = ns
                .iter()
                .map(|n| self.first_call("lock_acquire", n, &["x", TTL, ""]))
                .collect();
            self.phase("first: held name: refused acquire", &eb, &refused)?;
            let refresh: Vec<Cmd> = ns
                .iter()
                .zip(&ids)
                .map(|(n, i)| self.first_call("lock_refresh", n, &[i, ""]))
                .collect();
            self.phase("first: held name: refresh", &eb, &refresh)?;
            let rel: Vec<Cmd> = ns
                .iter()
                .zip(&ids)
                .map(|(n, i)| {
                    self.first_call("lock_release", n, &[i, "rc:events", &format!("lock:{n}")])
                })
                .collect();
            self.phase("first: free name: release", &eb, &rel)?;
            let lock: Vec<Cmd> = ns
                .iter()
                .zip(&ids)
                .map(|(n, i)| Self::classic_lock(n, i))
                .collect();
            self.phase("classic: free name: acquire", &["set"], &lock)?;
            let refused: Vec<Cmd> = ns.iter().map(|n| Self::classic_lock(n, "x")).collect();
            self.phase("classic: held name: refused acquire", &["set"], &refused)?;
            let unlock: Vec<Cmd> = ns
                .iter()
                .zip(&ids)
                .map(|(n, i)| self.classic_unlock(n, i))
                .collect();
            self.phase("classic: free name: release", &eb, &unlock)?;
        }
        for line in [1usize, 100, 10_000] {
            self.line(line, reps)?;
        }
        Ok(())
    }
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--library") {
        // The library's code, as the service loads it (for experiments).
        print!("{}", library_code());
        return ExitCode::SUCCESS;
    }
    let opt = |flag: &str| {
        args.iter()
            .position(|a| a == flag)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let (Some(addr), Some(first_dir)) = (opt("--redis"), opt("--first")) else {
        eprintln!(
            "usage: redis_cost --redis HOST:PORT --first DIR [--rounds N] [--reps N] [--names N]"
        );
        return ExitCode::from(2);
    };
    let rounds: usize = opt("--rounds").and_then(|v| v.parse().ok()).unwrap_or(3);
    let reps: usize = opt("--reps").and_then(|v| v.parse().ok()).unwrap_or(10);
    let names: usize = opt("--names").and_then(|v| v.parse().ok()).unwrap_or(200);
    match measure(&addr, &first_dir, rounds, reps, names) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("redis_cost: {e}");
            ExitCode::FAILURE
        }
    }
}

fn measure(
    addr: &str,
    first_dir: &str,
    rounds: usize,
    reps: usize,
    names: usize,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut conn = redis::Client::open(format!("redis://{addr}"))?.get_connection()?;
    // REDIS_COST_LIBRARY: a file of this library's code changed by hand
    // (its first line kept: the functions' names), for experiments.
    let code = match std::env::var("REDIS_COST_LIBRARY") {
        Ok(file) => std::fs::read_to_string(file)?,
        Err(_) => library_code().to_owned(),
    };
    redis::cmd("FUNCTION")
        .arg("LOAD")
        .arg("REPLACE")
        .arg(code)
        .query::<String>(&mut conn)?;
    let mut first = BTreeMap::new();
    for script in ["lock_acquire", "lock_release", "lock_refresh"] {
        let code = std::fs::read_to_string(format!("{first_dir}/{script}.lua"))?;
        let sha: String = redis::cmd("SCRIPT")
            .arg("LOAD")
            .arg(code)
            .query(&mut conn)?;
        first.insert(script, sha);
    }
    let unlock: String = redis::cmd("SCRIPT")
        .arg("LOAD")
        .arg(CLASSIC_UNLOCK)
        .query(&mut conn)?;
    let mut h = Harness {
        conn,
        keys: Keys::new(PREFIX),
        first,
        unlock,
        round: BTreeMap::new(),
        hand_offs: Vec::new(),
    };
    let mut all: BTreeMap<String, Vec<Sum>> = BTreeMap::new();
    for r in 1..=rounds {
        let start = Instant::now();
        h.round.clear();
        h.round(names, reps)?;
        for (label, sum) in &h.round {
            all.entry(label.clone()).or_default().push(*sum);
        }
        eprintln!(
            "round {r} of {rounds}: {:.1}s",
            start.elapsed().as_secs_f64()
        );
    }
    report(&all);
    Ok(())
}
