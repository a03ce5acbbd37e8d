//! The runtime's client port end to end over loopback: real glommio shards
//! listening on one ephemeral port (SO_REUSEPORT), std TCP clients, and an
//! echo application that only ever sees bytes through its `ClientPort`.
//!
//! Checked: echo on every shard, a client that never reads is cut off as a
//! slow reader while another keeps being served, `connections_max`
//! refusal, peer close reaching the app as Closed{PeerClosed}, a
//! connection handed to the other shard with its unread bytes (and one
//! handed nowhere, closed and counted), and a shutdown that writes the
//! app's goodbye, closes every socket and joins.

use std::collections::BTreeSet;
use std::io::{ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tessera::config::Config;
use tessera::core::time::Time;
use tessera::runtime::{Runtime, RuntimeHandle, ShardStats};
use tessera::shard::{
    ClientPort, CloseReason, ConnId, Count, Inbox, Outbox, PortError, PortEvent, ShardApp,
    ShardContext,
};

/// A byte that turns a connection into a flood target: the app then sends
/// it `FLOOD_PER_TICK` bytes every tick (under the 64 KiB send queue bound
/// of the test config), whatever the client does.
const FLOOD: u8 = b'F';
const FLOOD_PER_TICK: usize = 48 * 1024;
/// A byte that makes the app echo the input, then close the connection.
const QUIT: u8 = b'Q';
/// A byte that makes the app echo the input one byte per `send`.
const SPLIT: u8 = b'S';
/// A byte that makes the app stop consuming a connection's input for good.
const HOLD: u8 = b'H';
/// A byte that makes the app hand the connection to the next shard (what
/// follows it is read there), which answers `A`, the source shard and
/// itself, then echoes as usual.
const MOVE: u8 = b'M';
/// A byte that makes the app hand the connection to a shard that does not
/// exist (the socket is closed, counted).
const NOWHERE: u8 = b'N';
const CHUNK: [u8; 16 * 1024] = [b'x'; 16 * 1024];
const GOODBYE: &[u8] = b"bye\n";
const IO_TIMEOUT: Duration = Duration::from_secs(10);

/// The tests of this file run one at a time: one measures the process's CPU
/// time, which the others would inflate.
static SERIAL: Mutex<()> = Mutex::new(());

fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|p| p.into_inner())
}

#[derive(Debug, Default)]
struct Echo {
    shard: u16,
    shards: u16,
    open: BTreeSet<ConnId>,
    flooding: BTreeSet<ConnId>,
    holding: BTreeSet<ConnId>,
    closed: Vec<(ConnId, CloseReason)>,
    queue_full: u64,
}

impl Echo {
    fn events(&mut self, port: &mut ClientPort) {
        while let Some(ev) = port.poll_event() {
            match ev {
                PortEvent::Opened { conn, .. } => {
                    self.open.insert(conn);
                }
                PortEvent::Adopted { conn, note, .. } => {
                    self.open.insert(conn);
                    let from = note.first().copied().unwrap_or(u8::MAX);
                    self.send(port, conn, &[b'A', from, self.shard as u8]);
                }
                PortEvent::Closed { conn, reason } => {
                    self.open.remove(&conn);
                    self.flooding.remove(&conn);
                    self.holding.remove(&conn);
                    self.closed.push((conn, reason));
                }
            }
        }
    }

    fn send(&mut self, port: &mut ClientPort, conn: ConnId, bytes: &[u8]) -> bool {
        match port.send(conn, bytes) {
            Ok(()) => true,
            Err(PortError::SendQueueFull { .. }) => {
                self.queue_full += 1;
                false
            }
            Err(PortError::Unknown(_)) => false,
        }
    }
}

