//! Whole-host tests on the sans-IO [`Harness`]: two shards, clients on
//! both, an avatar walking across the border between them while others
//! watch, calls, disconnects and a slow reader.

use crate::client::{CallKind, SessionEvent, SessionState};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::core::time::Time;
use crate::wire::client::{CallOutcome, RefuseReason};

use super::gateway::Disconnect;
use super::harness::{test_config, Harness};

fn entity(h: &Harness, c: usize) -> EntityId {
    h.clients[c].session.welcome().expect("welcomed").entity
}

/// The version of `e` client `c` shows, if shown.
fn shown(h: &Harness, c: usize, e: EntityId) -> Option<u64> {
    h.clients[c].session.view()?.find(e).map(|s| s.version)
}

fn violations(h: &Harness) -> u64 {
    h.clients.iter().map(|c| c.session.violation_count()).sum()
}

/// Walks client `c` to `x` (z = 60) at 0.5 m per tick, one move per tick,
/// recording the longest run of ticks each watcher went without an update
/// of the walker.
fn walk(h: &mut Harness, c: usize, to_x: f64, watchers: &[usize], gaps: &mut [u64]) {
    let e = entity(h, c);
    let mut x = h.clients[c]
        .session
        .view()
        .and_then(|v| v.own())
        .map_or(120.0, |s| s.replica.core().pos.x);
    let mut last: Vec<(Option<u64>, u64)> = watchers.iter().map(|&w| (shown(h, w, e), 0)).collect();
    while (x - to_x).abs() > 0.01 {
        x += (to_x - x).clamp(-0.5, 0.5);
        let now = h.now;
        h.clients[c]
            .session
            .send_move(now, Vec3::ground(x, 60.0), 0.0)
            .expect("move");
        h.step();
        for (i, &w) in watchers.iter().enumerate() {
            let v = shown(h, w, e);
            if v != last[i].0 {
                last[i] = (v, 0);
            } else {
                last[i].1 += 1;
                gaps[i] = gaps[i].max(last[i].1);
            }
        }
    }
}

#[test]
fn a_walker_crosses_between_shards_while_others_watch_without_gaps() {
    let mut h = Harness::new(&test_config(&[]));
    let walker = h.connect(0, "walker");
    let w1 = h.connect(1, "watcher-1");
    let w2 = h.connect(0, "watcher-2");
    h.run(5);
    for c in &h.clients {
        assert_eq!(c.session.state(), SessionState::Live);
    }
    let e = entity(&h, walker);
    assert_eq!(h.copies(e).0, 1);
    h.run(10);
    assert!(shown(&h, w1, e).is_some() && shown(&h, w2, e).is_some());
    let mut gaps = [0u64; 2];
    // Spawned at x = 120 (cell 1, shard 1): over the border to cell 0 and
    // back, past the migration margin both ways.
    walk(&mut h, walker, 106.0, &[w1, w2], &mut gaps);
    h.run(10);
    let cell0 = h.hosts[0].cells().next().expect("cell 0").id();
    assert_eq!(
        h.hosts[0]
            .cells()
            .filter(|c| c.reals().contains(&e))
            .count(),
        1,
        "the walker's real moved to {cell0} on shard 0"
    );
    walk(&mut h, walker, 134.0, &[w1, w2], &mut gaps);
    h.run(10);
    assert_eq!(h.copies(e).0, 1);
    let migrations: u64 = h.hosts.iter().map(|x| x.migrations()).sum();
    assert!(migrations >= 2, "{migrations} migrations");
    // Each migration happened in a tick that applied a move. The host runs
    // the game between the cell's two half ticks, so the move was applied
    // at the old real before its migration check: nothing had to follow the
    // real as a deferred call, and nothing was lost.
    let deferred: u64 = h.hosts.iter().map(|x| x.game.counters().deferred).sum();
    let lost: u64 = h.hosts.iter().map(|x| x.game.counters().lost).sum();
    let inputs: u64 = h.hosts.iter().map(|x| x.game.counters().inputs).sum();
    assert_eq!((deferred, lost), (0, 0), "deferred, lost");
    assert_eq!(inputs, 84, "every move applied once");
    assert_eq!(violations(&h), 0, "client view rules hold");
    // The cells' AOI counters (exported as host_aoi_enters/leaves) count
    // exactly what the clients received, across the walker's migrations.
    let sent = |f: fn(&crate::core::cell::Counters) -> u64| -> u64 {
        h.hosts.iter().map(|x| f(&x.cell_counters())).sum()
    };
    let seen = |f: fn(&crate::client::SessionCounters) -> u64| -> u64 {
        h.clients.iter().map(|c| f(c.session.counters())).sum()
    };
    assert!(seen(|k| k.enters) >= 2, "watchers saw the walker enter");
    assert_eq!(sent(|k| k.view_enters), seen(|k| k.enters), "enters");
    assert_eq!(sent(|k| k.view_leaves), seen(|k| k.leaves), "leaves");
    assert_eq!(sent(|k| k.view_updates), seen(|k| k.updates), "updates");
    assert!(gaps.iter().all(|&g| g <= 4), "longest gaps {gaps:?} ticks");
    let s = &h.clients[walker].session;
    assert_eq!(s.last_acked(), s.next_seq() - 1, "every move acknowledged");
    assert_eq!(s.inputs_in_flight(), 0);
}

