//! The runtime end to end: real glommio shards (more than this machine's
//! CPUs), the mesh, back-pressure, the stall alarm, /metrics and shutdown.
//!
//! The test application numbers the messages it sends to every destination
//! (including itself, if asked) and records what it receives per source; after
//! `join()` each ordered pair's received list must be exactly `0..sent`.

use rkyv::{Archive, Serialize};
use std::io::{Read, Write};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};
use tessera::config::Config;
use tessera::core::ids::ShardId;
use tessera::core::time::Time;
use tessera::runtime::{Runtime, RuntimeHandle};
use tessera::shard::{ClientPort, Count, Inbox, Outbox, SendError, ShardApp, ShardContext};
use tessera::wire::Body;

const KIND: u16 = 7;

#[derive(Archive, Serialize)]
struct Numbered {
    from: u16,
    n: u64,
}

#[derive(Clone, Debug, Default)]
struct Plan {
    per_dest_per_tick: u64,
    to_self: bool,
    /// Read at most this many envelopes per tick (None: all).
    read_per_tick: Option<usize>,
    /// Sleep this long on this tick (shard 0 only).
    sleep_at: Option<(u64, Duration)>,
    /// Panic on this shard at this tick.
    panic_at: Option<(u16, u64)>,
}

#[derive(Debug)]
struct Chatter {
    ctx: ShardContext,
    plan: Plan,
    ticks: u64,
    /// Next number to send, per destination index.
    next: Vec<u64>,
    /// Numbers received, per source index.
    received: Vec<Vec<u64>>,
    refused: u64,
    last_now: Time,
}

impl Chatter {
    fn new(ctx: ShardContext, plan: Plan) -> Chatter {
        let n = usize::from(ctx.shards);
        Chatter {
            ctx,
            plan,
            ticks: 0,
            next: vec![0; n],
            received: vec![Vec::new(); n],
            refused: 0,
            last_now: Time::ZERO,
        }
    }

    fn take(&mut self, inbox: Inbox<'_>, limit: Option<usize>) {
        for env in inbox.take(limit.unwrap_or(usize::MAX)) {
            assert_eq!(env.header().dest, self.ctx.shard);
            let m = env.access::<Numbered>(KIND).expect("local body");
            assert_eq!(u16::from(m.from), env.source().index);
            self.received[usize::from(env.source().index)].push(m.n.to_native());
        }
    }
}

impl ShardApp for Chatter {
    fn on_tick(&mut self, now: Time, inbox: Inbox<'_>, out: &mut Outbox, _port: &mut ClientPort) {
        assert!(now >= self.last_now, "time goes forward");
        self.last_now = now;
        self.ticks += 1;
        if self.plan.panic_at == Some((self.ctx.shard.index, self.ticks)) {
            // Before reading: what was sent to this shard is lost with it.
            panic!("test app crashes on purpose");
        }
        self.take(inbox, self.plan.read_per_tick);
        if let Some((tick, pause)) = self.plan.sleep_at {
            if self.ctx.shard.index == 0 && self.ticks == tick {
                std::thread::sleep(pause);
            }
        }
        let me = self.ctx.shard;
        let dests: Vec<ShardId> = self.ctx.all_shards().collect();
        for dest in dests {
            if dest == me && !self.plan.to_self {
                continue;
            }
            let d = usize::from(dest.index);
            for _ in 0..self.plan.per_dest_per_tick {
                let msg = Numbered {
                    from: me.index,
                    n: self.next[d],
                };
                match out.send(dest, KIND, Body::encode(&msg).expect("encode")) {
                    Ok(()) => self.next[d] += 1,
                    Err(SendError::Full { .. }) => {
                        self.refused += 1;
                        break;
                    }
                    Err(e) => panic!("{e}"),
                }
            }
        }
    }

    fn on_stop(&mut self, _now: Time, inbox: Inbox<'_>) {
        self.take(inbox, None);
    }
}

fn config(overrides: &[&str]) -> Config {
    let mut all: Vec<String> = vec![
        "runtime.tick_ms=10".into(),
        "runtime.tick_budget_ms=10".into(),
        "runtime.metrics_publish_ticks=5".into(),
        "admin.listen_addr=127.0.0.1:0".into(),
        "gateway.enabled=false".into(),
    ];
    all.extend(overrides.iter().map(|s| (*s).to_owned()));
    Config::load(None, &all).expect("valid test config")
}

fn start(config: &Config, plan: Plan) -> RuntimeHandle<Chatter> {
    capture_logs();
    Runtime::start(config, move |ctx| Chatter::new(ctx, plan.clone())).expect("runtime starts")
}

