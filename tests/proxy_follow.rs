//! Issue 21, "the proxy follows its real", over loopback TCP against the
//! real server (2 shards, a border at x = 120 between cell 0 on shard 0 and
//! cell 1 on shard 1): a client walks its avatar across the border while it
//! sends a move every 50 ms; once its real is on the other shard, its
//! connection and proxy live there (the shards' published gauges say where
//! the connection and the real are), every move is acknowledged once and in
//! order, the game applied exactly as many moves as were sent, and neither
//! the walker's nor a watcher's view stream breaks a rule. A connection
//! moves at most once per `gateway.proxy_follow_ms` (hysteresis): a real
//! that crosses back within that window of its last hand-over waits for
//! the window's end.

mod gateway_support;

use std::time::{Duration, Instant};

use gateway_support::{config, now, pump_until, Client};
use tessera::core::geom::Vec3;
use tessera::server::EmbeddedServer;

fn start(follow_ms: u64) -> EmbeddedServer {
    start_on(follow_ms, "epoll")
}

fn start_on(follow_ms: u64, backend: &str) -> EmbeddedServer {
    let follow = format!("gateway.proxy_follow_ms={follow_ms}");
    let backend = format!("gateway.io_backend=\"{backend}\"");
    // The border stays at x = 120 (no balancing moves it).
    let cfg = config(&[
        &follow,
        &backend,
        "runtime.metrics_publish_ticks=2",
        "balance.enabled=false",
    ]);
    EmbeddedServer::start(&cfg).expect("server starts")
}

/// One published app metric, per shard.
fn per_shard(server: &mut EmbeddedServer, name: &str) -> Vec<u64> {
    server
        .handle()
        .stats()
        .iter()
        .map(|s| {
            s.app_metrics()
                .iter()
                .filter(|m| m.name == name)
                .map(|m| m.value)
                .sum()
        })
        .collect()
}

/// Connections handed over with their proxies, all shards.
fn handoffs(server: &mut EmbeddedServer) -> u64 {
    per_shard(server, "gateway_proxy_handoffs").iter().sum()
}

/// The shard that publishes all `total` of `name`, if one does.
fn the_shard(server: &mut EmbeddedServer, name: &str, total: u64) -> Option<usize> {
    let v = per_shard(server, name);
    let at = v.iter().position(|&n| n == total)?;
    (v.iter().sum::<u64>() == total).then_some(at)
}

/// The walker, a watcher and what the walker sent.
struct Walk {
    walker: Client,
    watcher: Client,
    x: f64,
    sent: u64,
}

impl Walk {
    fn new(server: &EmbeddedServer) -> Walk {
        let addr = server.client_addr();
        let mut walker = Client::connect(addr, "walker");
        let mut watcher = Client::connect(addr, "watcher");
        assert!(
            pump_until(
                &mut [&mut walker, &mut watcher],
                Duration::from_secs(5),
                |cs| cs.iter().all(|c| c.live())
            ),
            "both welcomed"
        );
        Walk {
            walker,
            watcher,
            // Both spawn at the centre, x = 120 (cell 1, shard 1).
            x: 120.0,
            sent: 0,
        }
    }

    /// One move every 50 ms towards `to_x` (steps of at most `step` m),
    /// then moves on the spot until `dwell` passed.
    fn walk(&mut self, to_x: f64, step: f64, dwell: Duration) {
        let mut until = None;
        loop {
            if (self.x - to_x).abs() > 0.01 {
                self.x += (to_x - self.x).clamp(-step, step);
            } else {
                let end = *until.get_or_insert_with(|| Instant::now() + dwell);
                if Instant::now() >= end {
                    return;
                }
            }
            self.walker
                .session
                .send_move(now(), Vec3::ground(self.x, 60.0), 0.0)
                .expect("move");
            self.sent += 1;
            self.pump_for(Duration::from_millis(50));
        }
    }