/// The status property's index in the avatar type.
fn status_index() -> u16 {
    let reg = crate::core::entity::TypeRegistry::with_builtins();
    reg.get(crate::core::entity::AVATAR)
        .and_then(|t| t.prop_index("status"))
        .expect("status") as u16
}

#[test]
fn inputs_behind_a_space_hop_follow_the_real_as_deferred_calls() {
    // The client asks for a town and keeps setting a property every tick.
    // The tick that applies the hop (a transfer of the real to the town's
    // cell) still holds later inputs of the same client: they find no real
    // here any more and follow it as deferred game calls, applied there.
    let mut h = Harness::new(&test_config(&[]));
    let c = h.connect(0, "hopper");
    h.run(10);
    let status = status_index();
    h.clients[c].session.send_enter_space(0, 2).expect("enter");
    let mut sets = Vec::new();
    let mut hopped = false;
    for i in 0..40u8 {
        let now = h.now;
        let value = [4, b'a' + i % 26, b'b', b'c', b'd'];
        sets.push(
            h.clients[c]
                .session
                .send_set_prop(now, status, &value)
                .expect("set"),
        );
        h.step();
        while let Some(ev) = h.clients[c].session.poll_event() {
            match ev {
                SessionEvent::SpaceChanged { .. } => hopped = true,
                SessionEvent::CallDone { seq, outcome, .. } => {
                    assert_eq!(outcome, CallOutcome::Applied, "set {seq}");
                    sets.retain(|&s| s != seq);
                }
                _ => {}
            }
        }
    }
    h.run(20);
    while let Some(ev) = h.clients[c].session.poll_event() {
        if let SessionEvent::CallDone { seq, outcome, .. } = ev {
            assert_eq!(outcome, CallOutcome::Applied, "set {seq}");
            sets.retain(|&s| s != seq);
        }
    }
    assert!(hopped, "the client reached the town");
    assert!(sets.is_empty(), "sets without a result: {sets:?}");
    let deferred: u64 = h.hosts.iter().map(|x| x.game.counters().deferred).sum();
    let lost: u64 = h.hosts.iter().map(|x| x.game.counters().lost).sum();
    assert!(deferred >= 1, "an input followed the real ({deferred})");
    assert_eq!(lost, 0);
    assert_eq!(violations(&h), 0);
}