/// Every ordered pair: received exactly 0..sent, in order.
fn assert_fifo_and_complete(apps: &[Chatter]) -> u64 {
    let mut total = 0;
    for (s, src) in apps.iter().enumerate() {
        for (d, dst) in apps.iter().enumerate() {
            let sent = src.next[d];
            let got = &dst.received[s];
            assert_eq!(got.len() as u64, sent, "pair {s}->{d}: count");
            assert!(
                got.iter().copied().eq(0..sent),
                "pair {s}->{d}: not FIFO / gaps"
            );
            total += sent;
        }
    }
    total
}

fn run_for(handle: &RuntimeHandle<Chatter>, d: Duration) {
    std::thread::sleep(d);
    handle.shutdown();
}

#[test]
fn four_shards_on_two_cpus_keep_fifo_and_batch_per_tick() {
    let cfg = config(&["runtime.shards=4", "mesh.batch_queue_depth=256"]);
    let plan = Plan {
        per_dest_per_tick: 20,
        ..Plan::default()
    };
    let handle = start(&cfg, plan);
    assert_eq!(handle.shards(), 4);
    run_for(&handle, Duration::from_millis(600));
    let stats: Vec<_> = handle.stats().to_vec();
    let t = Instant::now();
    let apps = handle.join().expect("clean join");
    assert!(t.elapsed() < Duration::from_secs(3), "shutdown is prompt");
    let total = assert_fifo_and_complete(&apps);
    assert!(total > 1000, "traffic flowed: {total}");
    for (s, app) in stats.iter().zip(&apps) {
        assert_eq!(s.count(Count::QueueFull), 0, "deep queues never fill");
        assert_eq!(s.count(Count::Ticks), app.ticks);
        // One batch per destination per tick: 3 destinations.
        assert_eq!(
            s.count(Count::BatchesSent),
            3 * app.ticks,
            "{:?}",
            s.shard()
        );
        assert_eq!(s.count(Count::MessagesSent), 3 * 20 * app.ticks);
        assert_eq!(s.count(Count::DroppedAtShutdown), 0);
    }
    let sent: u64 = stats.iter().map(|s| s.count(Count::MessagesSent)).sum();
    let recv: u64 = stats.iter().map(|s| s.count(Count::MessagesReceived)).sum();
    assert_eq!(sent, recv);
    assert_eq!(sent, total);
}

#[test]
fn one_shard_sends_to_itself() {
    let cfg = config(&["runtime.shards=1"]);
    let plan = Plan {
        per_dest_per_tick: 5,
        to_self: true,
        ..Plan::default()
    };
    let handle = start(&cfg, plan);
    run_for(&handle, Duration::from_millis(200));
    let apps = handle.join().expect("clean join");
    assert!(assert_fifo_and_complete(&apps) >= 5);
}

#[test]
fn tiny_queues_push_back_without_losing_anything() {
    let cfg = config(&[
        "runtime.shards=3",
        "mesh.batch_queue_depth=1",
        "mesh.batch_items_max=4",
        "mesh.outbox_items_max=8",
        "mesh.inbox_items_max=4",
    ]);
    let plan = Plan {
        per_dest_per_tick: 6,
        read_per_tick: Some(2),
        ..Plan::default()
    };
    let handle = start(&cfg, plan);
    run_for(&handle, Duration::from_millis(400));
    let stats: Vec<_> = handle.stats().to_vec();
    let apps = handle.join().expect("clean join");
    assert_fifo_and_complete(&apps);
    let sum = |c| stats.iter().map(|s| s.count(c)).sum::<u64>();
    assert!(sum(Count::QueueFull) > 0, "full queues are counted");
    assert!(sum(Count::InboxFullTicks) > 0, "slow readers stop draining");
    let refused: u64 = apps.iter().map(|a| a.refused).sum();
    assert!(refused > 0, "the app was told to slow down");
    assert_eq!(sum(Count::OutboxRefused), refused);
    assert_eq!(sum(Count::DroppedAtShutdown), 0);
    assert_eq!(sum(Count::MessagesSent), sum(Count::MessagesReceived));
}

#[test]
fn stall_alarm_names_the_phase() {
    let cfg = config(&["runtime.shards=2", "runtime.tick_budget_ms=5"]);
    let plan = Plan {
        per_dest_per_tick: 1,
        sleep_at: Some((3, Duration::from_millis(40))),
        ..Plan::default()
    };
    let handle = start(&cfg, plan);
    run_for(&handle, Duration::from_millis(300));
    let stats: Vec<_> = handle.stats().to_vec();
    let apps = handle.join().expect("clean join");
    assert_fifo_and_complete(&apps);
    assert!(stats[0].count(Count::Stalls) >= 1, "stall counted");
    assert!(
        stats[0].count(Count::TicksSkipped) >= 1,
        "missed deadlines skipped"
    );
    let logs =
        String::from_utf8_lossy(&LOGS.get().expect("installed").lock().unwrap()).into_owned();
    let line = logs
        .lines()
        .find(|l| l.contains("stall") && l.contains("shard=n0/0"))
        .unwrap_or_else(|| panic!("no stall log in:\n{logs}"));
    assert!(line.contains("phase=\"app\""), "{line}");
}

