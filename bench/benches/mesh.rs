//! Mesh benchmark: cross-shard messages per second and tick time with 2 shards,
//! next to the same figures for 1 shard sending to itself, in one run.
//!
//! `cargo bench -p tessera-bench --bench mesh` (env: `MESH_BENCH_SECS` per run,
//! default 2; `MESH_BENCH_REPEATS`, default 3; `MESH_BENCH_LOADS`, messages
//! per destination per tick, default `1000,10000,100000`).
//!
//! Each case runs the real runtime (pinned glommio shards, 10 ms ticks, the
//! flume mesh) with an application that, every tick, sends `load` envelopes to
//! every other shard (or to itself with 1 shard) and reads everything it
//! received. Bodies are either one shared rkyv body per tick (`shared`: the
//! mesh's own cost, fan-out style) or encoded per message (`encode`: adds rkyv
//! serialisation and two allocations per message). Cases alternate 1 and 2
//! shards so both see the same machine noise; the median and the spread
//! (min..max) over the repeats are printed.
//!
//! A second part compares the two ways a destination can learn of batches
//! (see `tessera::runtime::mesh`): a per-tick `try_recv` drain versus a task
//! parked in `recv_async` (one wake-up per batch).

use rkyv::{Archive, Serialize};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::{Duration, Instant};
use tessera::config::Config;
use tessera::core::time::Time;
use tessera::runtime::{Hist, Runtime};
use tessera::shard::{ClientPort, Count, Inbox, Outbox, ShardApp, ShardContext};
use tessera::wire::Body;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const KIND: u16 = 1;

#[derive(Archive, Serialize)]
struct Msg {
    n: u64,
    entity: u64,
    pos: [f32; 3],
    version: u64,
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum BodyMode {
    Shared,
    Encode,
}

struct Blaster {
    ctx: ShardContext,
    load: u64,
    mode: BodyMode,
    received: u64,
    checksum: u64,
    refused: u64,
}

impl Blaster {
    fn body(n: u64) -> Body {
        let msg = Msg {
            n,
            entity: n * 7,
            pos: [1.0, 2.0, 3.0],
            version: n,
        };
        Body::encode(&msg).expect("encode")
    }
}

impl ShardApp for Blaster {
    fn on_tick(&mut self, _now: Time, inbox: Inbox<'_>, out: &mut Outbox, _port: &mut ClientPort) {
        for env in inbox {
            let m = env.access::<Msg>(KIND).expect("valid");
            self.checksum = self.checksum.wrapping_add(m.n.to_native());
            self.received += 1;
        }
        let me = self.ctx.shard;
        let dests: Vec<_> = self
            .ctx
            .all_shards()
            .filter(|&d| d != me || self.ctx.shards == 1)
            .collect();
        let shared = Self::body(0);
        for dest in dests {
            for n in 0..self.load {
                let body = match self.mode {
                    BodyMode::Shared => shared.clone(),
                    BodyMode::Encode => Self::body(n),
                };
                if out.send(dest, KIND, body).is_err() {
                    self.refused += 1;
                    break;
                }
            }
        }
    }

    fn on_stop(&mut self, _now: Time, inbox: Inbox<'_>) {
        self.received += inbox.len() as u64;
    }
}

#[derive(Clone, Copy, Debug, Default)]
struct Figures {
    msgs_per_s: f64,
    /// Tick p50 divided by the envelopes a shard sends per tick (each shard
    /// also receives as many): the cost of one send + one receive + access.
    ns_per_msg: f64,
    tick_p50_us: u64,
    tick_p99_us: u64,
    flush_p99_us: u64,
    skipped: u64,
    queue_full: u64,
}

fn run_case(shards: u16, load: u64, mode: BodyMode, secs: f64) -> Figures {
    let items = (load * 2).max(4096);
    let cfg = Config::load(
        None,
        &[
            format!("runtime.shards={shards}"),
            "runtime.tick_ms=10".into(),
            "runtime.tick_budget_ms=10".into(),
            "admin.enabled=false".into(),
            "gateway.enabled=false".into(),
            format!("mesh.batch_items_max={items}"),
            format!("mesh.outbox_items_max={}", items * 4),
            format!("mesh.inbox_items_max={}", items * 8),
        ],
    )
    .expect("bench config");
    let handle = Runtime::start(&cfg, move |ctx| Blaster {
        ctx,
        load,
        mode,
        received: 0,
        checksum: 0,
        refused: 0,
    })
    .expect("start");
    let t0 = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(secs));
    handle.shutdown();
    let stats = handle.stats().to_vec();
    let apps = handle.join().expect("join");
    let elapsed = t0.elapsed().as_secs_f64();
    let received: u64 = apps.iter().map(|a| a.received).sum();
    let max_q = |h: Hist, q: f64| stats.iter().map(|s| s.quantile(h, q)).max().unwrap_or(0);
    Figures {
        msgs_per_s: received as f64 / elapsed,
        ns_per_msg: max_q(Hist::Tick, 0.5) as f64 * 1e3 / load as f64,
        tick_p50_us: max_q(Hist::Tick, 0.5),
        tick_p99_us: max_q(Hist::Tick, 0.99),
        flush_p99_us: max_q(Hist::Flush, 0.99),
        skipped: stats.iter().map(|s| s.count(Count::TicksSkipped)).sum(),
        queue_full: stats.iter().map(|s| s.count(Count::QueueFull)).sum(),
    }
}