#[test]
fn calls_resolve_through_the_gateway_and_the_reals() {
    let mut h = Harness::new(&test_config(&[]));
    let a = h.connect(0, "a");
    let b = h.connect(1, "b");
    h.run(15);
    let eb = entity(&h, b);
    let handle = *h.clients[a]
        .session
        .view()
        .and_then(|v| v.shown().iter().find(|(_, s)| s.entity == eb))
        .expect("a sees b")
        .0;
    let now = h.now;
    let hit = h.clients[a].session.send_hit(now, handle, 10).expect("hit");
    let unseen = h.clients[a].session.send_hit(now, 4242, 10).expect("hit");
    let status = status_index();
    let set = h.clients[a]
        .session
        .send_set_prop(now, status, b"\x04busy")
        .expect("set");
    h.run(30);
    let mut done = Vec::new();
    while let Some(ev) = h.clients[a].session.poll_event() {
        if let SessionEvent::CallDone {
            seq, kind, outcome, ..
        } = ev
        {
            done.push((seq, kind, outcome));
        }
    }
    done.sort_by_key(|d| d.0);
    assert_eq!(
        done,
        vec![
            (
                hit,
                CallKind::Hit,
                CallOutcome::HitLanded {
                    dealt: 10,
                    killed: false
                }
            ),
            (
                unseen,
                CallKind::Hit,
                CallOutcome::Refused(RefuseReason::NotVisible)
            ),
            (set, CallKind::SetProp, CallOutcome::Applied),
        ]
    );
    let hp = h.clients[b]
        .session
        .view()
        .and_then(|v| v.own())
        .and_then(|s| s.replica.props().get(2).cloned());
    assert_eq!(hp, Some(crate::core::entity::Value::Int(90)));
    assert_eq!(violations(&h), 0);
    let not_visible: u64 = h.hosts.iter().map(|x| x.clients.refused()[4]).sum();
    assert_eq!(not_visible, 1, "the unseen hit is counted as a strike");
}

#[test]
fn disconnects_remove_the_avatar_everywhere() {
    let mut h = Harness::new(&test_config(&["gateway.reconnect_window_ms=1000"]));
    let a = h.connect(0, "a");
    let b = h.connect(1, "b");
    let c = h.connect(0, "c");
    h.run(15);
    let (ea, eb) = (entity(&h, a), entity(&h, b));
    assert!(h.copies(ea).1 > 0, "a's avatar on the border has a ghost");
    let now = h.now;
    h.clients[a].session.send_bye(now).expect("bye");
    let (shard, conn) = (h.clients[b].shard, h.clients[b].conn);
    h.ports[shard].inject_close(conn, crate::shard::CloseReason::PeerClosed);
    h.clients[b].closed = true;
    h.run(15);
    assert_eq!(h.copies(ea), (0, 0));
    assert_eq!(h.copies(eb).0, 1, "a dropped avatar waits for its account");
    assert_eq!(h.hosts[shard].clients.detached(), 1);
    h.run(10);
    assert_eq!(h.copies(eb), (0, 0), "gone after the reconnect window");
    assert_eq!(h.hosts[shard].clients.counters().reconnect_expired, 1);
    assert_eq!(shown(&h, c, ea), None);
    assert_eq!(shown(&h, c, eb), None);
    assert_eq!(violations(&h), 0);
    let ended = |d: Disconnect| -> u64 {
        h.hosts
            .iter()
            .map(|x| x.clients.counters().disconnects[d as usize])
            .sum()
    };
    assert_eq!(
        (ended(Disconnect::Bye), ended(Disconnect::PeerClosed)),
        (1, 1)
    );
}