impl ShardApp for Echo {
    fn on_tick(&mut self, _now: Time, _inbox: Inbox<'_>, _out: &mut Outbox, port: &mut ClientPort) {
        self.events(port);
        let readable: Vec<ConnId> = port.readable().collect();
        for conn in readable {
            if self.holding.contains(&conn) {
                continue;
            }
            let input = port.input(conn).to_vec();
            if let Some(at) = input.iter().position(|&b| b == MOVE || b == NOWHERE) {
                port.consume(conn, at + 1);
                let to = match input[at] {
                    MOVE => (self.shard + 1) % self.shards,
                    _ => self.shards,
                };
                port.hand_off(conn, to, vec![self.shard as u8])
                    .expect("open");
                self.open.remove(&conn);
                continue;
            }
            if input.contains(&HOLD) {
                self.holding.insert(conn);
                continue;
            }
            if input.contains(&FLOOD) {
                self.flooding.insert(conn);
            }
            let sent = if input.contains(&SPLIT) {
                input.chunks(1).all(|b| self.send(port, conn, b))
            } else {
                self.send(port, conn, &input)
            };
            if sent {
                port.consume(conn, input.len());
            }
            if input.contains(&QUIT) {
                port.close(conn);
                assert_eq!(port.send(conn, b"late"), Err(PortError::Unknown(conn)));
            }
        }
        let flooding: Vec<ConnId> = self.flooding.iter().copied().collect();
        for conn in flooding {
            for _ in 0..FLOOD_PER_TICK / CHUNK.len() {
                if !self.send(port, conn, &CHUNK) {
                    break;
                }
            }
        }
    }

    fn on_shutdown(&mut self, _now: Time, port: &mut ClientPort) {
        self.events(port);
        let open: Vec<ConnId> = self.open.iter().copied().collect();
        for conn in open {
            self.send(port, conn, GOODBYE);
        }
    }
}

fn config(backend: &str, shards: u16, extra: &[&str]) -> Config {
    let mut all: Vec<String> = vec![
        format!("gateway.io_backend=\"{backend}\""),
        format!("runtime.shards={shards}"),
        "runtime.pin=false".into(),
        "runtime.tick_ms=10".into(),
        "runtime.tick_budget_ms=10".into(),
        "admin.enabled=false".into(),
        "gateway.listen_addr=127.0.0.1:0".into(),
        "gateway.send_queue_bytes_max=65536".into(),
        "gateway.linger_ms=500".into(),
    ];
    all.extend(extra.iter().map(|s| (*s).to_owned()));
    Config::load(None, &all).expect("valid test config")
}

fn start(config: &Config) -> (RuntimeHandle<Echo>, SocketAddr) {
    let handle = Runtime::start(config, |ctx: ShardContext| Echo {
        shard: ctx.shard.index,
        shards: ctx.shards,
        ..Echo::default()
    })
    .expect("starts");
    let addr = handle.client_addr().expect("gateway enabled");
    assert_ne!(addr.port(), 0, "the resolved port is published");
    (handle, addr)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s.set_write_timeout(Some(IO_TIMEOUT)).expect("timeout");
    s
}

fn echo_round(s: &mut TcpStream, msg: &[u8]) {
    s.write_all(msg).expect("write");
    let mut back = vec![0; msg.len()];
    s.read_exact(&mut back).expect("echo comes back");
    assert_eq!(back, msg);
}

/// Polls `cond` until it holds (or panics after `IO_TIMEOUT`).
fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
    let t0 = Instant::now();
    while !cond() {
        assert!(t0.elapsed() < IO_TIMEOUT, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(5));
    }
}

fn total(stats: &[Arc<ShardStats>], c: Count) -> u64 {
    stats.iter().map(|s| s.count(c)).sum()
}

/// Reads until EOF (or a reset); returns what was read.
fn read_to_close(s: &mut TcpStream) -> Vec<u8> {
    let mut all = Vec::new();
    let mut buf = [0; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return all,
            Ok(n) => all.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::ConnectionReset => return all,
            // A read with SO_RCVTIMEO is not restarted after a signal.
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("read failed: {e}"),
        }
    }
}