fn median_spread(xs: &mut [f64]) -> (f64, f64, f64) {
    xs.sort_by(|a, b| a.total_cmp(b));
    (xs[xs.len() / 2], xs[0], xs[xs.len() - 1])
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn report(label: &str, runs: &[Figures]) {
    let col = |f: fn(&Figures) -> f64| median_spread(&mut runs.iter().map(f).collect::<Vec<_>>());
    let (m, lo, hi) = col(|f| f.msgs_per_s);
    let (p50, p50lo, p50hi) = col(|f| f.tick_p50_us as f64);
    let (p99, p99lo, p99hi) = col(|f| f.tick_p99_us as f64);
    let (fl, _, _) = col(|f| f.flush_p99_us as f64);
    let (ns, nslo, nshi) = col(|f| f.ns_per_msg);
    let skipped: u64 = runs.iter().map(|f| f.skipped).sum();
    let full: u64 = runs.iter().map(|f| f.queue_full).sum();
    println!(
        "{label:<24} {:>6.2} M msg/s ({:.2}..{:.2})  {ns:>5.1} ns/msg ({nslo:.1}..{nshi:.1})  tick p50 {:>6.0} us ({:.0}..{:.0})  p99 {:>6.0} us ({:.0}..{:.0})  flush p99 {:>5.0} us  skipped {skipped} full {full}",
        m / 1e6, lo / 1e6, hi / 1e6, p50, p50lo, p50hi, p99, p99lo, p99hi, fl
    );
}

fn mesh_part(secs: f64, repeats: usize) {
    let loads: Vec<u64> = std::env::var("MESH_BENCH_LOADS")
        .unwrap_or_else(|_| "1000,10000,100000".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    let mut cases: Vec<(u64, BodyMode)> = loads.iter().map(|&l| (l, BodyMode::Shared)).collect();
    cases.push((10_000, BodyMode::Encode));
    println!("# mesh: 10 ms ticks, load = envelopes per destination per tick; {repeats} repeats of {secs} s, median (min..max)");
    for (load, mode) in cases {
        let (mut one, mut two) = (Vec::new(), Vec::new());
        for _ in 0..repeats {
            one.push(run_case(1, load, mode, secs));
            two.push(run_case(2, load, mode, secs));
        }
        println!("load {load}/dest/tick, bodies {mode:?}:");
        report("  1 shard (to itself)", &one);
        report("  2 shards (cross-core)", &two);
        let med = |v: &[Figures], f: fn(&Figures) -> f64| {
            median_spread(&mut v.iter().map(f).collect::<Vec<_>>()).0
        };
        println!(
            "  2-shard/1-shard: msg/s x{:.2} (2.0 = linear), ns/msg x{:.2} (1.0 = crossing cores is free)",
            med(&two, |f| f.msgs_per_s) / med(&one, |f| f.msgs_per_s),
            med(&two, |f| f.ns_per_msg) / med(&one, |f| f.ns_per_msg)
        );
    }
}

/// Reads this thread's voluntary context switches (Linux).
fn voluntary_switches() -> u64 {
    std::fs::read_to_string("/proc/thread-self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("voluntary_ctxt_switches"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        })
        .unwrap_or(0)
}

/// Process CPU time (user + system), from /proc/self/stat, in seconds.
fn process_cpu_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    tessera_bench::stat_cpu_s(&stat, tessera_bench::clock_ticks_per_s()).unwrap_or(0.0)
}

/// Sender on CPU 0 ticks and try_sends one batch per tick; the receiver on
/// CPU 1 either drains per tick, or parks a task in `recv_async`.
fn wake_case(wake: bool, tick: Duration, secs: f64) -> (f64, f64, u64, f64) {
    use glommio::{LocalExecutorBuilder, Placement};
    let (tx, rx) = flume::bounded::<Vec<u64>>(64);
    let ticks = (secs / tick.as_secs_f64()) as u64;
    let cpu0 = process_cpu_s();
    let recv = LocalExecutorBuilder::new(Placement::Fixed(1))
        .spawn(move || async move {
            let sw0 = voluntary_switches();
            let buf: Rc<RefCell<Vec<Vec<u64>>>> = Rc::default();
            let ended = Rc::new(std::cell::Cell::new(false));
            let mut got = 0u64;
            if wake {
                let (rx, buf, ended) = (rx.clone(), buf.clone(), ended.clone());
                glommio::spawn_local(async move {
                    while let Ok(b) = rx.recv_async().await {
                        buf.borrow_mut().push(b);
                    }
                    ended.set(true);
                })
                .detach();
            }
            let start = Instant::now();
            for k in 1.. {
                // Until the sender is gone and everything is drained.
                let done = if wake {
                    ended.get()
                } else {
                    rx.is_disconnected()
                };
                if wake {
                    got += buf
                        .borrow_mut()
                        .drain(..)
                        .map(|b| b.len() as u64)
                        .sum::<u64>();
                } else {
                    got += rx.try_iter().map(|b| b.len() as u64).sum::<u64>();
                }
                if done {
                    break;
                }
                let next = start + tick * u32::try_from(k).unwrap_or(u32::MAX);
                glommio::timer::sleep(next.saturating_duration_since(Instant::now())).await;
            }
            (got, voluntary_switches() - sw0)
        })
        .expect("receiver");
    let send = LocalExecutorBuilder::new(Placement::Fixed(0))
        .spawn(move || async move {
            let mut h = hdrhistogram::Histogram::<u64>::new(2).expect("hist");
            let start = Instant::now();
            for k in 1..=ticks {
                let batch: Vec<u64> = (0..1000).collect();
                let t = Instant::now();
                tx.try_send(batch).expect("queue has room");
                h.record(t.elapsed().as_nanos() as u64).expect("record");
                let next = start + tick * u32::try_from(k).unwrap_or(u32::MAX);
                glommio::timer::sleep(next.saturating_duration_since(Instant::now())).await;
            }
            h
        })
        .expect("sender");
    let h = send.join().expect("sender joins");
    let (got, switches) = recv.join().expect("receiver joins");
    assert_eq!(got, ticks * 1000, "everything received");
    let cpu = process_cpu_s() - cpu0;
    (
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
        switches,
        cpu,
    )
}

fn wake_part(secs: f64) {
    println!("# mesh drain style: 1 batch of 1000 per tick, CPU0 -> CPU1, {secs} s per case");
    for tick_ms in [10u64, 1] {
        for wake in [false, true] {
            let (p50, p99, sw, cpu) = wake_case(wake, Duration::from_millis(tick_ms), secs);
            let style = if wake {
                "recv_async task (wake/batch)"
            } else {
                "try_recv drain per tick"
            };
            println!(
                "  tick {tick_ms:>2} ms  {style:<30} sender try_send p50 {p50:>6.2} us p99 {p99:>6.2} us  receiver voluntary switches {sw:>6}  process cpu {cpu:.2} s"
            );
        }
    }
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg").unwrap_or_default()
}

fn main() {
    let secs: f64 = env_or("MESH_BENCH_SECS", 2.0);
    let repeats: usize = env_or("MESH_BENCH_REPEATS", 3).max(1);
    println!("# loadavg at start: {}", loadavg().trim());
    mesh_part(secs, repeats);
    wake_part(secs);
    println!("# loadavg at end: {}", loadavg().trim());
}