#[test]
fn a_slow_reader_is_cut_off_and_the_others_carry_on() {
    let mut h = Harness::new(&test_config(&["gateway.send_queue_bytes_max=4096"]));
    let slow = h.connect(0, "slow");
    let mover = h.connect(1, "mover");
    let other = h.connect(0, "other");
    h.run(10);
    let es = entity(&h, slow);
    h.clients[slow].paused = true;
    let mut x = 120.0;
    for i in 0..1_200 {
        x = if i % 40 < 20 { x + 0.5 } else { x - 0.5 };
        let now = h.now;
        let _ = h.clients[mover]
            .session
            .send_move(now, Vec3::ground(x, 60.0), 0.0);
        h.step();
        if h.copies(es) == (0, 0) {
            break;
        }
    }
    h.run(10);
    assert_eq!(h.copies(es), (0, 0), "the slow reader's avatar is gone");
    let slow_cut: u64 = h
        .hosts
        .iter()
        .map(|x| x.clients.counters().disconnects[Disconnect::SlowReader as usize])
        .sum();
    assert_eq!(slow_cut, 1);
    for c in [mover, other] {
        assert_eq!(h.clients[c].session.state(), SessionState::Live);
        assert_eq!(h.clients[c].session.violation_count(), 0);
    }
    assert_eq!(shown(&h, other, es), None);
}

#[test]
fn a_merge_drops_a_cell_and_the_host_counters_keep_its_counts() {
    // Two cells on two shards, tiny loads: the space service merges them
    // and the drained cell is dropped. What its shard counted in it
    // (migrations above all) must stay in the exported totals.
    let mut h = Harness::new(&test_config(&["balance.merge_reports_min=1"]));
    let walker = h.connect(1, "walker");
    let watcher = h.connect(0, "watcher");
    h.run(10);
    let mut gaps = [0u64; 1];
    walk(&mut h, walker, 100.0, &[watcher], &mut gaps);
    walk(&mut h, walker, 140.0, &[watcher], &mut gaps);
    let cells_at_start: usize = h.hosts.iter().map(|x| x.cells().count()).sum();
    let mut last = 0;
    for _ in 0..600 {
        h.step();
        let now: u64 = h.hosts.iter().map(|x| x.migrations()).sum();
        assert!(
            now >= last,
            "host migrations ran backwards: {last} -> {now}"
        );
        last = now;
    }
    let cells_at_end: usize = h.hosts.iter().map(|x| x.cells().count()).sum();
    let dropped: u64 = h
        .hosts
        .iter()
        .map(|x| x.balance().counters().cells_dropped)
        .sum();
    assert!(dropped >= 1, "no merged cell was dropped");
    assert!(
        cells_at_end < cells_at_start,
        "a merged cell was dropped ({cells_at_start} -> {cells_at_end})"
    );
    assert!(
        last >= 2,
        "the walker's migrations are still counted ({last})"
    );
    assert_eq!(violations(&h), 0);
}

/// What a walk measured at the walker's client.
#[derive(Debug, Default)]
struct OwnGaps {
    /// Ticks between consecutive ticks that brought own updates.
    gaps: Vec<u64>,
    /// The same gaps in time, ms: each update at the tick of the shard
    /// that wrote it (its offset counts: a connection that followed its
    /// real to another shard is served on that shard's grid).
    gaps_ms: Vec<u64>,
    /// Moves sent.
    moves: u64,
    /// Own updates received.
    updates: u64,
}

/// Walks client `c` to `to_x` (z = 60), one 1 m move every second tick
/// (README's bots: a move every 100 ms, 50 ms ticks), then two more ticks.
fn walk_every_other_tick(h: &mut Harness, c: usize, to_x: f64) -> OwnGaps {
    let mut x = h.clients[c]
        .session
        .view()
        .and_then(|v| v.own())
        .map_or(120.0, |s| s.replica.core().pos.x);
    let mut m = OwnGaps::default();
    let first = h.clients[c].session.counters().own_updates;
    let mut own = first;
    let mut since: Option<u64> = None;
    let mut since_at: Option<Time> = None;
    let mut tick = 0u64;
    let mut tail = 4;
    while tail > 0 {
        if (x - to_x).abs() <= 0.01 {
            tail -= 1;
        } else if tick % 2 == 0 {
            x += (to_x - x).clamp(-1.0, 1.0);
            let now = h.now;
            h.clients[c]
                .session
                .send_move(now, Vec3::ground(x, 60.0), 0.0)
                .expect("move");
            m.moves += 1;
        }
        h.step();
        tick += 1;
        let n = h.clients[c].session.counters().own_updates;
        if n > own {
            let at = h.tick_time(h.clients[c].shard);
            if let (Some(s), Some(a)) = (since, since_at) {
                m.gaps.push(tick - s);
                m.gaps_ms.push(at.saturating_since(a).as_millis() as u64);
            }
            since = Some(tick);
            since_at = Some(at);
            own = n;
        }
    }
    m.updates = own - first;
    m
}

