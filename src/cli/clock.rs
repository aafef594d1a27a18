//! The clock that lease deadlines are measured on: time since boot, which,
//! unlike `Instant` on Linux, goes on while the machine is suspended, as the
//! lease's time to live in Redis does. Sleeps are cut into short naps so that
//! a deadline passed during a suspension is noticed soon after it.

use std::time::Duration;

/// Now, as time since boot.
pub fn now() -> Duration {
    #[cfg(target_os = "linux")]
    {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: `ts` is a valid timespec for clock_gettime to fill.
        if unsafe { libc::clock_gettime(libc::CLOCK_BOOTTIME, &mut ts) } == 0 {
            return Duration::new(
                u64::try_from(ts.tv_sec).unwrap_or(0),
                u32::try_from(ts.tv_nsec).unwrap_or(0),
            );
        }
    }
    static START: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();
    START.get_or_init(std::time::Instant::now).elapsed()
}

/// Sleeps until [`now`] has reached `deadline`.
pub async fn sleep_until(deadline: Duration) {
    loop {
        let left = deadline.saturating_sub(now());
        if left.is_zero() {
            return;
        }
        tokio::time::sleep(left.min(Duration::from_millis(250))).await;
    }
}