fn echo_on_both_shards_then_shutdown_says_goodbye_and_closes(backend: &str) {
    let _serial = serial();
    let (handle, addr) = start(&config(backend, 2, &[]));
    let stats = handle.stats().to_vec();
    let mut clients: Vec<TcpStream> = (0..32).map(|_| connect(addr)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        echo_round(c, format!("hello {i}\n").as_bytes());
    }
    // Pipelined writes, then the echo of all of them.
    for (i, c) in clients.iter_mut().enumerate().take(4) {
        let msg: Vec<u8> = (0..20_000_usize)
            .map(|k| b'a' + ((k + i) % 26) as u8)
            .collect();
        c.write_all(&msg).expect("write");
        let mut back = vec![0; msg.len()];
        c.read_exact(&mut back).expect("echo");
        assert_eq!(back, msg);
    }
    eventually("connections counted", || {
        total(&stats, Count::ClientOpened) == 32
    });
    let per_shard: Vec<u64> = stats.iter().map(|s| s.count(Count::ClientOpened)).collect();
    // The kernel hashes connections over the two listeners: with 32 of
    // them, both shards get some (all on one: probability 2^-31).
    assert!(per_shard.iter().all(|&n| n > 0), "{per_shard:?}");
    handle.shutdown();
    for mut c in clients {
        assert_eq!(read_to_close(&mut c), GOODBYE, "goodbye, then a clean EOF");
    }
    let apps = handle.join().expect("clean join");
    assert_eq!(apps.len(), 2);
    assert_eq!(total(&stats, Count::ClientClosedShutdown), 32);
    assert_eq!(total(&stats, Count::ClientClosedPeer), 0);
    let bytes_in = total(&stats, Count::ClientBytesIn);
    assert_eq!(bytes_in, total(&stats, Count::ClientBytesOut) - 32 * 4);
}

fn a_client_that_never_reads_is_cut_off_while_another_is_served(backend: &str) {
    let _serial = serial();
    let (handle, addr) = start(&config(backend, 1, &[]));
    let stats = handle.stats().to_vec();
    let mut good = connect(addr);
    echo_round(&mut good, b"ping");
    let mut flooded = connect(addr);
    flooded.write_all(&[FLOOD]).expect("write");
    // The app floods `flooded`, which never reads: kernel buffers fill,
    // then the port's send queue, then it is cut off.
    let t0 = Instant::now();
    while total(&stats, Count::ClientClosedSlowReader) == 0 {
        assert!(t0.elapsed() < IO_TIMEOUT, "slow reader never cut off");
        echo_round(&mut good, b"still there?");
        std::thread::sleep(Duration::from_millis(10));
    }
    echo_round(&mut good, b"after the cut");
    // The flooded socket was closed at once: reading drains what the kernel
    // held, then EOF or a reset.
    flooded.set_read_timeout(Some(IO_TIMEOUT)).expect("timeout");
    let got = read_to_close(&mut flooded);
    assert!(got.len() > 64 * 1024, "it was flooded: {} bytes", got.len());
    handle.shutdown();
    let apps = handle.join().expect("clean join");
    let closed = &apps[0].closed;
    assert!(
        closed.iter().any(|(_, r)| *r == CloseReason::SlowReader),
        "{closed:?}"
    );
    assert!(apps[0].queue_full >= 1);
    assert_eq!(read_to_close(&mut good), GOODBYE);
}

fn connections_max_refuses_and_peer_close_reaches_the_app(backend: &str) {
    let _serial = serial();
    let (handle, addr) = start(&config(backend, 1, &["gateway.connections_max=2"]));
    let stats = handle.stats().to_vec();
    let mut a = connect(addr);
    let mut b = connect(addr);
    echo_round(&mut a, b"a");
    echo_round(&mut b, b"b");
    let mut refused = connect(addr);
    assert_eq!(read_to_close(&mut refused), b"", "refused: closed at once");
    eventually("refusal counted", || {
        total(&stats, Count::ClientRefused) == 1
    });
    echo_round(&mut a, b"a still served");
    // The peer goes away: the app sees Closed{PeerClosed}, the slot frees.
    b.shutdown(Shutdown::Both).expect("shutdown");
    drop(b);
    eventually("peer close seen", || {
        total(&stats, Count::ClientClosedPeer) == 1
    });
    let mut c = connect(addr);
    echo_round(&mut c, b"c takes b's place");
    // The app closes: what it queued first is written, then EOF.
    c.write_all(b"Quit").expect("write");
    assert_eq!(read_to_close(&mut c), b"Quit");
    eventually("app close counted", || {
        total(&stats, Count::ClientClosedByApp) == 1
    });
    handle.shutdown();
    let apps = handle.join().expect("clean join");
    let closed = &apps[0].closed;
    assert_eq!(
        closed
            .iter()
            .filter(|(_, r)| *r == CloseReason::PeerClosed)
            .count(),
        1,
        "{closed:?}"
    );
    assert_eq!(total(&stats, Count::ClientRefused), 1);
    assert_eq!(total(&stats, Count::ClientOpened), 3);
    assert_eq!(total(&stats, Count::ClientClosedShutdown), 1);
    assert_eq!(total(&stats, Count::ClientClosedByApp), 1);
}

