//! Redis's own counters, read from INFO, and the pipelined runs they measure.

use std::collections::BTreeMap;

use redis::{Cmd, Connection, Value};

/// Per phase label: the calls, their Redis time (usec), the commands Redis
/// ran, and Redis's process CPU (usec).
#[derive(Default, Clone, Copy)]
pub struct Sum {
    pub calls: u64,
    pub usec: u64,
    pub commands: u64,
    pub cpu: f64,
}

fn info(conn: &mut Connection, section: &str) -> redis::RedisResult<String> {
    redis::cmd("INFO").arg(section).query(conn)
}

/// used_cpu_sys + used_cpu_user, in microseconds.
pub fn cpu_us(conn: &mut Connection) -> redis::RedisResult<f64> {
    let text = info(conn, "cpu")?;
    let mut sum = 0.0;
    for line in text.lines() {
        if let Some((k, v)) = line.trim().split_once(':') {
            if k == "used_cpu_sys" || k == "used_cpu_user" {
                sum += v.parse::<f64>().unwrap_or(0.0);
            }
        }
    }
    Ok(sum * 1e6)
}

/// (command -> (calls, usec)) of INFO commandstats.
pub fn commandstats(conn: &mut Connection) -> redis::RedisResult<BTreeMap<String, (u64, u64)>> {
    let text = info(conn, "commandstats")?;
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(rest) = line.trim().strip_prefix("cmdstat_") else {
            continue;
        };
        let Some((cmd, fields)) = rest.split_once(':') else {
            continue;
        };
        let field = |name: &str| {
            fields
                .split(',')
                .find_map(|f| f.strip_prefix(name)?.strip_prefix('='))
                .and_then(|v| v.parse::<u64>().ok())
                .unwrap_or(0)
        };
        out.insert(cmd.to_owned(), (field("calls"), field("usec")));
    }
    Ok(out)
}

pub fn run(conn: &mut Connection, cmds: &[Cmd]) -> redis::RedisResult<Vec<Value>> {
    let mut replies = Vec::with_capacity(cmds.len());
    for chunk in cmds.chunks(500) {
        let mut pipe = redis::pipe();
        for c in chunk {
            pipe.add_command(c.clone());
        }
        let out: Vec<Value> = pipe.query(conn)?;
        for v in &out {
            if let Value::ServerError(e) = v {
                return Err(e.clone().into());
            }
        }
        replies.extend(out);
    }
    Ok(replies)
}