#[test]
fn a_crashing_shard_stops_the_runtime_and_losses_are_counted() {
    let cfg = config(&["runtime.shards=3"]);
    let plan = Plan {
        per_dest_per_tick: 4,
        panic_at: Some((1, 5)),
        ..Plan::default()
    };
    let handle = start(&cfg, plan);
    let t = Instant::now();
    while !handle.is_stopping() {
        assert!(
            t.elapsed() < Duration::from_secs(5),
            "crash stops the runtime"
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let stats: Vec<_> = handle.stats().to_vec();
    match handle.join() {
        Err(tessera::runtime::RuntimeError::ShardFailed { shard, .. }) => {
            assert_eq!(shard, ShardId::local(1));
        }
        other => panic!("expected ShardFailed, got {:?}", other.map(|a| a.len())),
    }
    // What was sent to shard 1 and never read is counted, not silent: held
    // in its inbox, queued for it, or dropped by a sender after the crash.
    let sum = |c| stats.iter().map(|s| s.count(c)).sum::<u64>();
    let lost = sum(Count::DroppedDisconnected);
    assert!(
        lost > 0,
        "messages to the dead shard are counted as dropped"
    );
    let unreceived = sum(Count::MessagesSent) - sum(Count::MessagesReceived);
    assert!(
        unreceived <= lost,
        "{unreceived} never drained, {lost} counted"
    );
}

fn http_get(addr: std::net::SocketAddr, path: &str) -> String {
    let mut s = std::net::TcpStream::connect(addr).expect("connect admin");
    write!(s, "GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").expect("write");
    let mut text = String::new();
    s.read_to_string(&mut text).expect("read");
    text
}

#[test]
fn metrics_are_served_and_shutdown_by_signal_is_clean() {
    let cfg = config(&["runtime.shards=3"]);
    let plan = Plan {
        per_dest_per_tick: 3,
        ..Plan::default()
    };
    let mut handle = start(&cfg, plan);
    let addr = handle.admin_addr().expect("admin enabled");
    std::thread::sleep(Duration::from_millis(250));
    let text = http_get(addr, "/metrics");
    assert!(text.starts_with("HTTP/1.1 200 OK"), "{text}");
    for name in [
        "tessera_shard_ticks_total{shard=\"2\"}",
        "tessera_shard_messages_sent_total",
        "tessera_shard_batches_received_total",
        "tessera_shard_queue_full_total",
        "tessera_shard_stalls_total",
        "tessera_shard_outbox_held",
        "tessera_shard_outbound_queued_batches",
        "tessera_tick_phase_seconds_bucket{le=",
        "tessera_tick_phase_seconds_count{phase=\"flush\"}",
        "tessera_tick_phase_quantile_seconds{shard=\"1\",phase=\"app\",quantile=\"0.99\"}",
        "tessera_mesh_inbound_queued_batches_count",
        "# EOF",
    ] {
        assert!(text.contains(name), "missing {name}");
    }
    assert!(http_get(addr, "/nope").starts_with("HTTP/1.1 404"));
    handle.stop_on_signals().expect("handlers");
    signal_hook::low_level::raise(signal_hook::consts::SIGTERM).expect("raise");
    let t = Instant::now();
    while !handle.is_stopping() {
        assert!(t.elapsed() < Duration::from_secs(2), "signal seen");
        std::thread::sleep(Duration::from_millis(5));
    }
    let apps = handle.join().expect("clean join");
    assert_fifo_and_complete(&apps);
    assert!(
        std::net::TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err(),
        "admin port closed after join"
    );
}

static LOGS: OnceLock<Arc<Mutex<Vec<u8>>>> = OnceLock::new();

/// Installs (once per test binary) a tracing subscriber writing to [`LOGS`].
fn capture_logs() {
    LOGS.get_or_init(|| {
        let buf = Arc::new(Mutex::new(Vec::new()));
        let writer = buf.clone();
        tracing_subscriber::fmt()
            .with_ansi(false)
            .with_writer(move || LogWriter(writer.clone()))
            .try_init()
            .expect("first subscriber");
        buf
    });
}

struct LogWriter(Arc<Mutex<Vec<u8>>>);

impl Write for LogWriter {
    fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(b);
        Ok(b.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}
