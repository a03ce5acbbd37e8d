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
//! - **gateway**: the real server (`EmbeddedServer`, one `CellHost` shard)
//!   with logged-in clients keeping Pings (answered by the gateway session)
//!   or Moves (proxy -> real -> InputAck, one ack per tick) in flight; the
//!   window is capped at 1000 (`gateway.inputs_in_flight_max`).
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
use tessera::core::geom::Vec3;
use tessera::core::time::Time;
use tessera::runtime::{Hist, Runtime};
use tessera::server::EmbeddedServer;
use tessera::shard::{ClientPort, ConnId, Count, Inbox, Outbox, ShardApp, ShardContext};
use tessera::wire::client::{
    kind as wire_kind, split_frame, ClientMsg, ServerMsg, HEADER_BYTES, PROTOCOL_VERSION,
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

/// One read with the client's timeout: `Some(0)` at EOF, `None` when the
/// timeout passed with nothing to read.
fn read_some(s: &mut TcpStream, buf: &mut [u8]) -> Option<usize> {
    match s.read(buf) {
        Ok(n) => Some(n),
        Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => None,
        Err(e) => panic!("client read: {e}"),
    }
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
        let n = match read_some(&mut s, &mut buf) {
            Some(0) => break,
            Some(n) => n,
            None => continue,
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
        return tessera_bench::stat_cpu_s(&stat, tessera_bench::clock_ticks_per_s()).unwrap_or(0.0);
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

/// What a gateway client keeps in flight: Pings (answered by the session
/// at the gateway) or Moves (routed through the proxy to the real, which
/// applies them and acks once per tick).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum GatewayMsg {
    Ping,
    Move,
}

/// Reads whole server frames from `pending`, returning (pongs, highest
/// acked seq) seen and leaving a partial frame in place.
fn scan_frames(pending: &mut Vec<u8>, pongs: &mut u64, acked: &mut u64) {
    let mut at = 0;
    while pending.len() - at >= HEADER_BYTES {
        let len = u32::from_le_bytes(pending[at..at + 4].try_into().expect("4")) as usize;
        let kind = u16::from_le_bytes(pending[at + 4..at + 6].try_into().expect("2"));
        if pending.len() - at < HEADER_BYTES + len {
            break;
        }
        let body = &pending[at + HEADER_BYTES..at + HEADER_BYTES + len];
        match kind {
            wire_kind::PONG => *pongs += 1,
            wire_kind::INPUT_ACK => {
                *acked = (*acked).max(u64::from_le_bytes(body[..8].try_into().expect("8")));
            }
            wire_kind::ERROR | wire_kind::KICK => panic!("gateway refused the bench client"),
            _ => {}
        }
        at += HEADER_BYTES + len;
    }
    pending.drain(..at);
}

/// One logged-in client keeping `window` Pings or Moves in flight; returns
/// the messages answered (Pongs, or Moves acknowledged) before `stop`.
fn gateway_client(addr: SocketAddr, load: Load, what: GatewayMsg, stop: Arc<AtomicBool>) -> u64 {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_nodelay(true).expect("nodelay");
    s.set_read_timeout(Some(Duration::from_millis(50)))
        .expect("timeout");
    let mut out = Vec::new();
    ClientMsg::Hello {
        version: PROTOCOL_VERSION,
    }
    .encode(&mut out);
    ClientMsg::Login {
        name: "bench",
        token: None,
    }
    .encode(&mut out);
    s.write_all(&out).expect("login");
    let (mut pending, mut buf) = (Vec::new(), vec![0; READ_BUF_BYTES]);
    let (mut pongs, mut acked, mut sent) = (0_u64, 0_u64, 0_u64);
    let mut pos = None;
    while pos.is_none() {
        let n = match read_some(&mut s, &mut buf) {
            Some(0) => panic!("closed before Welcome"),
            Some(n) => n,
            None => continue,
        };
        pending.extend_from_slice(&buf[..n]);
        // The spawn point is the world's center (`gateway.spawn=center`).
        if let Ok(Some((frame, _))) = split_frame(&pending, 1 << 20) {
            if let Ok(ServerMsg::Welcome(w)) = ServerMsg::decode(&frame) {
                let c = w.bounds.center();
                pos = Some(Vec3 {
                    x: c.x,
                    y: 0.0,
                    z: c.z,
                });
            }
        }
        scan_frames(&mut pending, &mut pongs, &mut acked);
    }
    let pos = pos.expect("welcomed");
    let mut top_up = |s: &mut TcpStream, answered: u64, sent: &mut u64| {
        out.clear();
        while *sent < answered + load.window as u64 {
            *sent += 1;
            let msg = match what {
                GatewayMsg::Ping => ClientMsg::Ping {
                    nonce: *sent,
                    client_time_us: 0,
                },
                GatewayMsg::Move => ClientMsg::Move {
                    seq: *sent,
                    client_time_us: 0,
                    pos,
                    yaw: 0.0,
                },
            };
            msg.encode(&mut out);
        }
        s.write_all(&out).expect("write");
    };
    top_up(&mut s, 0, &mut sent);
    while !stop.load(Ordering::Relaxed) {
        let n = match read_some(&mut s, &mut buf) {
            Some(0) => break,
            Some(n) => n,
            None => continue,
        };
        pending.extend_from_slice(&buf[..n]);
        scan_frames(&mut pending, &mut pongs, &mut acked);
        let answered = if what == GatewayMsg::Ping {
            pongs
        } else {
            acked
        };
        top_up(&mut s, answered, &mut sent);
    }
    if what == GatewayMsg::Ping {
        pongs
    } else {
        acked
    }
}

/// The real server (a `CellHost` on one shard behind the gateway): Pings or
/// Moves from logged-in clients.
fn gateway_case(load: Load, tick_ms: u64, what: GatewayMsg) -> PortFigures {
    let sets = [
        "runtime.shards=1".to_owned(),
        "runtime.pin=false".to_owned(),
        format!("runtime.tick_ms={tick_ms}"),
        format!("runtime.tick_budget_ms={tick_ms}"),
        "admin.enabled=false".to_owned(),
        "gateway.listen_addr=\"127.0.0.1:0\"".to_owned(),
        "gateway.spawn=\"center\"".to_owned(),
        format!("gateway.read_batch_bytes={READ_BUF_BYTES}"),
    ];
    let config = Config::load(None, &sets).expect("bench config");
    let server = EmbeddedServer::start(&config).expect("start");
    let addr = server.client_addr();
    let stop = Arc::new(AtomicBool::new(false));
    let cpu0 = thread_cpu_s("shard-0");
    let t0 = Instant::now();
    let threads: Vec<_> = (0..load.clients)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || gateway_client(addr, load, what, stop))
        })
        .collect();
    std::thread::sleep(Duration::from_secs_f64(load.secs));
    stop.store(true, Ordering::Relaxed);
    let elapsed = t0.elapsed().as_secs_f64();
    let cpu = thread_cpu_s("shard-0") - cpu0;
    let total: u64 = threads.into_iter().map(|t| t.join().expect("client")).sum();
    let counters = server.stop().expect("stop");
    PortFigures {
        echo: Figures {
            msgs_per_s: total as f64 / elapsed,
            server_ns_per_msg: cpu * 1e9 / total.max(1) as f64,
        },
        tick_p50_us: counters.tick_p50_us.first().copied().unwrap_or(0),
        tick_p99_us: counters.tick_p99_us.first().copied().unwrap_or(0),
        stalls: counters.stalls,
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
        // The gateway session bounds unacknowledged inputs
        // (`gateway.inputs_in_flight_max`, 1024 by default).
        let gw_load = Load {
            window: load.window.min(1000),
            ..load
        };
        for (what, label) in [
            (GatewayMsg::Ping, "Ping->Pong"),
            (GatewayMsg::Move, "Move->ack"),
        ] {
            let g = gateway_case(gw_load, tick_ms, what);
            println!(
                "  gateway {label:<12} {:>12.0} msg/s  server CPU {:>7.1} ns/msg  (window {}; tick p50 {} us p99 {} us, stalls {}); vs plain x{:.3}",
                g.echo.msgs_per_s,
                g.echo.server_ns_per_msg,
                gw_load.window,
                g.tick_p50_us,
                g.tick_p99_us,
                g.stalls,
                g.echo.msgs_per_s / plain.msgs_per_s
            );
        }
    }
}
