//! The kernel's share of a server's CPU time, from `perf` samples
//! (`--perf-split`).
//!
//! `/proc/PID/stat` splits a process's time into user and system by what
//! the CPU was doing at each scheduler tick (`CONFIG_TICK_CPU_ACCOUNTING`,
//! 250 Hz on this machine). A server whose work follows a 50 ms tick can be
//! phase-locked to those samples: tessera's split moved 12 µs a
//! client-second between its parts, the total unchanged, when only the
//! timing of its sends changed (bench/README.md, thirteenth round). `perf
//! record` samples the process at 1,999 Hz on a timer of its own, hundreds
//! of samples per tick, so its share is the one to steer by; the absolute
//! figure still comes from `/proc` (whose total is exact).
//!
//! Owns the `perf` child and its data file; knows nothing of servers.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};

/// Samples a second (a prime, so it does not beat with a tick).
pub const SAMPLE_HZ: u32 = 1_999;

/// Why `perf` could not give a split.
#[derive(Debug, thiserror::Error)]
pub enum PerfError {
    /// `perf` is not installed or not runnable.
    #[error("--perf-split needs `perf` (linux-tools) on PATH: {0}")]
    Missing(std::io::Error),
    /// `perf record` or `perf report` failed (permissions: `perf_event_paranoid`).
    #[error("perf {what} failed: {stderr}")]
    Failed {
        /// Which step.
        what: &'static str,
        /// What perf said.
        stderr: String,
    },
    /// The report had no samples.
    #[error("perf report of {0} holds no samples")]
    Empty(String),
}

/// Checks that `perf` runs at all (before any child starts).
///
/// # Errors
/// [`PerfError::Missing`].
pub fn check() -> Result<(), PerfError> {
    let out = Command::new("perf")
        .arg("--version")
        .output()
        .map_err(PerfError::Missing)?;
    if out.status.success() {
        Ok(())
    } else {
        Err(PerfError::Failed {
            what: "--version",
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        })
    }
}

/// A `perf record` of one process over one window.
pub struct Recording {
    child: Child,
    path: PathBuf,
}

impl Recording {
    /// Starts sampling every thread of `pid` for `window_s` seconds.
    ///
    /// # Errors
    /// [`PerfError::Missing`] if `perf` cannot be started.
    pub fn start(pid: u32, window_s: f64) -> Result<Recording, PerfError> {
        let path = std::env::temp_dir().join(format!(
            "tessera-clients-{}-{pid}.perf.data",
            std::process::id()
        ));
        let child = Command::new("perf")
            .args(["record", "-q", "-F", &SAMPLE_HZ.to_string(), "-p"])
            .arg(pid.to_string())
            .arg("-o")
            .arg(&path)
            .args(["--", "sleep", &format!("{window_s:.3}")])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(PerfError::Missing)?;
        Ok(Recording { child, path })
    }

    /// Waits for the window's end; the kernel's share of the samples.
    ///
    /// # Errors
    /// [`PerfError`] if recording or reporting failed or found nothing.
    pub fn finish(self) -> Result<f64, PerfError> {
        let Recording { child, path } = self;
        let out = child.wait_with_output().map_err(PerfError::Missing)?;
        let result = if out.status.success() {
            report(&path)
        } else {
            Err(PerfError::Failed {
                what: "record",
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
        };
        let _ = std::fs::remove_file(&path);
        result
    }
}

fn report(path: &std::path::Path) -> Result<f64, PerfError> {
    let out = Command::new("perf")
        .args([
            "report", "-q", "--stdio", "--sort", "dso", "-g", "none", "-i",
        ])
        .arg(path)
        .stdin(Stdio::null())
        .output()
        .map_err(PerfError::Missing)?;
    if !out.status.success() {
        return Err(PerfError::Failed {
            what: "report",
            stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
        });
    }
    kernel_share(&String::from_utf8_lossy(&out.stdout))
        .ok_or_else(|| PerfError::Empty(path.display().to_string()))
}

/// The kernel's share of the samples in `perf report --sort dso` output
/// (lines `  45.12%  [kernel.kallsyms]`); `None` without any sample line.
pub fn kernel_share(report: &str) -> Option<f64> {
    let (mut kernel, mut all) = (0.0, 0.0);
    for line in report.lines() {
        let mut parts = line.split_whitespace();
        let (Some(pct), Some(dso)) = (parts.next(), parts.next()) else {
            continue;
        };
        let Some(pct) = pct.strip_suffix('%').and_then(|p| p.parse::<f64>().ok()) else {
            continue;
        };
        all += pct;
        if dso.starts_with("[kernel") {
            kernel += pct;
        }
    }
    (all > 0.0).then(|| kernel / all)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_kernel_share_counts_kernel_lines_only() {
        let report = "\
    48.20%  [kernel.kallsyms]
    50.00%  clients
     1.30%  libc.so.6
     0.50%  [vdso]
# a comment line
";
        let s = kernel_share(report).expect("samples");
        assert!((s - 0.482).abs() < 1e-9, "{s}");
        assert_eq!(kernel_share("# nothing\n\n"), None);
        assert_eq!(kernel_share("    12.0%  [kernel.kallsyms]\n"), Some(1.0));
    }
}
