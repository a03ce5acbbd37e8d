//! Runs the bench: for each client count and repeat, each server in turn
//! (interleaved: epoll, io_uring, tessera, then again), each with a fresh
//! load process; measures the server's CPU over a steady window and folds
//! the repeats into medians, one row per client count.
//!
//! Owns the child processes (started from this executable, killed by their
//! own handle when the run ends) and the figures.

use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{channel, Receiver};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use super::walk::Bounds;
use super::{perf_split, sys};

/// A server under measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// The bare epoll tick loop.
    Epoll,
    /// The bare io_uring tick loop.
    Uring,
    /// tessera, one shard (its default socket loop, io_uring).
    Tessera,
    /// tessera, one shard, `gateway.io_backend = "epoll"`.
    TesseraEpoll,
}

impl Kind {
    /// The child role's name.
    pub fn role(self) -> &'static str {
        match self {
            Kind::Epoll => "epoll",
            Kind::Uring => "io_uring",
            Kind::Tessera => "tessera",
            Kind::TesseraEpoll => "tessera_epoll",
        }
    }

    /// tessera (either socket loop), not a bare server.
    pub fn is_tessera(self) -> bool {
        matches!(self, Kind::Tessera | Kind::TesseraEpoll)
    }
}

/// How to run the bench.
#[derive(Clone, Debug)]
pub struct RunOpts {
    /// Client counts, one row each.
    pub clients: Vec<usize>,
    /// Steady window measured, seconds.
    pub window_s: f64,
    /// Runs of each server per row (median taken).
    pub repeats: usize,
    /// Wait after every client is moving, before the window, seconds.
    pub settle_s: f64,
    /// Longest wait for every client to connect and move, seconds
    /// (a row is kept, marked, if some never do).
    pub ramp_timeout_s: f64,
    /// The servers' CPU.
    pub server_cpu: usize,
    /// The load's CPU.
    pub load_cpu: usize,
    /// The bare servers poll their sockets this often, ms.
    pub poll_ms: u64,
    /// The bare servers write to every client this often, ms.
    pub tick_ms: u64,
    /// Bytes per client per tick from the bare servers.
    pub bytes_per_tick: usize,
    /// Moves per client per second.
    pub move_hz: f64,
    /// Bytes the bare servers walk every poll (`--bare-touch-kib`).
    pub touch_bytes: usize,
    /// The bare servers write from a buffer per client (`--bare-own-buffers`).
    pub own_buffers: bool,
    /// The bare servers write their clients in this many groups (`--bare-phases`).
    pub phases: usize,
    /// The kernel/user split from perf samples (`--perf-split`), not the
    /// scheduler ticks of `/proc`.
    pub perf_split: bool,
    /// With call graphs: the kernel functions each server's kernel part
    /// went to, this many listed per row (`--kernel-top`; 0: none).
    pub kernel_top: usize,
    /// Keep each run's perf data in this directory (`--perf-keep`).
    pub perf_keep: Option<std::path::PathBuf>,
    /// How the load waits (`--load-wait`).
    pub load_wait: super::driver::LoadWait,
    /// tessera's config overrides (`--tessera-set`), `KEY=VALUE`.
    pub tessera_sets: Vec<String>,
    /// The world sized for about this many in each view (`--in-view`).
    pub in_view: f64,
}

impl RunOpts {
    /// The world's density and the overrides as loadgen's (and so the
    /// tessera child's) arguments.
    pub fn tessera_extra(&self) -> Vec<String> {
        super::tessera_server::extra_args(self.in_view, &self.tessera_sets)
    }
}