fn a_busy_port_is_refused_at_start_naming_the_key(backend: &str) {
    let _serial = serial();
    let squatter = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let taken = squatter.local_addr().expect("addr");
    let c = config(backend, 1, &[&format!("gateway.listen_addr=\"{taken}\"")]);
    let err = Runtime::start(&c, |_: ShardContext| Echo::default()).expect_err("port in use");
    assert!(err.to_string().contains("gateway.listen_addr"), "{err}");
}

fn unconsumed_input_pushes_back_on_the_client(backend: &str) {
    let _serial = serial();
    let inbound_max = 16 * 1024;
    let (handle, addr) = start(&config(
        backend,
        1,
        &[
            "gateway.frame_bytes_max=1024",
            "gateway.read_batch_bytes=4096",
            &format!("gateway.inbound_bytes_max={inbound_max}"),
        ],
    ));
    let stats = handle.stats().to_vec();
    let mut good = connect(addr);
    let mut held = connect(addr);
    held.write_all(&[HOLD]).expect("write");
    held.set_write_timeout(Some(Duration::from_millis(300)))
        .expect("timeout");
    // The app never consumes `held`: its reader stops at inbound_bytes_max,
    // the kernel buffers fill, and the client's writes block.
    let chunk = [b'z'; 64 * 1024];
    let mut written = 0_usize;
    let blocked = loop {
        match held.write(&chunk) {
            Ok(n) => written += n,
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                break true
            }
            // A write with SO_SNDTIMEO is not restarted after a signal
            // (seen on the io_uring loop: EINTR now and then).
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => panic!("write failed: {e}"),
        }
        if written > 256 * 1024 * 1024 {
            break false;
        }
    };
    assert!(
        blocked,
        "the client was never pushed back ({written} bytes)"
    );
    let held_level = stats[0].level(tessera::shard::Level::ClientInboundHeld);
    eventually("inbound level published", || {
        stats[0].level(tessera::shard::Level::ClientInboundHeld) == inbound_max as u64
    });
    assert!(held_level <= inbound_max as u64);
    // Exactly the bound was read: the hold byte and what followed it.
    assert_eq!(total(&stats, Count::ClientBytesIn), inbound_max as u64);
    echo_round(&mut good, b"others are still served");
    handle.shutdown();
    handle.join().expect("clean join");
}

/// User + system CPU time of this process, from /proc (Linux).
fn cpu_time() -> Duration {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let after_name = &stat[stat.rfind(')').expect("comm") + 2..];
    let fields: Vec<&str> = after_name.split_whitespace().collect();
    // utime and stime are fields 14 and 15 of stat: 12 and 13 after the name.
    let ticks: u64 =
        fields[11].parse::<u64>().expect("utime") + fields[12].parse::<u64>().expect("stime");
    Duration::from_millis(ticks * 10) // USER_HZ is 100 on Linux
}

fn idle_connections_cost_no_cpu(backend: &str) {
    let _serial = serial();
    let (handle, addr) = start(&config(backend, 2, &[]));
    let mut clients: Vec<TcpStream> = (0..16).map(|_| connect(addr)).collect();
    for c in &mut clients {
        echo_round(c, b"warm");
    }
    let (cpu0, t0) = (cpu_time(), Instant::now());
    std::thread::sleep(Duration::from_millis(1000));
    let (cpu, wall) = (cpu_time() - cpu0, t0.elapsed());
    // Two shards ticking at 100 Hz cost a little; a task polling or
    // spinning would burn a whole core.
    assert!(
        cpu.as_secs_f64() < 0.3 * wall.as_secs_f64(),
        "idle CPU {cpu:?} over {wall:?}"
    );
    for c in &mut clients {
        echo_round(c, b"still served");
    }
    handle.shutdown();
    handle.join().expect("clean join");
}

