//! Gateway benchmark: echo messages per second through the runtime's
//! `ClientPort`, next to a plain TCP echo written directly on glommio, in one
//! run with the same clients and message size.
//!
//! `cargo bench -p tessera-bench --bench gateway` (env:
//! `GATEWAY_BENCH_SECS` per case, default 2.5; `GATEWAY_BENCH_CLIENTS`,
//! default 4; `GATEWAY_BENCH_MSG_BYTES`, default 32;
//! `GATEWAY_BENCH_WINDOWS`, messages each client keeps in flight, default
//! `1,1024,8192`; `GATEWAY_BENCH_TICK_MS`, the runtime's tick, default 5).
//!
//! - **plain**: one glommio executor, a listener, one task per connection
//!   doing `read` then `write_all` of what it read (no framing, no bounds).
//! - **port**: the real runtime with one shard (`Runtime::start`, the
//!   gateway on an ephemeral port) and an echo `ShardApp` that, every tick,
//!   copies each readable connection's input into its send queue. Bytes wait
//!   for the next tick in both directions, so with a window of 1 the port
//!   case is bound by the tick rate (clients x 1000 / tick_ms msg/s) by
//!   design; with a large window it measures the port's throughput.
//!
//! Each client is a std thread that writes `window` messages, then writes
//! one message for each one echoed back (a closed loop with a constant
//! window). Cases alternate plain and port so both see the same noise.

use futures_lite::io::{AsyncReadExt, AsyncWriteExt};
use std::io::{ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tessera::config::Config;
use tessera::core::time::Time;
use tessera::runtime::{
    ClientPort, ConnId, Count, Hist, Inbox, Outbox, Runtime, ShardApp, ShardContext,
};

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

const READ_BUF_BYTES: usize = 64 * 1024;

#[derive(Clone, Copy, Debug)]
struct Load {
    clients: usize,
    msg_bytes: usize,
    window: usize,
    secs: f64,
}

/// One client: a closed loop keeping `window` messages in flight; returns
/// the messages echoed back before `stop`.
fn client(addr: SocketAddr, load: Load, stop: Arc<AtomicBool>) -> u64 {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let batch = vec![b'm'; load.msg_bytes * load.window];
    s.write_all(&batch).expect("first window");
    let mut buf = vec![0; READ_BUF_BYTES];
    let (mut partial, mut done) = (0_usize, 0_u64);
    while !stop.load(Ordering::Relaxed) {
        let n = match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => continue,
            Err(e) => panic!("client read: {e}"),
        };
        debug_assert!(buf[..n].iter().all(|&b| b == b'm'));
        partial += n;
        let msgs = partial / load.msg_bytes;
        partial %= load.msg_bytes;
        done += msgs as u64;
        if msgs > 0 {
            s.write_all(&batch[..msgs * load.msg_bytes]).expect("write");
        }
    }
    done
}

/// CPU seconds (user + system) of this process's thread named `name`
/// (glommio names an executor's thread `<name>-<id>`).
fn thread_cpu_s(name: &str) -> f64 {
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return 0.0;
    };
    for task in tasks.flatten() {
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if !comm.trim().starts_with(&format!("{name}-")) {
            continue;
        }
        let stat = std::fs::read_to_string(task.path().join("stat")).unwrap_or_default();
        let after = stat.rsplit(')').next().unwrap_or("");
        let f: Vec<u64> = after
            .split_whitespace()
            .map(|x| x.parse().unwrap_or(0))
            .collect();
        // utime, stime: fields 14 and 15, i.e. 11 and 12 after the comm.
        return (f.get(11).copied().unwrap_or(0) + f.get(12).copied().unwrap_or(0)) as f64 / 100.0;
    }
    0.0
}

/// What one case measured.
struct Figures {
    msgs_per_s: f64,
    /// Server thread CPU per echoed message, ns.
    server_ns_per_msg: f64,
}

