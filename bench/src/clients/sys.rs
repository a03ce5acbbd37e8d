//! Process set-up every role of the clients bench shares: pinning to one
//! CPU, raising `RLIMIT_NOFILE`, reading a process's CPU time from
//! `/proc/PID/stat`, the packets each CPU's network stack took in
//! (`/proc/net/softnet_stat`), and the `stat`/`ready` lines children print.
//!
//! Owns no state; must not touch sockets.

use std::io::Write;

use crate::{clock_ticks_per_s, stat_user_sys_s};

/// Why a process could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum SysError {
    /// The hard limit on open files is below what the role needs.
    #[error(
        "RLIMIT_NOFILE hard limit {hard} is below the {needed} files this role needs \
         (raise it: `ulimit -Hn {needed}` as root, or run fewer clients)"
    )]
    NoFile {
        /// The hard limit.
        hard: u64,
        /// Files needed.
        needed: u64,
    },
    /// getrlimit/setrlimit failed.
    #[error("RLIMIT_NOFILE: {0}")]
    Rlimit(std::io::Error),
    /// The CPU does not exist or pinning failed.
    #[error("cannot pin to CPU {0}")]
    Pin(usize),
}

/// Raises the soft `RLIMIT_NOFILE` to at least `needed` (up to the hard
/// limit); returns the new soft limit.
///
/// # Errors
/// [`SysError::NoFile`] if the hard limit is below `needed`.
pub fn raise_nofile(needed: u64) -> Result<u64, SysError> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: `lim` is a valid, writable rlimit; the call only writes it.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err(SysError::Rlimit(std::io::Error::last_os_error()));
    }
    if lim.rlim_max < needed {
        return Err(SysError::NoFile {
            hard: lim.rlim_max,
            needed,
        });
    }
    if lim.rlim_cur < needed {
        lim.rlim_cur = lim.rlim_max;
        // SAFETY: `lim` is a valid rlimit; the call only reads it.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err(SysError::Rlimit(std::io::Error::last_os_error()));
        }
    }
    Ok(lim.rlim_cur)
}

/// Files a role with `conns` connections needs: the sockets plus room for
/// the listener, the ring or epoll fd, stdio and the runtime's own.
pub fn files_for(conns: usize) -> u64 {
    conns as u64 + FILES_SPARE
}

/// Files beyond the connections every role keeps for itself.
pub const FILES_SPARE: u64 = 256;

/// Pins the calling thread (and the threads it starts later) to `cpu`.
///
/// # Errors
/// [`SysError::Pin`] if the CPU is not available.
pub fn pin(cpu: usize) -> Result<(), SysError> {
    let ok = core_affinity::get_core_ids()
        .unwrap_or_default()
        .into_iter()
        .find(|c| c.id == cpu)
        .is_some_and(core_affinity::set_for_current);
    if ok {
        Ok(())
    } else {
        Err(SysError::Pin(cpu))
    }
}

/// CPU seconds (user + system) process `pid` has used so far, all its
/// threads; `None` if it is gone.
pub fn process_cpu_s(pid: u32) -> Option<f64> {
    process_user_sys_s(pid).map(|(u, s)| u + s)
}

/// User and system CPU seconds process `pid` has used so far, all its
/// threads; `None` if it is gone.
pub fn process_user_sys_s(pid: u32) -> Option<(f64, f64)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat_user_sys_s(&stat, clock_ticks_per_s())
}

/// Nanoseconds process `pid`'s threads have run and have waited on a run
/// queue (runnable, not running: the CPU was busy with something else),
/// summed over its threads (`/proc/PID/task/*/schedstat`); `None` if it is
/// gone. Waiting is how a busy shared machine shows up.
pub fn process_sched_ns(pid: u32) -> Option<(u64, u64)> {
    let mut sum = (0u64, 0u64);
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(task) = task else { continue };
        let Ok(text) = std::fs::read_to_string(task.path().join("schedstat")) else {
            continue;
        };
        let mut f = text
            .split_whitespace()
            .map(|x| x.parse::<u64>().unwrap_or(0));
        sum.0 += f.next().unwrap_or(0);
        sum.1 += f.next().unwrap_or(0);
    }
    Some(sum)
}