    fn pump_for(&mut self, d: Duration) {
        let t0 = Instant::now();
        loop {
            self.walker.pump();
            self.watcher.pump();
            if t0.elapsed() >= d {
                return;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Every move acknowledged, once, in order; no rule broken anywhere.
    fn check(&mut self) {
        let all_acked = pump_until(
            &mut [&mut self.walker, &mut self.watcher],
            Duration::from_secs(5),
            |cs| cs[0].session.inputs_in_flight() == 0,
        );
        assert!(all_acked, "every move acknowledged");
        assert_eq!(self.walker.session.last_acked(), self.sent);
        assert_eq!(self.walker.session.next_seq(), self.sent + 1);
        for (who, c) in [("walker", &self.walker), ("watcher", &self.watcher)] {
            assert!(!c.eof, "{who} still connected");
            assert_eq!(
                c.session.violation_count(),
                0,
                "{who}: {:?} {:?}",
                c.session.violations(),
                c.session.view().map(|v| v.violations())
            );
        }
        let e = self.walker.entity().expect("welcomed");
        assert!(
            self.watcher.shown(e).is_some(),
            "the watcher sees the walker"
        );
    }
}

/// Waits (moving on the spot) until the shards publish `want` for `name`.
fn wait_for(server: &mut EmbeddedServer, walk: &mut Walk, name: &str, want: &[u64]) {
    let t0 = Instant::now();
    while per_shard(server, name) != want {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "{name}: {:?}, not {want:?} (reals {:?})",
            per_shard(server, name),
            per_shard(server, "host_reals"),
        );
        walk.walk(walk.x, 1.0, Duration::from_millis(100));
    }
}

#[test]
fn the_connection_follows_its_real_across_shards_with_every_input_once_in_order() {
    follows_its_real(start(500));
}

/// The same hand-overs over the io_uring socket loop (each waits for its
/// receive's final completion before the socket moves).
#[test]
fn the_connection_follows_its_real_on_io_uring() {
    follows_its_real(start_on(500, "io_uring"));
}

fn follows_its_real(mut server: EmbeddedServer) {
    let mut w = Walk::new(&server);
    // Two reals (walker, watcher) start on shard 1; wherever the kernel put
    // the connections, they follow there.
    w.walk(120.0, 1.0, Duration::from_millis(1500));
    wait_for(&mut server, &mut w, "gateway_clients", &[0, 2]);
    let handed_before: u64 = per_shard(&mut server, "gateway_proxy_handoffs")
        .iter()
        .sum();
    // The walker crosses to shard 0 and stays: its connection follows.
    // (x = 107 and 133 are past the 8 m migration margin and within the
    // watcher's 15 m view.)
    w.walk(107.0, 0.5, Duration::from_millis(1500));
    wait_for(&mut server, &mut w, "gateway_clients", &[1, 1]);
    assert_eq!(per_shard(&mut server, "host_reals"), vec![1, 1]);
    // And back: it follows again.
    w.walk(133.0, 0.5, Duration::from_millis(1500));
    wait_for(&mut server, &mut w, "gateway_clients", &[0, 2]);
    assert_eq!(the_shard(&mut server, "host_reals", 2), Some(1));
    w.check();
    let handed: u64 = per_shard(&mut server, "gateway_proxy_handoffs")
        .iter()
        .sum();
    let adopted: u64 = per_shard(&mut server, "gateway_proxy_adopted").iter().sum();
    assert!(
        handed >= handed_before + 2,
        "the walker's connection moved twice"
    );
    let sent = w.sent;
    let e = w.walker.entity().expect("welcomed");
    let (end, hosts) = server.stop_with_hosts().expect("clean stop");
    eprintln!("hand-overs {handed}, adopted {adopted}, moves sent {sent}; {end:?}");
    assert_eq!(handed, adopted, "every hand-over taken up");
    assert!(hosts[1].has_proxy(e) && !hosts[0].has_proxy(e));
    let k: Vec<_> = hosts.iter().map(|h| h.client_counters().clone()).collect();
    assert_eq!(k.iter().map(|c| c.proxy_lost).sum::<u64>(), 0);
    let applied: u64 = hosts.iter().map(|h| h.game_counters().inputs).sum();
    assert_eq!(applied, sent, "every move applied once");
    for h in &hosts {
        assert_eq!(h.counters().misrouted, 0);
        assert_eq!(h.counters().bad_envelopes, 0);
    }
    assert!(end.migrations >= 2, "{end:?}");
}

#[test]
fn a_connection_moves_at_once_but_at_most_once_per_window() {
    const WINDOW: Duration = Duration::from_millis(4000);
    let mut server = start(WINDOW.as_millis() as u64);
    let mut w = Walk::new(&server);
    w.walk(134.0, 1.0, Duration::from_millis(500));
    wait_for(&mut server, &mut w, "gateway_clients", &[0, 2]);
    // Past the window of a hand-over that may have brought a connection to
    // shard 1 (the kernel picks the accepting shard).
    w.walk(134.0, 1.0, WINDOW + Duration::from_millis(100));
    let before = handoffs(&mut server);
    let t0 = Instant::now();
    // Over the border to shard 0: the connection follows at once, without
    // waiting for the window.
    w.walk(106.0, 1.0, Duration::from_millis(200));
    wait_for(&mut server, &mut w, "gateway_clients", &[1, 1]);
    assert_eq!(per_shard(&mut server, "host_reals"), vec![1, 1]);
    assert_eq!(handoffs(&mut server), before + 1);
    // And straight back, within the window of that hand-over: the real
    // crosses, its connection waits.
    w.walk(134.0, 1.0, Duration::from_millis(200));
    wait_for(&mut server, &mut w, "host_reals", &[0, 2]);
    if t0.elapsed() < WINDOW {
        assert_eq!(handoffs(&mut server), before + 1, "the connection waited");
        assert_eq!(per_shard(&mut server, "gateway_clients"), vec![1, 1]);
    } else {
        eprintln!("the machine paused the test past the window: not checked");
    }
    // Once the window has passed, it follows.
    wait_for(&mut server, &mut w, "gateway_clients", &[0, 2]);
    assert_eq!(handoffs(&mut server), before + 2);
    w.check();
    let sent = w.sent;
    let (_, hosts) = server.stop_with_hosts().expect("clean stop");
    assert_eq!(
        hosts.iter().map(|h| h.game_counters().inputs).sum::<u64>(),
        sent,
        "every move applied once"
    );
    assert!(sent > 0);
}
