//! One bot: the game logic of one connection driving a [`ClientSession`],
//! with no socket and no timer of its own.
//!
//! Owns [`Bot`]: its session, walk, phase and per-bot measurement state.
//! The thread's loop ([`crate::event_loop`]) owns the socket: it calls
//! [`Bot::on_tick`] when [`Bot::next_tick`] is due (one move per period,
//! maybe a hit), [`Bot::on_bytes`] with what the socket read, writes
//! [`Bot::transmit`] and reports it with [`Bot::wrote`]. Measurements go
//! into the thread's [`Interval`] through [`Hooks`]. Must not touch
//! sockets or read the clock (time is an argument).

use std::collections::BTreeMap;
use std::time::Duration;

use tessera::client::{
    CallKind, ClientSession, SessionEvent, SessionHooks, UpdateKind, UpdateSeen,
};
use tessera::core::geom::Vec3;
use tessera::core::time::Time;
use tessera::sim::bots::Bot as Walker;
use tessera::sim::rng::Rng;
use tessera::wire::client::{CallOutcome, ErrorCode};

use crate::bands::BandEdges;
use crate::driver::ThreadCtx;
use crate::latency::{latency_of, EntityCache, HandleBots, MoveBook};
use crate::measure::{record, Interval, VIOLATION_SAMPLES_MAX};
use crate::own_track::OwnTrack;
use crate::scenario::{self, pick_target, wants_attack};

/// How long a bot waits for the server to close after its Bye.
const BYE_WAIT: Duration = Duration::from_secs(2);

/// A bot is judged for silence (no view batch at all) only over at least
/// this much of the steady window: with a tick of 50 ms and its own stream
/// alone, a bot that moves gets about 20 batches a second.
pub const SILENCE_WINDOW_MIN: Duration = Duration::from_secs(1);

/// A checked bot sorts the entities its view shows into the distance bands
/// on one move tick in this many (staggered by bot index), each sample
/// standing for this many ticks: walking the whole view on every move was
/// about 7 % of loadgen's CPU in a profile at 2,000 bots, and the bands'
/// entity counts change slowly. (The view size is counted on every tick.)
pub const BAND_SAMPLE_EVERY: u64 = 10;

/// Where a bot is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Hello and Login sent (or queued), waiting for Welcome.
    Handshake,
    /// Welcomed, waiting for the own snapshot.
    Spawning,
    /// Moving on every tick.
    Moving,
    /// Stopped moving, waiting for acks before Bye.
    Settling,
    /// Bye sent, waiting for the server to close.
    Closing,
    /// Ended; the loop closes the socket.
    Done,
}

/// One bot (see the module doc).
#[derive(Debug)]
pub struct Bot {
    idx: u32,
    session: ClientSession,
    bot: Walker,
    rng: Rng,
    /// When [`Bot::on_tick`] is next due.
    next_tick: Time,
    /// This bot runs every view check (else it skips the other entities'
    /// events: see `Plan::check_fraction`).
    checked: bool,
    phase: Phase,
    /// A move was refused: restart from the server's position.
    snap_back: bool,
    spawn_deadline: Time,
    home: Option<usize>,
    own: OwnTrack,
    seen_violations: u64,
    /// The session's violations by kind, as last added to the counters.
    seen_kinds: BTreeMap<&'static str, u64>,
    welcomed_at: Option<Time>,
    /// A view batch arrived in this bot's part of the steady window.
    heard: bool,
    /// Move ticks that sampled the view size (for [`BAND_SAMPLE_EVERY`]).
    view_ticks: u64,
    /// The bot each handle of the view shows (latency matching).
    handles: HandleBots,
}

/// Measurement callbacks of one read (see [`SessionHooks`]).
struct Hooks<'a> {
    iv: &'a mut Interval,
    book: &'a MoveBook,
    cache: &'a mut EntityCache,
    handles: &'a mut HandleBots,
    own: &'a mut OwnTrack,
    /// Where the bot's own entity stands (as its view shows it), for the
    /// distance bands.
    me: Option<Vec3>,
    bands: &'a BandEdges,
}