/// Packets each CPU's network stack has taken in so far
/// (`/proc/net/softnet_stat`: `processed`, the first column, by CPU);
/// `None` if the file cannot be read or parsed. On loopback a packet is
/// taken in on the CPU that sent it (no RPS), so a CPU's count is every
/// segment sent from it: its process's data and the pure ACKs its reads
/// and its softirqs send.
pub fn softnet_processed() -> Option<Vec<(usize, u64)>> {
    parse_softnet(&std::fs::read_to_string("/proc/net/softnet_stat").ok()?)
}

/// Parses `/proc/net/softnet_stat` (one line per online CPU, hexadecimal
/// columns): `(cpu, processed)`. The CPU is the thirteenth column where the
/// kernel prints it (Linux >= 5.10), else the line's index.
pub fn parse_softnet(text: &str) -> Option<Vec<(usize, u64)>> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .enumerate()
        .map(|(i, line)| {
            let cols: Vec<&str> = line.split_whitespace().collect();
            let processed = u64::from_str_radix(cols.first()?, 16).ok()?;
            let cpu = match cols.get(12) {
                Some(c) => usize::from_str_radix(c, 16).ok()?,
                None => i,
            };
            Some((cpu, processed))
        })
        .collect()
}

/// Packets taken in on `cpu` between two [`softnet_processed`] readings
/// (0 if the CPU is missing from either; the counter is 32 bits wide in
/// the file and wraps).
pub fn softnet_delta(before: &[(usize, u64)], after: &[(usize, u64)], cpu: usize) -> u64 {
    let of = |v: &[(usize, u64)]| v.iter().find(|(c, _)| *c == cpu).map(|(_, n)| *n);
    match (of(before), of(after)) {
        (Some(b), Some(a)) => a.wrapping_sub(b) & u64::from(u32::MAX),
        _ => 0,
    }
}

/// Prints `TAG {json}` on stdout and flushes (the parent reads it line by
/// line).
pub fn emit(tag: &str, value: &serde_json::Value) {
    let mut out = std::io::stdout().lock();
    // A parent that went away is not this child's problem: it is killed next.
    let _ = writeln!(out, "{tag} {value}");
    let _ = out.flush();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nofile_beyond_the_hard_limit_is_refused_with_the_numbers() {
        match raise_nofile(u64::MAX) {
            Err(SysError::NoFile { needed, .. }) => assert_eq!(needed, u64::MAX),
            other => panic!("expected NoFile, got {other:?}"),
        }
        assert!(raise_nofile(64).unwrap() >= 64);
    }

    /// Both layouts of the file, a wrapped counter, a CPU that is missing
    /// and a malformed line.
    #[test]
    fn softnet_counts_are_read_per_cpu_and_their_deltas_wrap() {
        let new = "05ed2dc0 0001e120 00000007 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000\n\
                   0522f3a0 0001f1a8 00000008 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000003 00000000 00000000\n";
        let v = parse_softnet(new).unwrap();
        assert_eq!(v, vec![(0, 0x05ed_2dc0), (3, 0x0522_f3a0)]);
        let old = "00000010 00000000 00000000\n00000020 00000000 00000000\n";
        assert_eq!(parse_softnet(old).unwrap(), vec![(0, 16), (1, 32)]);
        assert!(parse_softnet("zz 00\n").is_none());
        let before = [(0, 0xffff_fff0), (1, 5)];
        let after = [(0, 0x10), (1, 9)];
        assert_eq!(softnet_delta(&before, &after, 0), 0x20);
        assert_eq!(softnet_delta(&before, &after, 1), 4);
        assert_eq!(softnet_delta(&before, &after, 7), 0);
        let live = softnet_processed().expect("this machine has /proc/net/softnet_stat");
        assert!(!live.is_empty());
    }

    #[test]
    fn own_cpu_time_is_read_and_pinning_an_absent_cpu_fails() {
        let t = process_cpu_s(std::process::id()).unwrap();
        assert!(t >= 0.0);
        assert!(process_cpu_s(u32::MAX).is_none());
        let burn: u64 = (0..5_000_000u64).map(std::hint::black_box).sum();
        assert!(burn > 0);
        let (run, _) = process_sched_ns(std::process::id()).unwrap();
        assert!(run > 0);
        assert!(process_sched_ns(u32::MAX).is_none());
        assert!(matches!(pin(100_000), Err(SysError::Pin(100_000))));
    }
}