/// One measured run of one server.
#[derive(Clone, Debug, serde::Serialize)]
pub struct Sample {
    /// Clients asked.
    pub clients: usize,
    /// Clients moving during the window (the smaller of its two ends).
    pub moving: u64,
    /// Server CPU µs per moving client per second.
    pub us_per_client_s: f64,
    /// Share of a core the server used, percent.
    pub server_core_pct: f64,
    /// The server's user CPU over its system CPU in the window. The
    /// kernel's part is fixed by the traffic (the same sends and receives
    /// for every server), so for one server this is the before/after figure
    /// of its own code that a machine running faster or slower cancels out.
    pub server_user_over_sys: f64,
    /// The kernel's part of `us_per_client_s` (the server's system CPU).
    pub sys_us_per_client_s: f64,
    /// Share of a core the load used, percent.
    pub load_core_pct: f64,
    /// Share of the window the server's threads were runnable but waited
    /// for the CPU (others' work on it), percent: a noisy run shows here.
    pub server_wait_pct: f64,
    /// The same for the load, percent.
    pub load_wait_pct: f64,
    /// Bytes the server received per client per second (what the load
    /// sent, by the load's clock).
    pub server_in_per_client_s: f64,
    /// Bytes the server wrote per client per second (what the load
    /// received, by the load's clock).
    pub server_out_per_client_s: f64,
    /// Moves sent per moving client per second.
    pub moves_per_client_s: f64,
    /// Bare servers: ticks lost in the window; tessera: ticks over budget.
    pub ticks_lost: u64,
    /// tessera: moves (and other frames) refused in the window.
    pub refused: u64,
    /// Connections closed during the window (either side saw it).
    pub closed: u64,
    /// Packets sent from the server's CPU per moving client per second
    /// (`sys::softnet_processed`: on loopback, the segments its process
    /// wrote, the pure ACKs its reads sent, and what its softirqs sent for
    /// the clients' sockets); `None` where the kernel does not say.
    pub server_cpu_packets_per_client_s: Option<f64>,
    /// The same for the load's CPU.
    pub load_cpu_packets_per_client_s: Option<f64>,
    /// With `--kernel-top`: the kernel functions of the window, inclusive
    /// µs per client-second (`perf_split::kernel_functions` times
    /// `us_per_client_s`), largest first.
    #[serde(skip)]
    pub kernel_fns: Vec<(String, f64)>,
}

/// A child process whose stdout lines (`ready {..}`, `stat {..}`) a thread
/// reads; the last `stat` is kept.
struct Proc {
    child: Child,
    ready: Receiver<Value>,
    last: Arc<Mutex<Value>>,
}