impl SessionHooks for Hooks<'_> {
    fn on_update(&mut self, seen: &UpdateSeen) {
        let c = &mut self.iv.counters;
        match seen.kind {
            UpdateKind::Move | UpdateKind::MoveProps | UpdateKind::Props => {
                c.updates += 1;
                let band = match (self.me, seen.pos) {
                    (Some(me), Some(p)) => Some(self.bands.of(me.dist_xz(p))),
                    _ => None,
                };
                if let Some(b) = band {
                    c.bands.updates[b] += 1;
                }
                if let (Some(e), Some(p)) = (seen.entity, seen.pos) {
                    let bot = self.handles.bot_of(self.book, self.cache, seen.handle, e);
                    let lat = bot.and_then(|b| latency_of(self.book, b, p, seen.received_at));
                    if let Some(us) = lat {
                        c.updates_timed += 1;
                        record(&mut self.iv.hists.update_latency, us);
                        if let Some(b) = band {
                            record(&mut self.iv.hists.bands.latency[b], us);
                        }
                    }
                }
            }
            UpdateKind::Degraded => c.degraded_notices += 1,
            UpdateKind::Enter => c.enters += 1,
            UpdateKind::Leave => c.leaves += 1,
            UpdateKind::Resync => c.resyncs += 1,
            UpdateKind::Detail => c.details += 1,
            UpdateKind::Own(_) => {
                c.own_updates += 1;
                if let Some(gap) = self.own.update(seen.received_at) {
                    record(&mut self.iv.hists.own_gap, gap);
                }
            }
        }
    }

    fn on_input_acked(&mut self, _seq: u64, sent_at: Time, now: Time) {
        self.iv.counters.acks += 1;
        let rtt = now.saturating_since(sent_at).as_micros() as u64;
        record(&mut self.iv.hists.ack_rtt, rtt);
    }
}

impl Bot {
    /// Bot `i` of the plan, its Hello and Login queued, due at `now +
    /// handshake_timeout` (a bot not welcomed by then ends).
    ///
    /// # Errors
    /// If the session refuses the login name.
    pub fn new(ctx: &ThreadCtx, i: u32, now: Time) -> Result<Bot, tessera::client::SessionError> {
        let plan = &ctx.plan;
        let checked = plan.checks(i);
        let mut params = plan.session;
        params.view_checks = checked;
        let mut session = ClientSession::new(params, ctx.registry.clone());
        let name = format!("{}{i}", plan.name_prefix);
        let ticket = plan
            .ticket_key
            .as_ref()
            .map(|k| crate::tickets::bot_ticket(k, &name, i));
        session.connect(&name, ticket.as_deref().map(str::as_bytes))?;
        let (bot, rng) = plan.scenario.bot(&plan.world, i);
        Ok(Bot {
            idx: i,
            session,
            bot,
            rng,
            next_tick: now + plan.handshake_timeout,
            checked,
            phase: Phase::Handshake,
            snap_back: false,
            spawn_deadline: now + plan.handshake_timeout,
            home: None,
            own: OwnTrack::default(),
            seen_violations: 0,
            seen_kinds: BTreeMap::new(),
            welcomed_at: None,
            heard: false,
            view_ticks: 0,
            handles: HandleBots::default(),
        })
    }

    /// When [`Bot::on_tick`] is next due.
    pub fn next_tick(&self) -> Time {
        self.next_tick
    }

    /// Where the bot is.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// True if this bot runs every view check.
    pub fn checked(&self) -> bool {
        self.checked
    }

    /// Bytes waiting to be written.
    pub fn transmit(&self) -> &[u8] {
        self.session.transmit()
    }

    /// The first `n` bytes of [`Bot::transmit`] were written.
    pub fn wrote(&mut self, ctx: &mut ThreadCtx, n: usize) {
        self.session.advance_transmit(n);
        ctx.interval.counters.bytes_out += n as u64;
    }

    /// The socket failed before the connection was established: counted
    /// as a connect failure, no more.
    pub fn connect_failed(&mut self, ctx: &mut ThreadCtx) {
        if self.phase != Phase::Done {
            self.phase = Phase::Done;
            ctx.interval.counters.connect_failures += 1;
        }
    }

    /// The socket failed (a read or write error).
    pub fn io_error(&mut self, ctx: &mut ThreadCtx, now: Time) {
        self.end(ctx, now, "io-error");
    }