fn an_accept_burst_beyond_one_pump_is_served_in_full(backend: &str) {
    let _serial = serial();
    // 16 readiness events and 16 accepts a pump: 300 connections arriving at
    // once take many pumps, and every one of them is served.
    let (handle, addr) = start(&config(backend, 1, &["gateway.io_events_max=16"]));
    let stats = handle.stats().to_vec();
    let mut clients: Vec<TcpStream> = (0..300).map(|_| connect(addr)).collect();
    for (i, c) in clients.iter_mut().enumerate() {
        c.write_all(format!("hello {i:03}").as_bytes())
            .expect("write");
    }
    for (i, c) in clients.iter_mut().enumerate() {
        let want = format!("hello {i:03}");
        let mut back = vec![0; want.len()];
        c.read_exact(&mut back).expect("every client is echoed");
        assert_eq!(back, want.as_bytes());
    }
    assert_eq!(total(&stats, Count::ClientOpened), 300);
    assert_eq!(total(&stats, Count::ClientRefused), 0);
    drop(clients);
    eventually("every close seen", || {
        total(&stats, Count::ClientClosedPeer) == 300
    });
    handle.shutdown();
    handle.join().expect("clean join");
}

fn reset_and_half_closed_sockets_reach_the_app_and_free_their_slots(backend: &str) {
    let _serial = serial();
    let (handle, addr) = start(&config(backend, 1, &["gateway.connections_max=2"]));
    let stats = handle.stats().to_vec();
    // A reset: SO_LINGER 0 makes the close send RST instead of FIN.
    let mut reset = connect(addr);
    echo_round(&mut reset, b"r");
    socket2::SockRef::from(&reset)
        .set_linger(Some(Duration::ZERO))
        .expect("linger 0");
    drop(reset);
    // A half close: the client shuts its write side and keeps reading.
    let mut half = connect(addr);
    echo_round(&mut half, b"h");
    half.shutdown(Shutdown::Write).expect("half close");
    assert_eq!(
        read_to_close(&mut half),
        b"",
        "the server closes a client that will send nothing more"
    );
    eventually("both closes seen", || {
        total(&stats, Count::ClientClosedPeer) == 2
    });
    // Both slots are free again: two new clients fit under connections_max.
    let mut a = connect(addr);
    let mut b = connect(addr);
    echo_round(&mut a, b"a");
    echo_round(&mut b, b"b");
    assert_eq!(total(&stats, Count::ClientRefused), 0);
    handle.shutdown();
    handle.join().expect("clean join");
}

/// Connections ending every way (peer close, app close after the client's
/// goodbye, reset), more of them than the io_uring loop has provided
/// buffers (`gateway.io_uring_buffers`, its minimum): later clients' input
/// is still read. (On io_uring the receive completion that reports a
/// connection's end carries a buffer too; kept, each ending took one from
/// the ring for good, until no receive could read anything: goodbyes left
/// unanswered at the end of long runs.)
fn connections_ending_beyond_the_buffer_count_leave_input_read(backend: &str) {
    let _serial = serial();
    let (handle, addr) = start(&config(backend, 1, &["gateway.io_uring_buffers=64"]));
    let stats = handle.stats().to_vec();
    let rounds = 3 * 40_u64;
    for i in 0..rounds {
        let mut c = connect(addr);
        echo_round(&mut c, format!("hello {i}").as_bytes());
        match i % 3 {
            0 => drop(c),
            1 => {
                // A goodbye: the app answers, closes, and the client
                // closes after the server's FIN.
                c.write_all(b"Quit").expect("write");
                assert_eq!(read_to_close(&mut c), b"Quit", "goodbye {i} answered");
            }
            _ => {
                socket2::SockRef::from(&c)
                    .set_linger(Some(Duration::ZERO))
                    .expect("linger 0");
                drop(c);
            }
        }
    }
    eventually("every close seen", || {
        total(&stats, Count::ClientClosedPeer) + total(&stats, Count::ClientClosedByApp) == rounds
    });
    let mut last = connect(addr);
    echo_round(&mut last, b"still read after all of them");
    handle.shutdown();
    handle.join().expect("clean join");
}