/// Issue 21, "the migration stall": a client's proxy stays on the shard
/// that accepted it, so once its real migrates to a cell of another shard
/// every move and its own update cross the mesh. Each crossing waits for
/// the receiver's next tick; on one tick grid for all shards that is a
/// whole tick each way, and the first move after the migration came back
/// two ticks later than the one before it (4 ticks apart instead of 2).
/// With the runtime's staggered ticks the round trip is one tick.
#[test]
fn own_updates_keep_their_spacing_across_a_migration_between_shards() {
    let walk = |aligned: bool| {
        // A fixed layout: the balancer would merge the two idle cells.
        let mut h = Harness::new(&test_config(&["balance.enabled=false"]));
        if aligned {
            h.offsets.fill(std::time::Duration::ZERO);
        }
        // Proxy on shard 1; spawned at x = 120 (cell 1, shard 1).
        let walker = h.connect(1, "walker");
        h.run(10);
        let e = entity(&h, walker);
        let away = walk_every_other_tick(&mut h, walker, 100.0);
        let there = h.hosts[0].cells().any(|c| c.reals().contains(&e));
        assert!(there, "the real migrated to cell 0 on shard 0");
        let back = walk_every_other_tick(&mut h, walker, 140.0);
        assert!(h.hosts[1].cells().any(|c| c.reals().contains(&e)));
        assert_eq!(violations(&h), 0);
        let s = &h.clients[walker].session;
        assert_eq!(s.last_acked(), s.next_seq() - 1, "every move acknowledged");
        (away, back)
    };
    let (away, back) = walk(false);
    for m in [&away, &back] {
        assert_eq!(m.updates, m.moves, "one own update per move: {m:?}");
        assert!(m.gaps.iter().all(|&g| g <= 3), "{m:?}");
    }
    // The old grid: one tick per hop each way.
    let (away, _) = walk(true);
    assert_eq!(away.gaps.iter().max(), Some(&4), "{away:?}");
}

/// Issue 21, "the migration stall", with the proxy following its real
/// (the runtime's ports: a hand-off moves the connection). The walker's
/// proxy is on shard 1 with its real; the real migrates to cell 0 on shard
/// 0 and back. Its own updates must keep their spacing (a move every 100
/// ms, so 100 ms apart) within less than one tick: the connection follows
/// the real as soon as the proxy hears where it went (its first hand-over
/// is not held back by `gateway.proxy_follow_ms`), so no move takes the
/// cross-shard round trip that cost a whole tick (150 ms gaps); what is
/// left is the change of grid (the shards tick half a tick apart). At
/// 10 Hz updates (one batch every other tick, in the tick of the client's
/// input: `flush_phase`) the same, but for one gap of a period and a tick
/// where a walk starts at the other phase (its first input is waited for
/// a tick, then the phase follows it).
#[test]
fn own_updates_keep_their_spacing_when_the_proxy_follows_its_real() {
    for rate in ["20.0", "10.0"] {
        own_updates_keep_their_spacing_at(rate);
    }
}

