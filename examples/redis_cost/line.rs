//! A line of waiters behind a held lock: refusals, joins and hand-offs.

use std::collections::VecDeque;

use redis::Cmd;

use crate::stats::run;
use crate::{name, Harness};

impl Harness {
    /// A lock held, `len` waiters behind it: joins, refusals and hand-offs.
    pub(super) fn line(&mut self, len: usize, reps: usize) -> redis::RedisResult<()> {
        let n = name(&format!("line-{len}"));
        let wid = |i: usize| format!("{i:08}-1111-4000-8000-000000000000");
        // Warm (one cycle, history full), then the holder and the line.
        let warm = [
            self.acquire(&n, &wid(999_999), false),
            self.release(&n, &wid(999_999)),
        ];
        run(&mut self.conn, &warm)?;
        self.fill_history(&n)?;
        let hold = [self.acquire(&n, &wid(0), false)];
        run(&mut self.conn, &hold)?;
        let mut holder = wid(0);
        let mut next = 1;
        let joins: Vec<Cmd> = (0..len)
            .map(|i| self.acquire(&n, &wid(next + i), true))
            .collect();
        run(&mut self.conn, &joins)?;
        let mut line: VecDeque<String> = (next..next + len).map(wid).collect();
        next += len;
        let fb = ["fcall"];
        let tag = if len >= 1000 {
            format!("{}k", len / 1000)
        } else {
            len.to_string()
        };
        let calls = 20 * reps;
        self.alive(&n)?;
        let refused: Vec<Cmd> = (0..calls)
            .map(|i| self.acquire(&n, &format!("{i:08}-2222-4000-8000-000000000000"), false))
            .collect();
        self.phase(&format!("line of {tag}: refused acquire"), &fb, &refused)?;
        // The hand-off: the holder releases, the head is granted; a new
        // waiter joins at the end (the line keeps its length). First each
        // call alone (a phase of one call: Redis's caches colder), then the
        // cycles back to back.
        for i in 0..calls + reps * 50 {
            let alone = i < calls;
            if i % 100 == 0 {
                self.alive(&n)?;
            }
            let release = self.release(&n, &holder);
            holder = line.pop_front().expect("a waiter");
            let join = self.acquire(&n, &wid(next), true);
            line.push_back(wid(next));
            next += 1;
            if alone {
                self.phase(
                    &format!("line of {tag}: release, granting the head (alone)"),
                    &fb,
                    &[release],
                )?;
                self.phase(&format!("line of {tag}: join (alone)"), &fb, &[join])?;
            } else {
                self.hand_offs.extend([release, join]);
                if self.hand_offs.len() == 100 {
                    let cycles = std::mem::take(&mut self.hand_offs);
                    self.phase_of(
                        &format!("line of {tag}: hand-off (release + join)"),
                        &fb,
                        &cycles,
                        50,
                    )?;
                }
            }
        }
        Ok(())
    }
}