/// What one tick queues for a client is written with one write call: twelve
/// one-byte sends queued by one tick leave together, not in twelve writes.
fn a_tick_of_output_leaves_in_one_write(backend: &str) {
    let _serial = serial();
    let (handle, addr) = start(&config(
        backend,
        1,
        &["runtime.tick_ms=200", "runtime.tick_budget_ms=200"],
    ));
    let stats = handle.stats().to_vec();
    let mut c = connect(addr);
    echo_round(&mut c, b"warm");
    // The counters are published every 20 ticks: let the warm-up's settle.
    eventually("warm-up counted", || {
        total(&stats, Count::ClientBytesOut) == 4
    });
    let writes_before = total(&stats, Count::ClientWrites);
    // One burst of twelve bytes (SPLIT: echoed with one port send per
    // byte) arrives within one 200 ms tick, or two if a tick falls in the
    // middle of it; the socket loop writes what a tick queued at once.
    c.write_all(b"S0123456789S").expect("write");
    let mut back = [0u8; 12];
    c.read_exact(&mut back).expect("echo");
    assert_eq!(&back, b"S0123456789S");
    eventually("echo counted", || {
        total(&stats, Count::ClientBytesOut) == 16
    });
    let writes = total(&stats, Count::ClientWrites) - writes_before;
    assert!(
        (1..=2).contains(&writes),
        "twelve queued sends took {writes} write calls"
    );
    handle.shutdown();
    handle.join().expect("clean join");
}

fn a_connection_handed_to_the_other_shard_keeps_its_bytes(backend: &str) {
    let _serial = serial();
    let (handle, addr) = start(&config(backend, 2, &[]));
    let stats = handle.stats().to_vec();
    let mut c = connect(addr);
    echo_round(&mut c, b"before");
    c.write_all(b"abcMxyz").expect("write");
    let mut back = [0; 6];
    c.read_exact(&mut back).expect("adopted, then the echo");
    let (from, to) = (back[1], back[2]);
    assert_eq!(&back[..1], b"A");
    assert_eq!(to, (from + 1) % 2, "the other shard");
    assert_eq!(&back[3..], b"xyz", "the bytes after the hand-off, in order");
    echo_round(&mut c, b"after");
    eventually("counted", || {
        total(&stats, Count::ClientHandedOff) == 1 && total(&stats, Count::ClientAdopted) == 1
    });
    let mut lost = connect(addr);
    echo_round(&mut lost, b"hi");
    lost.write_all(b"N").expect("write");
    assert!(read_to_close(&mut lost).is_empty(), "closed");
    eventually("counted", || total(&stats, Count::ClientHandoffFailed) == 1);
    handle.shutdown();
    handle.join().expect("joins");
}

/// Every test above runs on both socket loops (`gateway.io_backend`).
macro_rules! on_both_backends {
    ($($name:ident),* $(,)?) => {
        mod epoll {
            $(#[test]
            fn $name() {
                super::$name("epoll")
            })*
        }
        mod io_uring {
            $(#[test]
            fn $name() {
                super::$name("io_uring")
            })*
        }
    };
}

on_both_backends!(
    echo_on_both_shards_then_shutdown_says_goodbye_and_closes,
    a_client_that_never_reads_is_cut_off_while_another_is_served,
    connections_max_refuses_and_peer_close_reaches_the_app,
    a_busy_port_is_refused_at_start_naming_the_key,
    unconsumed_input_pushes_back_on_the_client,
    idle_connections_cost_no_cpu,
    an_accept_burst_beyond_one_pump_is_served_in_full,
    reset_and_half_closed_sockets_reach_the_app_and_free_their_slots,
    connections_ending_beyond_the_buffer_count_leave_input_read,
    a_tick_of_output_leaves_in_one_write,
    a_connection_handed_to_the_other_shard_keeps_its_bytes,
);