    /// Due work at `now` (call when [`Bot::next_tick`] has come): ends a
    /// handshake that timed out, waits for the own snapshot, moves (and
    /// maybe hits), says Bye when the run ends; then sets the next tick.
    pub fn on_tick(&mut self, ctx: &mut ThreadCtx, now: Time) {
        let plan = ctx.plan.clone();
        let period = Duration::from_secs_f64(plan.scenario.move_period_s());
        match self.phase {
            Phase::Handshake => {
                self.end(ctx, now, "handshake-timeout");
                return;
            }
            Phase::Spawning => {
                if !self.spawned() {
                    if now >= self.spawn_deadline {
                        self.end(ctx, now, "no-own-snapshot");
                        return;
                    }
                    self.next_tick = now;
                } else if now < plan.stop_moves_at {
                    self.phase = Phase::Moving;
                    let wait = plan.scenario.first_move_after(self.idx);
                    if wait.is_zero() {
                        self.step(ctx, now);
                    } else {
                        // The first move at the bot's own phase (the
                        // period's count starts there).
                        self.next_tick = now + wait;
                        return;
                    }
                }
            }
            Phase::Moving if now >= plan.stop_moves_at => self.phase = Phase::Settling,
            Phase::Moving => self.step(ctx, now),
            Phase::Settling | Phase::Closing | Phase::Done => {}
        }
        if self.phase == Phase::Spawning && now >= plan.stop_moves_at {
            self.phase = Phase::Settling;
        }
        if self.phase == Phase::Settling && now >= plan.close_at {
            let _ = self.session.send_bye(now);
            self.phase = Phase::Closing;
        }
        if let Some(closed) = self.own.close_if_due(now, self.phase == Phase::Moving) {
            let iv = &mut ctx.interval;
            if closed.gap_us > 0 {
                record(&mut iv.hists.migration_gap, closed.gap_us);
            }
            iv.counters.migration_gap_overflow += u64::from(closed.overflow);
        }
        self.next_tick = self.next_tick + period;
        if self.next_tick <= now {
            ctx.interval.counters.late_ticks += 1;
            self.next_tick = now + period;
        }
        if self.phase == Phase::Closing {
            // After Bye the server closes; give it a moment, then go.
            if now >= plan.close_at + BYE_WAIT {
                self.end(ctx, now, "bye-unanswered");
                return;
            }
            self.next_tick = now + Duration::from_millis(100);
        }
    }

    /// True once the own snapshot arrived; the bot then starts where the
    /// server spawned it.
    fn spawned(&mut self) -> bool {
        let Some(own) = self.session.view().and_then(|v| v.own()) else {
            return false;
        };
        let p = own.replica.core().pos;
        self.bot.pose.pos = Vec3::ground(p.x, p.z);
        true
    }

    /// One move (and maybe a hit).
    fn step(&mut self, ctx: &mut ThreadCtx, now: Time) {
        let plan = ctx.plan.clone();
        let dt = plan.scenario.move_period_s();
        let area = plan.scenario.walk_area(&plan.world);
        if std::mem::take(&mut self.snap_back) {
            // Like a game client: the server's position wins after a refusal.
            self.spawned();
        }
        if self.session.space_pending() {
            return; // no Move until SpaceChanged (old-space coordinates)
        }
        if wants_attack(&mut self.rng, plan.space_rate, dt) {
            self.hop_space(ctx);
            return;
        }
        let before = self.bot.clone();
        let t_s = now.0 as f64 / 1e6;
        let s = scenario::step(&mut self.bot, &mut self.rng, &area, t_s, dt);
        let pos = Vec3::ground(s.pose.pos.x, s.pose.pos.z);
        let iv = &mut ctx.interval;
        match self.session.send_move(now, pos, s.pose.yaw as f32) {
            Ok(_) => {
                ctx.book.record(self.idx, pos, now);
                iv.counters.moves += 1;
            }
            Err(_) => {
                self.bot = before;
                iv.counters.send_refused += 1;
                return;
            }
        }
        let home = plan.cells.track(self.home, pos);
        if self.home.is_some() && home != self.home {
            iv.counters.crossings += 1;
            self.own.crossed(now, plan.migration_window);
        }
        self.home = home;
        let Some(view) = self.session.view() else {
            return;
        };
        if !self.checked {
            // The view shows only the own entity: nothing to sample or hit.
            return;
        }
        let shown = view.shown();
        iv.counters.view_size_sum += shown.len() as u64;
        iv.counters.view_size_samples += 1;
        self.view_ticks += 1;
        let me = view.own().map(|o| o.replica.core().pos);
        let sample_bands = (self.view_ticks + u64::from(self.idx)) % BAND_SAMPLE_EVERY == 0;
        if let Some(me) = me.filter(|_| sample_bands) {
            for s in shown.values() {
                let b = plan.bands.of(me.dist_xz(s.replica.core().pos));
                iv.counters.bands.entity_samples[b] += BAND_SAMPLE_EVERY;
            }
        }
        if !wants_attack(&mut self.rng, plan.attack_rate, dt) {
            return;
        }
        // Only targets within reach (what the view shows lags a few ticks).
        let reach2 = (plan.hit_range_m * 0.8).powi(2);
        let near = |e: &&tessera::core::view::Shown| e.replica.core().pos.dist2_xz(pos) <= reach2;
        let Some(k) = pick_target(&mut self.rng, shown.values().filter(near).count()) else {
            iv.counters.no_target += 1;
            return;
        };
        let handle = shown
            .iter()
            .filter(|(_, e)| near(e))
            .nth(k)
            .map(|(h, _)| *h)
            .expect("k < count");
        match self.session.send_hit(now, handle, 1) {
            Ok(_) => iv.counters.hits += 1,
            Err(_) => iv.counters.send_refused += 1,
        }
    }