/// Runs the clients against `addr` for `load.secs`, measuring the thread
/// named `server` too.
fn drive(addr: SocketAddr, load: Load, server: &str) -> Figures {
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = thread_cpu_s(server);
    let t0 = Instant::now();
    let threads: Vec<_> = (0..load.clients)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || client(addr, load, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(load.secs));
    stop.store(true, Ordering::Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu_s(server) - cpu0;
    let total: u64 = threads.into_iter().map(|t| t.join().expect("client")).sum();
    Figures {
        msgs_per_s: total as f64 / elapsed,
        server_ns_per_msg: cpu * 1e9 / total.max(1) as f64,
    }
}

/// The baseline: a plain glommio echo server on one executor.
fn plain_case(load: Load) -> Figures {
    use glommio::net::TcpListener;
    use glommio::{LocalExecutorBuilder, Placement};
    let (addr_tx, addr_rx) = std::sync::mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let server_stop = stop.clone();
    let server = LocalExecutorBuilder::new(Placement::Unbound)
        .name("plain-echo")
        .spawn(move || async move {
            let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
            addr_tx
                .send(listener.local_addr().expect("addr"))
                .expect("send");
            let accept = glommio::spawn_local(async move {
                loop {
                    let Ok(mut s) = listener.accept().await else {
                        continue;
                    };
                    s.set_nodelay(true).expect("nodelay");
                    glommio::spawn_local(async move {
                        let mut buf = vec![0; READ_BUF_BYTES];
                        while let Ok(n) = s.read(&mut buf).await {
                            if n == 0 || s.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    })
                    .detach();
                }
            });
            while !server_stop.load(Ordering::Relaxed) {
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            drop(accept);
        })
        .expect("executor");
    let addr = addr_rx.recv().expect("bound");
    let figures = drive(addr, load, "plain-echo");
    stop.store(true, Ordering::Relaxed);
    server.join().expect("server");
    figures
}

/// Echo through the port: every tick, each readable connection's input is
/// queued back to it.
#[derive(Debug, Default)]
struct EchoApp {
    ready: Vec<ConnId>,
    buf: Vec<u8>,
    refused: u64,
}

impl ShardApp for EchoApp {
    fn on_tick(&mut self, _now: Time, _in: Inbox<'_>, _out: &mut Outbox, port: &mut ClientPort) {
        while port.poll_event().is_some() {}
        self.ready.clear();
        self.ready.extend(port.readable());
        for &conn in &self.ready {
            self.buf.clear();
            self.buf.extend_from_slice(port.input(conn));
            match port.send(conn, &self.buf) {
                Ok(()) => port.consume(conn, self.buf.len()),
                Err(_) => self.refused += 1,
            }
        }
    }
}

struct PortFigures {
    echo: Figures,
    tick_p50_us: u64,
    tick_p99_us: u64,
    stalls: u64,
}

fn port_case(load: Load, tick_ms: u64) -> PortFigures {
    let sets = [
        "runtime.shards=1".to_owned(),
        "runtime.pin=false".to_owned(),
        format!("runtime.tick_ms={tick_ms}"),
        format!("runtime.tick_budget_ms={tick_ms}"),
        "admin.enabled=false".to_owned(),
        "gateway.listen_addr=127.0.0.1:0".to_owned(),
        format!("gateway.read_batch_bytes={READ_BUF_BYTES}"),
    ];
    let config = Config::load(None, &sets).expect("bench config");
    let handle = Runtime::start(&config, |_: ShardContext| EchoApp::default()).expect("start");
    let addr = handle.client_addr().expect("gateway on");
    let echo = drive(addr, load, "shard-0");
    handle.shutdown();
    let stats = handle.stats().to_vec();
    let apps = handle.join().expect("join");
    assert_eq!(apps[0].refused, 0, "send queues overflowed");
    PortFigures {
        echo,
        tick_p50_us: stats[0].quantile(Hist::Tick, 0.5),
        tick_p99_us: stats[0].quantile(Hist::Tick, 0.99),
        stalls: stats[0].count(Count::Stalls),
    }
}

fn env_or<T: std::str::FromStr>(key: &str, default: T) -> T {
    std::env::var(key)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn main() {
    let secs: f64 = env_or("GATEWAY_BENCH_SECS", 2.5);
    let clients: usize = env_or("GATEWAY_BENCH_CLIENTS", 4);
    let msg_bytes: usize = env_or("GATEWAY_BENCH_MSG_BYTES", 32);
    let tick_ms: u64 = env_or("GATEWAY_BENCH_TICK_MS", 5);
    let windows: Vec<usize> = std::env::var("GATEWAY_BENCH_WINDOWS")
        .unwrap_or_else(|_| "1,1024,8192".into())
        .split(',')
        .filter_map(|s| s.trim().parse().ok())
        .collect();
    println!(
        "# gateway echo: {clients} clients, {msg_bytes}-byte messages, {secs} s per case, \
         port tick {tick_ms} ms, 1 executor/shard on this machine's shared cores"
    );
    for window in windows {
        let load = Load {
            clients,
            msg_bytes,
            window: window.max(1),
            secs,
        };
        let plain = plain_case(load);
        let port = port_case(load, tick_ms);
        let tick_bound = (clients * load.window) as f64 * 1000.0 / tick_ms as f64;
        println!("window {window} msg/client in flight:");
        println!(
            "  plain glommio echo   {:>12.0} msg/s  server CPU {:>7.1} ns/msg",
            plain.msgs_per_s, plain.server_ns_per_msg
        );
        println!(
            "  runtime ClientPort   {:>12.0} msg/s  server CPU {:>7.1} ns/msg  (tick bound {:.0}; tick p50 {} us p99 {} us, stalls {})",
            port.echo.msgs_per_s,
            port.echo.server_ns_per_msg,
            tick_bound,
            port.tick_p50_us,
            port.tick_p99_us,
            port.stalls
        );
        println!(
            "  port/plain           msg/s x{:.3}, server CPU per msg x{:.2}",
            port.echo.msgs_per_s / plain.msgs_per_s,
            port.echo.server_ns_per_msg / plain.server_ns_per_msg
        );
    }
}
