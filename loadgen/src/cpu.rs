//! CPU time of this process's threads, split into the bots' threads and the
//! rest (the embedded server's shards, gateway and admin threads).
//!
//! Owns reading `/proc/self/task/*/{comm,stat}` (Linux only; elsewhere every
//! figure is `None`). Bot threads are named `loadgen-N` and the main thread
//! `loadgen`: every other thread counts as the server's.

use std::path::Path;

/// CPU seconds used so far, by side.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuTimes {
    /// The load generator's threads (main and bots).
    pub client_s: f64,
    /// Every other thread (the embedded server).
    pub server_s: f64,
}

impl CpuTimes {
    /// CPU use between `earlier` and `self` over `wall_s` seconds, in
    /// percent of one core: `(client, server)`.
    pub fn percent_since(&self, earlier: &CpuTimes, wall_s: f64) -> (f64, f64) {
        if wall_s <= 0.0 {
            return (0.0, 0.0);
        }
        (
            100.0 * (self.client_s - earlier.client_s) / wall_s,
            100.0 * (self.server_s - earlier.server_s) / wall_s,
        )
    }
}

/// The thread's `utime + stime` in clock ticks, from a `stat` line.
pub fn stat_ticks(stat: &str) -> Option<u64> {
    // Fields after the parenthesised comm: state is field 3, utime 14, stime 15.
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let utime: u64 = f.get(11)?.parse().ok()?;
    let stime: u64 = f.get(12)?.parse().ok()?;
    Some(utime + stime)
}

/// CPU seconds used so far by process `pid` (all its threads), `None`
/// if it cannot be read.
pub fn process_s(pid: u32) -> Option<f64> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    Some(stat_ticks(&stat)? as f64 / hz)
}

/// CPU times of this process now (`None` without `/proc`).
pub fn sample() -> Option<CpuTimes> {
    // SAFETY: sysconf has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    let hz = if hz > 0 { hz as f64 } else { 100.0 };
    let mut t = CpuTimes::default();
    for entry in std::fs::read_dir(Path::new("/proc/self/task"))
        .ok()?
        .flatten()
    {
        let dir = entry.path();
        let comm = std::fs::read_to_string(dir.join("comm")).unwrap_or_default();
        let Some(ticks) = std::fs::read_to_string(dir.join("stat"))
            .ok()
            .and_then(|s| stat_ticks(&s))
        else {
            continue;
        };
        let s = ticks as f64 / hz;
        if comm.trim_end().starts_with("loadgen") {
            t.client_s += s;
        } else {
            t.server_s += s;
        }
    }
    Some(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_lines_give_user_plus_system_ticks() {
        let line = "1234 (shard-0 (x)) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 1 0";
        assert_eq!(stat_ticks(line), Some(300));
        assert_eq!(stat_ticks("garbage"), None);
    }

    #[test]
    fn percent_is_of_one_core() {
        let a = CpuTimes {
            client_s: 1.0,
            server_s: 2.0,
        };
        let b = CpuTimes {
            client_s: 2.0,
            server_s: 5.0,
        };
        assert_eq!(b.percent_since(&a, 2.0), (50.0, 150.0));
        assert!(sample().is_some_and(|t| t.client_s + t.server_s >= 0.0));
        assert!(process_s(std::process::id()).is_some());
    }
}