    /// Scenario `spaces`: from the world into a town or a dungeon (by
    /// type), from an instance back to the world.
    fn hop_space(&mut self, ctx: &mut ThreadCtx) {
        const WORLD: u32 = 1;
        let in_world = self.session.space().is_none_or(|s| s.1 == WORLD);
        let to = match (in_world, self.rng.bool(0.5)) {
            (false, _) => WORLD,
            (true, true) => 2,
            (true, false) => 3,
        };
        let c = &mut ctx.interval.counters;
        match self.session.send_enter_space(0, to) {
            Ok(()) => c.space_requests += 1,
            Err(_) => c.send_refused += 1,
        }
    }

    /// The socket ended (end of stream): "bye" after our Bye, else "eof".
    pub fn on_eof(&mut self, ctx: &mut ThreadCtx, now: Time) {
        if self.phase == Phase::Done {
            return;
        }
        self.session.handle_eof(now);
        self.drain_events(ctx, now);
        let why = if self.phase == Phase::Closing {
            "bye"
        } else {
            "eof"
        };
        self.end(ctx, now, why);
    }

    /// `bytes` arrived from the server at `now`: decoded, checked (every
    /// view rule for a checked bot), measured, events handled.
    pub fn on_bytes(&mut self, ctx: &mut ThreadCtx, now: Time, bytes: &[u8]) {
        if self.phase == Phase::Done {
            return;
        }
        {
            let iv = &mut ctx.interval;
            iv.counters.bytes_in += bytes.len() as u64;
            let me = self
                .session
                .view()
                .and_then(|v| v.own())
                .map(|o| o.replica.core().pos);
            let mut hooks = Hooks {
                iv,
                book: &ctx.book,
                cache: &mut ctx.cache,
                handles: &mut self.handles,
                own: &mut self.own,
                me,
                bands: &ctx.plan.bands,
            };
            let batches = self.session.counters().batches;
            self.session.handle_bytes(now, bytes, &mut hooks);
            let got = self.session.counters().batches - batches;
            ctx.interval.counters.batches += got;
            if got > 0 && self.in_window(ctx, now) {
                self.heard = true;
            }
        }
        self.drain_events(ctx, now);
        self.check_violations(ctx);
    }