impl Proc {
    fn spawn(args: &[String]) -> anyhow::Result<Proc> {
        let exe = std::env::current_exe()?;
        let mut child = Command::new(exe)
            .arg("child")
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .spawn()?;
        let out = child
            .stdout
            .take()
            .ok_or_else(|| anyhow::anyhow!("no stdout"))?;
        let (tx, ready) = channel();
        let last = Arc::new(Mutex::new(Value::Null));
        let keep = last.clone();
        std::thread::spawn(move || {
            for line in BufReader::new(out).lines().map_while(Result::ok) {
                let Some((tag, body)) = line.split_once(' ') else {
                    continue;
                };
                let Ok(v) = serde_json::from_str::<Value>(body) else {
                    continue;
                };
                match tag {
                    "ready" => {
                        let _ = tx.send(v);
                    }
                    "stat" => {
                        if let Ok(mut l) = keep.lock() {
                            *l = v;
                        }
                    }
                    _ => {}
                }
            }
        });
        Ok(Proc { child, ready, last })
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn stat(&self) -> Value {
        self.last.lock().map(|v| v.clone()).unwrap_or(Value::Null)
    }

    fn alive(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }

    fn cpu_s(&self) -> anyhow::Result<f64> {
        self.user_sys_s().map(|(u, s)| u + s)
    }

    fn user_sys_s(&self) -> anyhow::Result<(f64, f64)> {
        sys::process_user_sys_s(self.pid())
            .ok_or_else(|| anyhow::anyhow!("process {} is gone", self.pid()))
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn num(v: &Value, key: &str) -> u64 {
    v.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// The count `key` per client per second between two of the load's stat
/// lines (by their own clocks: the lines come once a second, not at the
/// window's ends).
fn load_rate(l0: &Value, l1: &Value, key: &str, moving: u64) -> f64 {
    let t = |v: &Value| v.get("t_s").and_then(Value::as_f64).unwrap_or(0.0);
    let dt = t(l1) - t(l0);
    let dm = num(l1, key).saturating_sub(num(l0, key));
    if dt > 0.0 && moving > 0 {
        dm as f64 / (dt * moving as f64)
    } else {
        0.0
    }
}

/// The world every server's clients walk in: tessera's for as many bots,
/// at `o`'s density and with its overrides (a set that resizes tessera's
/// world, such as `aoi.radius_m`, resizes the walk's too).
///
/// # Errors
/// If loadgen's settings do not make a valid config.
pub fn world(clients: usize, o: &RunOpts) -> anyhow::Result<Bounds> {
    let extra = o.tessera_extra();
    let w = super::tessera_server::config_with(clients, 0, 100, "epoll", &extra)?.world;
    Ok(Bounds {
        min_x: w.min_x_m,
        min_z: w.min_z_m,
        max_x: w.max_x_m,
        max_z: w.max_z_m,
    })
}

/// The perf recording of a window (`--perf-split`), with call graphs for
/// `--kernel-top`, kept under `--perf-keep`; `None` without `--perf-split`.
fn start_perf(
    kind: Kind,
    clients: usize,
    pid: u32,
    o: &RunOpts,
) -> Result<Option<perf_split::Recording>, perf_split::PerfError> {
    if !o.perf_split {
        return Ok(None);
    }
    let keep = (o.perf_keep.as_ref())
        .map(|dir| dir.join(format!("{}-{clients}-{pid}.perf.data", kind.role())));
    perf_split::Recording::start(pid, o.window_s, o.kernel_top > 0, keep).map(Some)
}

/// The server child's arguments for `kind` at `clients`.
fn server_args(kind: Kind, clients: usize, o: &RunOpts) -> Vec<String> {
    let n = clients.to_string();
    let mut server_args = vec![
        kind.role().to_owned(),
        format!("--clients={n}"),
        format!("--cpu={}", o.server_cpu),
        format!("--poll-ms={}", o.poll_ms),
        format!("--tick-ms={}", o.tick_ms),
        format!("--bytes-per-tick={}", o.bytes_per_tick),
        format!("--touch-bytes={}", o.touch_bytes),
        format!("--phases={}", o.phases),
    ];
    if o.own_buffers {
        server_args.push("--own-buffers".to_owned());
    }
    if kind.is_tessera() {
        server_args.truncate(3);
        server_args.push(format!("--tick-ms={}", o.tick_ms));
        server_args.push(format!("--in-view={}", o.in_view));
        server_args.extend(o.tessera_sets.iter().map(|kv| format!("--set={kv}")));
    }
    server_args
}

/// One run of `kind` with `clients` clients.
///
/// # Errors
/// If a child cannot start, announce itself, or dies during the window.
pub fn run_one(kind: Kind, clients: usize, o: &RunOpts) -> anyhow::Result<Sample> {
    let n = clients.to_string();
    let server_args = server_args(kind, clients, o);
    let server = Proc::spawn(&server_args)?;
    let ready = server
        .ready
        .recv_timeout(Duration::from_secs(30))
        .map_err(|_| anyhow::anyhow!("{} did not say ready", kind.role()))?;
    let addr = ready
        .get("addr")
        .and_then(Value::as_str)
        .ok_or_else(|| anyhow::anyhow!("ready without addr"))?
        .to_owned();
    let w = world(clients, o)?;
    let peer = if kind.is_tessera() { "tessera" } else { "bare" };
    let mut load = Proc::spawn(&[
        "load".to_owned(),
        format!("--clients={n}"),
        format!("--cpu={}", o.load_cpu),
        format!("--addr={addr}"),
        format!("--peer={peer}"),
        format!("--move-hz={}", o.move_hz),
        format!("--world={},{},{},{}", w.min_x, w.min_z, w.max_x, w.max_z),
        format!(
            "--wait={}",
            clap::ValueEnum::to_possible_value(&o.load_wait)
                .expect("no variant is skipped")
                .get_name()
        ),
    ])?;
    let mut server = server;
    let deadline = Instant::now() + Duration::from_secs_f64(o.ramp_timeout_s);
    while num(&load.stat(), "moving") < clients as u64 && Instant::now() < deadline {
        if !load.alive() || !server.alive() {
            anyhow::bail!("{}: a process died during the ramp", kind.role());
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if num(&load.stat(), "moving") < clients as u64 {
        eprintln!(
            "clients: {} {clients}: not all moving after {} s: load {}, server {}",
            kind.role(),
            o.ramp_timeout_s,
            load.stat(),
            server.stat()
        );
    }
    std::thread::sleep(Duration::from_secs_f64(o.settle_s));
    // Stat lines come once a second: sample the line that just changed.
    let (s0, l0) = (server.stat(), load.stat());
    let w0 = sys::process_sched_ns(server.pid()).map_or(0, |s| s.1);
    let lw0 = sys::process_sched_ns(load.pid()).map_or(0, |s| s.1);
    let perf = start_perf(kind, clients, server.pid(), o)?;
    let net0 = sys::softnet_processed();
    let (us0, d0, t0) = (server.user_sys_s()?, load.cpu_s()?, Instant::now());
    std::thread::sleep(Duration::from_secs_f64(o.window_s));
    let (us1, d1, t1) = (server.user_sys_s()?, load.cpu_s()?, Instant::now());
    let net1 = sys::softnet_processed();
    let (c0, c1) = (us0.0 + us0.1, us1.0 + us1.1);
    // The kernel's part: perf's share of the exact total, or the ticks'.
    let split = perf.map(perf_split::Recording::finish).transpose()?;
    let sys_s = (split.as_ref()).map_or(us1.1 - us0.1, |sp| sp.kernel_share * (c1 - c0));
    let w1 = sys::process_sched_ns(server.pid()).map_or(0, |s| s.1);
    let lw1 = sys::process_sched_ns(load.pid()).map_or(0, |s| s.1);
    let (s1, l1) = (server.stat(), load.stat());
    if !load.alive() || !server.alive() {
        anyhow::bail!("{}: a process died during the window", kind.role());
    }
    let wall = (t1 - t0).as_secs_f64();
    let moving = num(&l0, "moving").min(num(&l1, "moving"));
    let per = |d: u64| d as f64 / (moving.max(1) as f64 * wall);
    let lost = if kind.is_tessera() {
        num(&s1, "stalls").saturating_sub(num(&s0, "stalls"))
    } else {
        num(&s1, "ticks_lost").saturating_sub(num(&s0, "ticks_lost"))
    };
    let closed = num(&l1, "closed").saturating_sub(num(&l0, "closed"));
    let us_per_client_s = (c1 - c0) * 1e6 * per(1);
    let kernel_fns = split.map_or_else(Vec::new, |sp| sp.kernel_us(us_per_client_s));
    let packets = |cpu: usize| match (&net0, &net1) {
        (Some(a), Some(b)) => Some(per(sys::softnet_delta(a, b, cpu))),
        _ => None,
    };
    Ok(Sample {
        clients,
        moving,
        us_per_client_s,
        server_core_pct: (c1 - c0) / wall * 100.0,
        server_user_over_sys: if sys_s > 0.0 {
            (c1 - c0 - sys_s) / sys_s
        } else {
            0.0
        },
        sys_us_per_client_s: sys_s * 1e6 * per(1),
        load_core_pct: (d1 - d0) / wall * 100.0,
        server_wait_pct: w1.saturating_sub(w0) as f64 / 1e9 / wall * 100.0,
        load_wait_pct: lw1.saturating_sub(lw0) as f64 / 1e9 / wall * 100.0,
        // The bytes as the clients sent and received them, by the load's
        // own clock: a server's published counters can lag its stat line
        // by a second or more (tessera publishes every second, with a
        // try-lock), which put 20 % too many bytes in a 10 s window.
        server_in_per_client_s: load_rate(&l0, &l1, "bytes_out", moving),
        server_out_per_client_s: load_rate(&l0, &l1, "bytes_in", moving),
        moves_per_client_s: load_rate(&l0, &l1, "moves", moving),
        ticks_lost: lost,
        refused: num(&s1, "refused").saturating_sub(num(&s0, "refused")),
        closed,
        server_cpu_packets_per_client_s: packets(o.server_cpu),
        load_cpu_packets_per_client_s: packets(o.load_cpu),
        kernel_fns,
    })
}

/// The median of `xs` (the mean of the middle two for an even count);
/// `None` when empty.
pub fn median(xs: &[f64]) -> Option<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    if v.is_empty() {
        return None;
    }
    v.sort_by(f64::total_cmp);
    let m = v.len() / 2;
    Some(if v.len() % 2 == 1 {
        v[m]
    } else {
        (v[m - 1] + v[m]) / 2.0
    })
}

/// One row: the medians of each server's samples at one client count.
pub fn row(clients: usize, samples: &[(Kind, Sample)]) -> Value {
    let of = |k: Kind| -> Vec<&Sample> {
        samples
            .iter()
            .filter(|(kk, s)| *kk == k && s.clients == clients)
            .map(|(_, s)| s)
            .collect()
    };
    let med = |k: Kind| median(&of(k).iter().map(|s| s.us_per_client_s).collect::<Vec<_>>());
    let (epoll, uring, tessera) = (med(Kind::Epoll), med(Kind::Uring), med(Kind::Tessera));
    let (floor_kind, floor) = match (epoll, uring) {
        (Some(e), Some(u)) if u < e => ("io_uring", Some(u)),
        (Some(e), _) => ("epoll", Some(e)),
        (None, Some(u)) => ("io_uring", Some(u)),
        (None, None) => ("none", None),
    };
    // The floor's kernel part: tessera's own kernel part is held to it.
    let floor_sys = match floor_kind {
        "io_uring" => Some(Kind::Uring),
        "epoll" => Some(Kind::Epoll),
        _ => None,
    }
    .and_then(|k| {
        median(
            &of(k)
                .iter()
                .map(|s| s.sys_us_per_client_s)
                .collect::<Vec<_>>(),
        )
    });
    let ratio = match (tessera, floor) {
        (Some(t), Some(f)) if f > 0.0 => Some(t / f),
        _ => None,
    };
    // tessera's CPU split: what its kernel part (the traffic's sends and
    // receives) leaves of the goal for its own code.
    let tessera_sys = median(
        &of(Kind::Tessera)
            .iter()
            .map(|s| s.sys_us_per_client_s)
            .collect::<Vec<_>>(),
    );
    let tessera_user = match (tessera, tessera_sys) {
        (Some(t), Some(k)) => Some(t - k),
        _ => None,
    };
    let user_budget = match (floor, tessera_sys) {
        (Some(f), Some(k)) => Some(RATIO_GOAL * f - k),
        _ => None,
    };
    let all = samples.iter().filter(|(_, s)| s.clients == clients);
    let all_connected =
        all.clone().count() > 0 && all.clone().all(|(_, s)| s.moving == clients as u64);
    let bare_ticks_kept = all
        .clone()
        .filter(|(k, _)| !k.is_tessera())
        .all(|(_, s)| s.ticks_lost == 0);
    let tessera_epoll = med(Kind::TesseraEpoll);
    let uring_over_epoll = match (tessera, tessera_epoll) {
        (Some(u), Some(e)) if e > 0.0 => Some(u / e),
        _ => None,
    };
    let t = of(Kind::Tessera);
    let tmed = |f: fn(&Sample) -> f64| median(&t.iter().map(|s| f(s)).collect::<Vec<_>>());
    let load_max = all
        .clone()
        .map(|(_, s)| s.load_core_pct)
        .fold(0.0, f64::max);
    let moves_min = all
        .clone()
        .map(|(_, s)| s.moves_per_client_s)
        .fold(f64::INFINITY, f64::min);
    // Packets sent from each CPU (see `Sample`), each server's median: the
    // pure ACKs a server's reads send show here (bench/README.md, "Where
    // the kernel's excess goes").
    let packets = |k: Kind, f: fn(&Sample) -> Option<f64>| {
        median(&of(k).iter().filter_map(|s| f(s)).collect::<Vec<_>>()).map(round1)
    };
    let mut per_cpu = serde_json::Map::new();
    for k in [Kind::Epoll, Kind::Uring, Kind::Tessera, Kind::TesseraEpoll] {
        let pair = (
            packets(k, |s| s.server_cpu_packets_per_client_s),
            packets(k, |s| s.load_cpu_packets_per_client_s),
        );
        if let (Some(server), Some(load)) = pair {
            per_cpu.insert(
                k.role().to_owned(),
                json!({"server_cpu": server, "load_cpu": load}),
            );
        }
    }
    json!({
        "clients": clients,
        "packets_per_client_s": per_cpu,
        "ceiling_us_per_client_s": floor.map(round1),
        "server_us_per_client_s": tessera.map(round1),
        "ratio": ratio.map(round2),
        "floor": floor_kind,
        "floor_sys_us_per_client_s": floor_sys.map(round1),
        "epoll_us_per_client_s": epoll.map(round1),
        "io_uring_us_per_client_s": uring.map(round1),
        "tessera_epoll_us_per_client_s": tessera_epoll.map(round1),
        "tessera_uring_over_epoll": uring_over_epoll.map(round2),
        "tessera_core_pct": tmed(|s| s.server_core_pct).map(round1),
        "tessera_user_over_sys": tmed(|s| s.server_user_over_sys).map(round2),
        "tessera_sys_us_per_client_s": tessera_sys.map(round1),
        "tessera_user_us_per_client_s": tessera_user.map(round1),
        "user_budget_us_per_client_s": user_budget.map(round1),
        "tessera_moves_per_client_s": tmed(|s| s.moves_per_client_s).map(round2),
        "tessera_in_bytes_per_client_s": tmed(|s| s.server_in_per_client_s).map(round1),
        "tessera_out_bytes_per_client_s": tmed(|s| s.server_out_per_client_s).map(round1),
        "server_wait_pct_max": round1(all.clone().map(|(_, s)| s.server_wait_pct).fold(0.0, f64::max)),
        "tessera_refused": t.iter().map(|s| s.refused).sum::<u64>(),
        "tessera_ticks_over_budget": t.iter().map(|s| s.ticks_lost).sum::<u64>(),
        "all_connected": all_connected,
        "bare_ticks_kept": bare_ticks_kept,
        "load_core_pct_max": round1(load_max),
        "moves_per_client_s_min": if moves_min.is_finite() { Some(round2(moves_min)) } else { None },
        "runs": all.count(),
    })
}

/// The ratio to the floor issue 21 steers by: at most this.
pub const RATIO_GOAL: f64 = 1.5;

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round2(x: f64) -> f64 {
    (x * 100.0).round() / 100.0
}

/// A run counts as kept up when the load sent at least this share of the
/// moves it should (a busy shared machine can starve the load's core).
pub const MOVES_KEPT_FRACTION: f64 = 0.95;
/// Extra attempts of a run whose load did not keep up.
pub const RETRIES_MAX: usize = 2;

/// True when the load sent its moves (see [`MOVES_KEPT_FRACTION`]).
pub fn kept_up(s: &Sample, move_hz: f64) -> bool {
    s.moves_per_client_s >= MOVES_KEPT_FRACTION * move_hz
}

fn report(k: Kind, rep: usize, s: &Sample) {
    eprintln!(
        "clients: {:>6} {:<8} run {}: {:>7.1} µs/client/s, server {:>5.1} % core (user/sys {:.3}, waited {:.1} %, in {:.0} B/client/s, out {:.0}, {} packets/client/s from its CPU), load {:>5.1} % (waited {:.1} %, {}), moving {}, {:.2} moves/client/s, lost {}, refused {}",
        s.clients,
        k.role(),
        rep + 1,
        s.us_per_client_s,
        s.server_core_pct,
        s.server_user_over_sys,
        s.server_wait_pct,
        s.server_in_per_client_s,
        s.server_out_per_client_s,
        fmt_packets(s.server_cpu_packets_per_client_s),
        s.load_core_pct,
        s.load_wait_pct,
        fmt_packets(s.load_cpu_packets_per_client_s),
        s.moving,
        s.moves_per_client_s,
        s.ticks_lost,
        s.refused
    );
}

fn fmt_packets(p: Option<f64>) -> String {
    p.map_or_else(|| "-".to_owned(), |p| format!("{p:.1}"))
}

/// Runs every row; returns the samples (failed runs are reported on stderr
/// and left out, so the row shows what could be measured). A run whose load
/// fell behind is tried again up to [`RETRIES_MAX`] times; the last try is
/// kept either way (the row says whether every run kept up).
pub fn run_all(o: &RunOpts, kinds: &[Kind]) -> Vec<(Kind, Sample)> {
    let mut out = Vec::new();
    for &clients in &o.clients {
        for rep in 0..o.repeats {
            for &k in kinds {
                let mut last = None;
                for attempt in 0..=RETRIES_MAX {
                    match run_one(k, clients, o) {
                        Ok(s) => {
                            report(k, rep, &s);
                            let ok = kept_up(&s, o.move_hz);
                            last = Some(s);
                            if ok {
                                break;
                            }
                            if attempt < RETRIES_MAX {
                                eprintln!("clients: the load fell behind; again");
                            }
                        }
                        Err(e) => {
                            eprintln!(
                                "clients: {clients} {} run {}: FAILED: {e:#}",
                                k.role(),
                                rep + 1
                            );
                            break;
                        }
                    }
                    // Let the closed connections and timers of this run settle.
                    std::thread::sleep(Duration::from_millis(500));
                }
                out.extend(last.map(|s| (k, s)));
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
    out
}

/// The readable table of `rows`.
pub fn table(rows: &[Value]) -> String {
    let mut s = String::from(
        "| clients | epoll µs/client/s | io_uring | floor | tessera | ratio | tessera % core | all connected | bare ticks kept | load moves/client/s (min) |\n|---|---|---|---|---|---|---|---|---|---|\n",
    );
    let f = |v: &Value, k: &str| match v.get(k) {
        Some(Value::Null) | None => "-".to_owned(),
        Some(x) => x.to_string().trim_matches('"').to_owned(),
    };
    for r in rows {
        s.push_str(&format!(
            "| {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {} |\n",
            f(r, "clients"),
            f(r, "epoll_us_per_client_s"),
            f(r, "io_uring_us_per_client_s"),
            f(r, "ceiling_us_per_client_s"),
            f(r, "floor"),
            f(r, "server_us_per_client_s"),
            f(r, "ratio"),
            f(r, "tessera_core_pct"),
            f(r, "all_connected"),
            f(r, "bare_ticks_kept"),
            f(r, "moves_per_client_s_min"),
        ));
    }
    s
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub(crate) fn sample(clients: usize, us: f64, moving: u64) -> Sample {
        Sample {
            clients,
            moving,
            us_per_client_s: us,
            server_core_pct: 10.0,
            server_user_over_sys: 1.0,
            sys_us_per_client_s: us / 2.0,
            load_core_pct: 20.0,
            server_wait_pct: 1.0,
            load_wait_pct: 1.0,
            server_in_per_client_s: 520.0,
            server_out_per_client_s: 2500.0,
            moves_per_client_s: 10.0,
            ticks_lost: 0,
            refused: 0,
            closed: 0,
            server_cpu_packets_per_client_s: Some(us / 10.0),
            load_cpu_packets_per_client_s: Some(20.0),
            kernel_fns: Vec::new(),
        }
    }

    /// Rates come from the load's own lines and clock, per moving client.
    #[test]
    fn load_rates_are_by_the_load_lines_own_clock() {
        let l0 = json!({"t_s": 10.0, "bytes_in": 1_000, "moves": 50});
        let l1 = json!({"t_s": 12.0, "bytes_in": 21_000, "moves": 250});
        assert_eq!(load_rate(&l0, &l1, "bytes_in", 4), 2_500.0);
        assert_eq!(load_rate(&l0, &l1, "moves", 10), 10.0);
        assert_eq!(load_rate(&l0, &l0, "moves", 10), 0.0, "no time, no rate");
        assert_eq!(load_rate(&l0, &l1, "moves", 0), 0.0, "no client, no rate");
    }

    #[test]
    fn medians_of_odd_even_and_empty() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN]), None);
    }

    #[test]
    fn the_floor_is_the_cheaper_bare_server_and_the_ratio_is_against_it() {
        let s = vec![
            (Kind::Epoll, sample(100, 80.0, 100)),
            (Kind::Uring, sample(100, 60.0, 100)),
            (Kind::Tessera, sample(100, 150.0, 100)),
            (Kind::Epoll, sample(100, 100.0, 100)),
            (Kind::Uring, sample(100, 70.0, 100)),
            (Kind::Tessera, sample(100, 90.0, 99)),
            (Kind::Tessera, sample(200, 1.0, 200)),
        ];
        let r = row(100, &s);
        assert_eq!(r["epoll_us_per_client_s"], json!(90.0));
        assert_eq!(r["io_uring_us_per_client_s"], json!(65.0));
        assert_eq!(r["ceiling_us_per_client_s"], json!(65.0));
        assert_eq!(r["floor"], json!("io_uring"));
        assert_eq!(
            r["floor_sys_us_per_client_s"],
            json!(32.5),
            "half of 60 and 70"
        );
        assert_eq!(r["server_us_per_client_s"], json!(120.0));
        assert_eq!(r["ratio"], json!(1.85));
        // Half of each tessera run was the kernel's (the samples' split):
        // the median of 75, 45 is 60, the user part 120 - 60, and the goal
        // leaves 1.5 x 65 - 60 for tessera's own code.
        assert_eq!(r["tessera_sys_us_per_client_s"], json!(60.0));
        assert_eq!(r["tessera_user_us_per_client_s"], json!(60.0));
        assert_eq!(r["user_budget_us_per_client_s"], json!(37.5));
        assert_eq!(r["all_connected"], json!(false), "one run had 99 moving");
        // Packets from each CPU, each server's median (a tenth of its µs in
        // the samples); a server whose kernel did not say is left out.
        let p = &r["packets_per_client_s"];
        assert_eq!(p["epoll"], json!({"server_cpu": 9.0, "load_cpu": 20.0}));
        assert_eq!(p["tessera"]["server_cpu"], json!(12.0));
        assert!(p.get("tessera_epoll").is_none());
        let mut unsaid = s.clone();
        for (_, x) in &mut unsaid {
            x.server_cpu_packets_per_client_s = None;
        }
        assert_eq!(row(100, &unsaid)["packets_per_client_s"], json!({}));
        assert_eq!(r["runs"], json!(6));
        let none = row(100, &s[2..3]);
        assert_eq!(none["ratio"], Value::Null);
        assert_eq!(none["user_budget_us_per_client_s"], Value::Null);
        assert_eq!(none["floor"], json!("none"));
        assert_eq!(none["floor_sys_us_per_client_s"], Value::Null);
        assert!(table(&[r]).contains("| 100 | 90.0 | 65.0 | 65.0 (io_uring) | 120.0 | 1.85 |"));
    }
}