/// The test above at `view.client_update_hz = rate`.
fn own_updates_keep_their_spacing_at(rate: &str) {
    let hz = format!("view.client_update_hz={rate}");
    let mut h = Harness::attached(&test_config(&["balance.enabled=false", &hz]));
    let walker = h.connect(1, "walker");
    h.run(10);
    let e = entity(&h, walker);
    assert!(h.hosts[1].has_proxy(e));
    let away = walk_every_other_tick(&mut h, walker, 100.0);
    assert!(h.hosts[0].cells().any(|c| c.reals().contains(&e)));
    assert!(h.hosts[0].has_proxy(e), "the proxy followed its real");
    assert_eq!(h.clients[walker].shard, 0, "and so did the connection");
    let back = walk_every_other_tick(&mut h, walker, 140.0);
    assert!(h.hosts[1].cells().any(|c| c.reals().contains(&e)));
    assert!(h.hosts[1].has_proxy(e), "and back");
    assert_eq!(violations(&h), 0);
    let s = &h.clients[walker].session;
    assert_eq!(s.last_acked(), s.next_seq() - 1, "every move acknowledged");
    let applied: u64 = h.hosts.iter().map(|h| h.game_counters().inputs).sum();
    assert_eq!(applied, s.next_seq() - 1, "every move applied once");
    for m in [&away, &back] {
        assert_eq!(m.updates, m.moves, "one own update per move: {m:?}");
        // 100 ms apart, +-25 ms where the connection changed grids.
        let off = m.gaps_ms.iter().filter(|&&g| !(75..=125).contains(&g));
        if rate == "20.0" {
            assert_eq!(off.count(), 0, "{rate}: {m:?}");
        } else {
            // At most one, at most a tick over the period.
            let off: Vec<&u64> = off.collect();
            assert!(
                off.len() <= 1 && off.iter().all(|&&g| g == 150),
                "{rate}: {m:?}"
            );
        }
    }
    let handed: u64 = h
        .hosts
        .iter()
        .map(|h| h.client_counters().proxy_handoffs)
        .sum();
    assert_eq!(handed, 2, "one hand-over each way");
}

/// On one shard, view batches and replies are made in the shard's
/// recycled buffers: once warm, no tick allocates a new one.
#[test]
fn view_batches_reuse_the_shards_buffers_in_steady_state() {
    let config = test_config(&["runtime.shards=1", "server.npcs=40"]);
    let mut h = Harness::new(&config);
    for i in 0..6 {
        h.connect(0, &format!("p{i}"));
    }
    // Warm: at 10 Hz updates the batches take some 90 ticks to reach
    // their steady sizes (measured: no buffer made from there to 490).
    h.run(90);
    let before = *h.hosts[0].down_pool.counters();
    let batches_before = h.hosts[0].cell_counters().view_batches;
    let in_place_before = h.hosts[0].clients.counters().views_in_place;
    h.run(40);
    let after = *h.hosts[0].down_pool.counters();
    let batches = h.hosts[0].cell_counters().view_batches - batches_before;
    // At least three in four of the 40 ticks' flushes carried something.
    let every = u64::from(config.view_params().flush_every_ticks);
    assert!(
        batches >= 6 * 30 / every,
        "the clients got batches: {batches}"
    );
    assert_eq!(
        after.made, before.made,
        "no new buffer: {before:?} -> {after:?}"
    );
    assert!(
        after.reused - before.reused >= batches,
        "{before:?} -> {after:?}"
    );
    assert_eq!(after.freed, before.freed, "the bound was not reached");
    assert!(h.hosts[0].down_pool.held_bytes() <= 8 << 20);
    // A batch that reaches an empty output is framed in place (here all
    // of them: these clients send no input, so no acknowledgement waits
    // in the output for the next update).
    let in_place = h.hosts[0].clients.counters().views_in_place - in_place_before;
    assert!(in_place * 2 >= batches, "in place: {in_place} of {batches}");
    assert_eq!(violations(&h), 0);
}