    fn drain_events(&mut self, ctx: &mut ThreadCtx, now: Time) {
        while let Some(ev) = self.session.poll_event() {
            let iv = &mut ctx.interval;
            let c = &mut iv.counters;
            match ev {
                SessionEvent::Welcomed(w) => {
                    ctx.book.register(self.idx, w.entity);
                    c.connects += 1;
                    c.connects_checked += u64::from(self.checked);
                    self.welcomed_at = Some(now);
                    self.phase = Phase::Spawning;
                    self.spawn_deadline = now + ctx.plan.handshake_timeout;
                    self.next_tick = now;
                }
                SessionEvent::CallDone {
                    kind: CallKind::Hit,
                    outcome,
                    sent_at,
                    at,
                    ..
                } => {
                    match outcome {
                        CallOutcome::HitLanded { .. } => c.hits_landed += 1,
                        CallOutcome::HitExpired => c.hits_expired += 1,
                        CallOutcome::Refused(r) => {
                            c.hits_refused += 1;
                            let key = format!("hit-refused:{}", r.rule());
                            *c.errors.entry(key).or_default() += 1;
                        }
                        CallOutcome::Applied => c.hits_refused += 1,
                    }
                    let rtt = at.saturating_since(sent_at).as_micros() as u64;
                    record(&mut iv.hists.hit_rtt, rtt);
                }
                SessionEvent::SpaceChanged { pos, .. } => {
                    // The walk goes on from the arrival point.
                    self.bot.pose.pos = Vec3::ground(pos.x, pos.z);
                    c.space_changes += 1;
                }
                SessionEvent::CallDone { .. } | SessionEvent::Pong { .. } => {}
                SessionEvent::Refused { code, .. } => {
                    *c.errors.entry(code.rule().to_owned()).or_default() += 1;
                    if code == ErrorCode::MoveTooFast {
                        self.snap_back = true;
                    }
                }
                SessionEvent::Closed { code, .. } => {
                    if self.phase != Phase::Closing {
                        let why = code.map_or("closed", |c| c.rule());
                        self.end(ctx, now, why);
                    }
                }
            }
        }
    }

    fn check_violations(&mut self, ctx: &mut ThreadCtx) {
        let total = self.session.violation_count();
        if total <= self.seen_violations {
            return;
        }
        let iv = &mut ctx.interval;
        iv.counters.violations += total - self.seen_violations;
        self.seen_violations = total;
        for (kind, n) in self.session.violation_kinds() {
            let seen = self.seen_kinds.entry(kind).or_default();
            if n > *seen {
                *iv.counters
                    .violation_kinds
                    .entry(kind.to_owned())
                    .or_default() += n - *seen;
                *seen = n;
            }
        }
        if iv.violation_samples.len() < VIOLATION_SAMPLES_MAX {
            let s = &self.session;
            let text = match (
                s.violations().last(),
                s.view().and_then(|v| v.violations().last()),
            ) {
                (Some(v), _) => format!("bot {}: session {:?}", self.idx, v.rule),
                (None, Some(v)) => format!(
                    "bot {}: view {:?} (handle {:?})",
                    self.idx, v.rule, v.handle
                ),
                (None, None) => format!("bot {}: violation", self.idx),
            };
            iv.violation_samples.push(text);
        }
    }

    /// This bot's part of the steady window: from the ramp's end (or its
    /// Welcome, if later) until the bots stop moving.
    fn window(&self, ctx: &ThreadCtx) -> Option<(Time, Time)> {
        let plan = &ctx.plan;
        let start = (Time(0) + plan.ramp).max(self.welcomed_at?);
        Some((start, plan.stop_moves_at))
    }

    fn in_window(&self, ctx: &ThreadCtx, now: Time) -> bool {
        self.window(ctx)
            .is_some_and(|(start, stop)| now >= start && now <= stop)
    }

    /// True if the bot was welcomed, was connected for at least
    /// [`SILENCE_WINDOW_MIN`] of the steady window until `now`, and got no
    /// view batch in it.
    fn silent(&self, ctx: &ThreadCtx, now: Time) -> bool {
        let Some((start, stop)) = self.window(ctx) else {
            return false;
        };
        !self.heard && now.min(stop).saturating_since(start) >= SILENCE_WINDOW_MIN
    }

    /// Ends the connection: `why` is "bye" for a normal close.
    fn end(&mut self, ctx: &mut ThreadCtx, now: Time, why: &str) {
        if self.phase == Phase::Done {
            return;
        }
        // What the last read or the end of the stream broke (a truncated
        // frame) counts too.
        self.check_violations(ctx);
        let was = self.phase;
        self.phase = Phase::Done;
        let silent = self.silent(ctx, now);
        let c = &mut ctx.interval.counters;
        c.silent += u64::from(silent);
        match was {
            Phase::Handshake => c.connect_failures += 1,
            Phase::Settling | Phase::Closing => c.closed += 1,
            _ => c.disconnects += 1,
        }
        if why != "bye" {
            *c.disconnect_reasons.entry(why.to_owned()).or_default() += 1;
        }
    }
}
