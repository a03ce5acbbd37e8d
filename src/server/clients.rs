//! The client connections of one shard, between the runtime's
//! [`ClientPort`] and the cell host: sessions, logins and spawns, inputs to
//! proxies, downstream to sockets, disconnects.
//!
//! Owns [`Clients`] (one gateway [`Session`] per connection, the entity of
//! each, the spawn rule, counters) and the `impl CellHost` steps that use
//! it. Each tick (see `host.rs` for the order):
//!
//! 1. port events: `Opened` starts a session, `Closed` ends one (peer gone,
//!    socket error, slow reader, shutdown);
//! 2. readable connections: frames go through the session; a Login spawns
//!    an avatar ([`CellHost::login`]), an input goes to the proxy, a Bye or
//!    Kick closes the connection;
//! 3. downstream: each proxy's ordered client data goes to its session
//!    (view batches become ViewBatch frames, in place when they can:
//!    `Session::take_down`; acks and results pass); the buffers the
//!    sessions are done with go back to the shard's downstream pool;
//! 4. writes: each session's frames of the tick, one `send` per
//!    connection; a full send queue makes the port close it (slow reader).
//!
//! Ending a connection destroys its avatar everywhere (the proxy sends a
//! destroy on the inputs' path and is dropped), except a dropped one
//! (peer gone, socket error, slow reader, idle timeout): its avatar and
//! session wait `gateway.reconnect_window_ms` for the account to log in
//! again.
//!
//! # Accounts
//! A login names an account: the ticket's (`gateway.auth = "hmac"`), or
//! the name (`"none"`). One session per account: a login of an account
//! that has an avatar here takes it over ([`Session::reattach`]): the old
//! connection gets what was queued, then Kick `replaced`, and is closed;
//! the real's observer restarts so the new client gets a full view.
//! Accounts and used tickets are node-wide ([`Door`]): a login whose
//! account's avatar is served by another shard (its proxy's: the shard
//! that accepted it, or its real's, `follow.rs`) hands the connection
//! there ([`ClientPort::hand_off`], with a note naming the checked
//! account), and that shard takes the avatar over as above
//! (`PortEvent::Adopted`); a ticket replayed on any shard is refused.
//!
//! Must not touch sockets (only the port) or cells (only through the
//! host's routing and spawn).

use rustc_hash::FxHashMap; // tidy: allow(HashMap): no random seed; by_entity is looked up, iterated only by an order-free check
use std::collections::BTreeMap;
use std::sync::Arc;

use crate::core::cell::{CellError, Outgoing};
use crate::core::entity::EntityType;
use crate::core::ids::EntityId;
use crate::core::proxy::Proxy;
use crate::core::time::Time;
use crate::shard::{ClientPort, CloseReason, ConnId, MetricSink, PortError, PortEvent};
use crate::wire::client::{ErrorCode, ServerMsg};

use super::conn_table::ConnTable;
use super::door::{Claim, Door, Seat};
use super::gateway::{
    refused_metric, Closing, Disconnect, GatewayParams, LoginRefusal, Session, SessionPhase, Step,
    TicketKey, RULES,
};
use super::host::{entity_id, list_new_proxy, proxy_params, CellHost, Spawn, WireSource};
use super::spawn::{new_avatar, SpawnRule};
use crate::game::relay::GameInput;

/// What the client side of a shard counts (exported as metrics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientCounters {
    /// Connections accepted here (one handed over from another shard is
    /// counted there).
    pub opened: u64,
    /// Avatars spawned for logins.
    pub logins: u64,
    /// Connections ended, by [`Disconnect`] index.
    pub disconnects: [u64; 10],
    /// Logins refused, by [`LoginRefusal::index`].
    pub login_refused: [u64; 7],
    /// Logins that took over their account's avatar (from a live or a
    /// dropped connection).
    pub takeovers: u64,
    /// Dropped avatars removed when their reconnect window ended.
    pub reconnect_expired: u64,
    /// Logins handed to the shard of their account's avatar.
    pub handoffs: u64,
    /// Handed-over logins taken up here.
    pub adopted: u64,
    /// New accounts refused: `gateway.accounts_max` seated on the node.
    pub accounts_full: u64,
    /// Refusals of sessions that ended, by `ErrorCode::code`.
    pub refused_closed: [u64; RULES],
    /// Downstream messages the session did not understand.
    pub bad_downstream: u64,
    /// View batches framed in place: taken as the session's output, not
    /// copied (`Session::take_down`).
    pub views_in_place: u64,
    /// Connections handed, with their proxy, to their real's shard.
    pub proxy_handoffs: u64,
    /// Connections taken up here with their proxy (following their real).
    pub proxy_adopted: u64,
    /// Proxy hand-overs whose connection did not arrive (dropped).
    pub proxy_lost: u64,
    /// Spawns that failed in their cell (the client is kicked).
    pub spawn_failed: u64,
}

/// One connection.
#[derive(Debug)]
pub(super) struct Conn {
    pub(super) session: Session,
    pub(super) entity: Option<EntityId>,
    pub(super) account: Option<String>,
}

/// The session and avatar of a dropped connection, waiting for its account.
#[derive(Debug)]
pub(super) struct Detached {
    pub(super) session: Session,
    pub(super) account: String,
    pub(super) until: Time,
}

/// How many times a login may be handed between shards (a seat that
/// moved while the connection was on its way: rare, never a loop).
const HANDOVER_HOPS_MAX: u8 = 2;

/// A checked login on its way to the shard of its account's avatar (the
/// note of [`ClientPort::hand_off`]).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Handover {
    /// Hand-offs so far.
    hops: u8,
    account: String,
    name: String,
}

impl Handover {
    /// `hops, name_len, name, account` (a name is at most 64 bytes).
    fn encode(&self) -> Vec<u8> {
        let name = self.name.as_bytes();
        let len = u8::try_from(name.len()).expect("a checked name fits a byte");
        let mut b = Vec::with_capacity(2 + name.len() + self.account.len());
        b.extend_from_slice(&[self.hops, len]);
        b.extend_from_slice(name);
        b.extend_from_slice(self.account.as_bytes());
        b
    }

    fn decode(b: &[u8]) -> Option<Handover> {
        let (&hops, rest) = b.split_first()?;
        let (&len, rest) = rest.split_first()?;
        let (name, account) = rest.split_at_checked(usize::from(len))?;
        Some(Handover {
            hops,
            account: String::from_utf8(account.to_vec()).ok()?,
            name: String::from_utf8(name.to_vec()).ok()?,
        })
    }
}

/// How logins are checked (`gateway.auth`).
#[derive(Debug)]
pub struct Auth {
    /// The ticket key (`"hmac"`), or none (`"none"`: the name is the account).
    pub key: Option<TicketKey>,
    /// Longest ticket lifetime accepted, s.
    pub ttl_max_s: u64,
    /// Unix time (s) at `Time::ZERO`.
    pub unix_at_start_s: u64,
}

/// A host action taken out of a session step (owned, so the host can act
/// with its whole state).
#[derive(Debug)]
enum Action {
    Login(String, Option<Vec<u8>>),
    EnterSpace(u32, u32),
    Close(Closing),
}

/// The client side of one shard (see the module doc).
#[derive(Debug)]
pub struct Clients {
    pub(super) params: GatewayParams,
    avatar: Arc<EntityType>,
    spawn: SpawnRule,
    next_player: u64,
    /// By port slot (a lookup per message; iterated in id order).
    pub(super) conns: ConnTable<Conn>,
    pub(super) by_entity: FxHashMap<EntityId, ConnId>, // tidy: allow(HashMap): no random seed; lookups, order-free checks
    /// The node's accounts and used tickets (shared by every shard).
    pub(super) door: Arc<Door>,
    /// At most `connections_max` (a dropped avatar past it is removed).
    pub(super) detached: BTreeMap<EntityId, Detached>,
    detached_max: usize,
    auth: Auth,
    scratch_conns: Vec<ConnId>,
    scratch_outs: Vec<(EntityId, Outgoing)>,
    actions: Vec<Action>,
    /// Where an input is encoded before its shared copy is made.
    scratch_input: Vec<u8>,
    pub(super) counters: ClientCounters,
}

impl Clients {
    /// No connections yet; players get entity numbers from `first_player`;
    /// at most `detached_max` dropped avatars wait for their account.
    pub fn new(
        params: GatewayParams,
        avatar: Arc<EntityType>,
        spawn: SpawnRule,
        first_player: u64,
        auth: Auth,
        detached_max: usize,
        door: Arc<Door>,
    ) -> Clients {
        Clients {
            params,
            avatar,
            spawn,
            next_player: first_player,
            conns: ConnTable::default(),
            by_entity: FxHashMap::default(), // tidy: allow(HashMap): see the field
            door,
            detached: BTreeMap::new(),
            detached_max,
            auth,
            scratch_conns: Vec::new(),
            scratch_outs: Vec::new(),
            actions: Vec::new(),
            scratch_input: Vec::new(),
            counters: ClientCounters::default(),
        }
    }

    /// The counters.
    pub fn counters(&self) -> &ClientCounters {
        &self.counters
    }

    /// Connections with a session.
    pub fn len(&self) -> usize {
        self.conns.len()
    }

    /// True with no connection.
    pub fn is_empty(&self) -> bool {
        self.conns.is_empty()
    }

    /// Dropped avatars waiting for their account.
    pub fn detached(&self) -> usize {
        self.detached.len()
    }

    /// The account a login names, checked (see the module doc).
    fn account(
        &mut self,
        now: Time,
        name: &str,
        token: Option<&[u8]>,
    ) -> Result<String, LoginRefusal> {
        if !super::gateway::check_name(name) {
            return Err(LoginRefusal::BadName);
        }
        let a = &mut self.auth;
        let Some(key) = &a.key else {
            return Ok(name.to_owned());
        };
        let unix_s = a.unix_at_start_s + now.as_micros() / 1_000_000;
        let token = token.unwrap_or_default();
        let (ticket, mac) = key
            .verify(token, unix_s, a.ttl_max_s)
            .map_err(LoginRefusal::Ticket)?;
        self.door
            .use_ticket(mac, ticket.expires_unix_s, unix_s)
            .map_err(LoginRefusal::Ticket)?;
        Ok(ticket.account)
    }

    /// Refusals by rule: ended sessions plus live ones.
    pub fn refused(&self) -> [u64; RULES] {
        let mut r = self.counters.refused_closed;
        for c in self.conns.values() {
            for (a, b) in r.iter_mut().zip(c.session.refused()) {
                *a += b;
            }
        }
        r
    }
}

fn disconnect_of(reason: CloseReason) -> Disconnect {
    match reason {
        CloseReason::PeerClosed => Disconnect::PeerClosed,
        CloseReason::IoError => Disconnect::IoError,
        CloseReason::SlowReader => Disconnect::SlowReader,
        CloseReason::ClosedByApp => Disconnect::Kicked,
        CloseReason::Shutdown => Disconnect::Shutdown,
        CloseReason::TooManyConnections => Disconnect::TooManyConnections,
    }
}

impl CellHost {
    /// Step 1: opened and closed connections.
    pub(super) fn port_events(&mut self, now: Time, port: &mut ClientPort) {
        while let Some(ev) = port.poll_event() {
            match ev {
                PortEvent::Opened { conn, .. } => {
                    let mut session =
                        Session::new(self.clients.params, self.clients.avatar.clone(), now);
                    session.set_world_type(self.spaces.world_type);
                    let c = Conn {
                        session,
                        entity: None,
                        account: None,
                    };
                    self.clients.conns.insert(conn, c);
                    self.clients.counters.opened += 1;
                }
                PortEvent::Adopted { conn, note, .. } => {
                    if let Some(e) = super::follow::decode_note(&note) {
                        self.adopt_proxy(port, conn, e);
                        continue;
                    }
                    let mut session =
                        Session::new(self.clients.params, self.clients.avatar.clone(), now);
                    session.set_world_type(self.spaces.world_type);
                    session.login_taken();
                    let c = Conn {
                        session,
                        entity: None,
                        account: None,
                    };
                    // Counted as opened where it was accepted (node-wide,
                    // opened = ended + open).
                    self.clients.conns.insert(conn, c);
                    self.clients.counters.adopted += 1;
                    match Handover::decode(&note) {
                        Some(h) => self.seat_login(now, port, conn, &h),
                        None => self.refuse(conn, ErrorCode::ServerFull, "bad hand-over"),
                    }
                }
                PortEvent::Closed { conn, reason } => {
                    if let Some(c) = self.clients.conns.remove(&conn) {
                        self.end_conn(now, c, disconnect_of(reason));
                    }
                }
            }
        }
    }

    /// Step 2: frames from every readable connection. Inputs go to the
    /// proxy as the session passes them (its entity and proxy are looked up
    /// once per connection); the other steps are taken after the frames,
    /// in order (a Login or a close ends the frames read this tick).
    pub(super) fn read_clients(&mut self, now: Time, port: &mut ClientPort) {
        let mut ids = std::mem::take(&mut self.clients.scratch_conns);
        ids.clear();
        ids.extend(port.readable());
        for &id in &ids {
            let CellHost {
                clients:
                    Clients {
                        conns,
                        actions,
                        scratch_input,
                        ..
                    },
                proxies,
                busy_proxies,
                ..
            } = self;
            let Some(conn) = conns.get_mut(&id) else {
                continue;
            };
            let e = conn.entity;
            let mut proxy = e.and_then(|e| proxies.get_mut(&e));
            let mut sent = false;
            let used = conn.session.handle_input(now, port.input(id), |_, step| {
                actions.push(match step {
                    Step::None => return,
                    Step::Input(i) => {
                        if let Some(p) = proxy.as_deref_mut() {
                            p.send_input(now, i.to_payload_in(scratch_input));
                            sent = true;
                        }
                        return;
                    }
                    Step::Login { name, token } => {
                        Action::Login(name.to_owned(), token.map(<[u8]>::to_vec))
                    }
                    Step::EnterSpace { space, type_id } => Action::EnterSpace(space, type_id),
                    Step::Close(c) => Action::Close(c),
                })
            });
            if let (true, Some(e), Some(p)) = (sent, e, proxy) {
                if p.list() {
                    busy_proxies.push(e);
                }
            }
            port.consume(id, used);
            if self.clients.actions.is_empty() {
                continue;
            }
            let mut actions = std::mem::take(&mut self.clients.actions);
            for a in actions.drain(..) {
                match a {
                    Action::Login(name, token) => {
                        self.login(now, port, id, &name, token.as_deref())
                    }
                    Action::EnterSpace(space, type_id) => {
                        if let Some(e) = self.clients.conns.get(&id).and_then(|c| c.entity) {
                            self.request_space(e, space, type_id);
                        }
                    }
                    Action::Close(c) => self.close_conn(now, port, id, c),
                }
            }
            self.clients.actions = actions;
        }
        self.clients.scratch_conns = ids;
    }

    /// A login: the name and ticket checked, then seated
    /// (`seat_login`): a new avatar at the spawn rule's point,
    /// created in the cell there (here, or by a spawn message to that
    /// cell's shard, which precedes every input on that FIFO channel), its
    /// proxy here, Welcome at once; or a takeover, here or on the shard of
    /// the account's avatar.
    fn login(
        &mut self,
        now: Time,
        port: &mut ClientPort,
        id: ConnId,
        name: &str,
        token: Option<&[u8]>,
    ) {
        let account = match self.clients.account(now, name, token) {
            Ok(a) => a,
            Err(why) => {
                self.clients.counters.login_refused[why.index()] += 1;
                if let Some(conn) = self.clients.conns.get_mut(&id) {
                    let text = match why {
                        LoginRefusal::BadName => "bad name".to_owned(),
                        LoginRefusal::Ticket(e) => e.to_string(),
                    };
                    let _ = conn.session.refuse_login(ErrorCode::LoginRefused, &text);
                }
                return;
            }
        };
        let h = Handover {
            hops: 0,
            account,
            name: name.to_owned(),
        };
        self.seat_login(now, port, id, &h);
    }

    /// Refuses connection `id`'s login with `code` (Error, then closed).
    fn refuse(&mut self, id: ConnId, code: ErrorCode, text: &str) {
        if let Some(conn) = self.clients.conns.get_mut(&id) {
            let _ = conn.session.refuse_login(code, text);
        }
    }

    /// A checked login of `h.account` on connection `id`: a new account
    /// gets an avatar here, one seated here takes its avatar over, one
    /// seated on another shard is handed there (see the module doc).
    fn seat_login(&mut self, now: Time, port: &mut ClientPort, id: ConnId, h: &Handover) {
        let me = self.ctx.shard.index;
        let entity = entity_id(me, self.clients.next_player);
        let seat = Seat { shard: me, entity };
        match self.clients.door.claim(&h.account, seat) {
            Claim::New => self.clients.next_player += 1,
            Claim::Held(s) if s.shard == me => return self.take_over(now, port, id, s.entity),
            Claim::Held(s) if h.hops < HANDOVER_HOPS_MAX => {
                return self.hand_over(port, id, s.shard, h)
            }
            Claim::Held(_) => {
                return self.refuse(id, ErrorCode::ServerFull, "the account is moving; retry")
            }
            Claim::Full => {
                self.clients.counters.accounts_full += 1;
                return self.refuse(id, ErrorCode::ServerFull, "too many accounts logged in");
            }
        }
        let (account, name) = (h.account.clone(), h.name.as_str());
        let world = self.tree.world();
        let pos = if self.clients.params.spawn_local {
            let (tree, me) = (&self.tree, self.ctx.shard);
            let local = |p: crate::core::geom::Vec3| tree.shard_of(tree.cell_at(p)) == Some(me);
            self.clients.spawn.next_where(&world, local)
        } else {
            self.clients.spawn.next(&world)
        };
        let cell = self.tree.cell_at(pos);
        let spawn = Spawn {
            entity,
            cell,
            x: pos.x,
            z: pos.z,
            name: name.to_owned(),
        };
        let ok = match self.tree.shard_of(cell) {
            Some(s) if s == self.ctx.shard => self.spawn_here(now, &spawn).is_ok(),
            Some(s) if s.node == self.ctx.shard.node && s.index < self.ctx.shards => {
                self.lanes[usize::from(s.index)].spawns.push(spawn);
                true
            }
            _ => false,
        };
        let proxy = Proxy::new(entity, cell, 0, proxy_params()).expect("valid proxy params");
        let Some(conn) = self.clients.conns.get_mut(&id) else {
            unreachable!("a login is read from a listed connection");
        };
        if !ok {
            self.clients.counters.spawn_failed += 1;
            let _ = conn
                .session
                .refuse_login(ErrorCode::ServerFull, "no cell for the spawn");
            self.clients.door.release(&account, entity);
            return;
        }
        list_new_proxy(&mut self.proxies, &mut self.busy_proxies, entity, proxy);
        self.follow.moved.push(entity);
        conn.session.welcome(now, entity, pos);
        conn.entity = Some(entity);
        conn.account = Some(account);
        self.clients.by_entity.insert(entity, id);
        self.clients.counters.logins += 1;
    }

    /// Connection `id` moves to shard `to`, which serves its account
    /// (the login's checks are not repeated there: the note carries the
    /// account).
    fn hand_over(&mut self, port: &mut ClientPort, id: ConnId, to: u16, h: &Handover) {
        let Some(conn) = self.clients.conns.remove(&id) else {
            return;
        };
        let k = &mut self.clients.counters;
        for (a, b) in k.refused_closed.iter_mut().zip(conn.session.refused()) {
            *a += b;
        }
        let note = Handover {
            hops: h.hops + 1,
            account: h.account.clone(),
            name: h.name.clone(),
        }
        .encode();
        if port.hand_off(id, to, note).is_ok() {
            k.handoffs += 1;
        }
    }

    /// Connection `id` takes over `entity`, its account's avatar: the old
    /// connection (if live) gets its queued output and Kick `replaced` and
    /// is closed; the session moves here and the real's observer restarts.
    fn take_over(&mut self, now: Time, port: &mut ClientPort, id: ConnId, entity: EntityId) {
        let k = &mut self.clients;
        let old = match k.by_entity.get(&entity).copied() {
            Some(old_id) => {
                let mut old = k.conns.remove(&old_id).expect("an indexed connection");
                let mut out = old.session.take_output();
                ServerMsg::Kick {
                    code: ErrorCode::Replaced,
                    text: "the account logged in on another connection",
                }
                .encode(&mut out);
                let _ = port.send(old_id, &out);
                port.close(old_id);
                k.counters.disconnects[Disconnect::Replaced as usize] += 1;
                (old.session, old.account)
            }
            None => match k.detached.remove(&entity) {
                Some(d) => (d.session, Some(d.account)),
                // Its proxy is on its way here (following its real).
                None => {
                    return self.refuse(id, ErrorCode::ServerFull, "the account is moving; retry")
                }
            },
        };
        let Some(conn) = k.conns.get_mut(&id) else {
            return;
        };
        for (a, b) in k
            .counters
            .refused_closed
            .iter_mut()
            .zip(conn.session.refused())
        {
            *a += b;
        }
        conn.session = old.0;
        conn.session.reattach(now);
        conn.entity = Some(entity);
        conn.account = old.1;
        k.by_entity.insert(entity, id);
        k.counters.takeovers += 1;
        if let Some(p) = self.proxies.get_mut(&entity) {
            p.send_input(now, GameInput::Resync { seq: 0 }.to_payload());
            if p.list() {
                self.busy_proxies.push(entity);
            }
        }
    }

    /// Creates a spawned avatar in its cell on this shard.
    ///
    /// # Errors
    /// The cell's refusal, or `WrongCell` if the cell is not here.
    pub(super) fn spawn_here(&mut self, now: Time, s: &Spawn) -> Result<(), CellError> {
        let pos = crate::core::geom::Vec3::ground(s.x, s.z);
        let entity = new_avatar(s.entity, &self.clients.avatar, pos, &s.name);
        match self.cells.get_mut(&s.cell) {
            Some(cell) => cell.create_real(now, entity, true, 0),
            None => Err(CellError::WrongCell(s.cell)),
        }
    }

    /// The app closes `id` (Bye, Kick): what is queued is written, then
    /// the avatar is destroyed.
    fn close_conn(&mut self, now: Time, port: &mut ClientPort, id: ConnId, c: Closing) {
        let Some(mut conn) = self.clients.conns.remove(&id) else {
            return;
        };
        let _ = port.send(id, conn.session.output());
        conn.session.clear_output();
        port.close(id);
        let reason = match c {
            Closing::Bye => Disconnect::Bye,
            Closing::Kicked(_) => Disconnect::Kicked,
            Closing::HandshakeTimeout => Disconnect::HandshakeTimeout,
            Closing::IdleTimeout => Disconnect::IdleTimeout,
            Closing::Replaced => Disconnect::Replaced,
        };
        self.end_conn(now, conn, reason);
    }

    /// A connection ended: counted; its avatar waits for its account if
    /// the connection dropped (see the module doc), else is destroyed.
    fn end_conn(&mut self, now: Time, conn: Conn, why: Disconnect) {
        let k = &mut self.clients;
        k.counters.disconnects[why as usize] += 1;
        let Some(e) = conn.entity else {
            for (a, b) in k
                .counters
                .refused_closed
                .iter_mut()
                .zip(conn.session.refused())
            {
                *a += b;
            }
            return;
        };
        k.by_entity.remove(&e);
        let dropped = matches!(
            why,
            Disconnect::PeerClosed
                | Disconnect::IoError
                | Disconnect::SlowReader
                | Disconnect::IdleTimeout
        );
        match conn.account {
            Some(account)
                if dropped
                    && !k.params.reconnect_window.is_zero()
                    && k.detached.len() < k.detached_max =>
            {
                let until = now + k.params.reconnect_window;
                k.detached.insert(
                    e,
                    Detached {
                        session: conn.session,
                        account,
                        until,
                    },
                );
            }
            account => {
                if let Some(a) = account {
                    k.door.release(&a, e);
                }
                self.destroy_avatar(now, e, conn.session);
            }
        }
    }

    /// Removes `e` (a player's avatar) from the world; its session's
    /// refusals are kept in the counters.
    fn destroy_avatar(&mut self, now: Time, e: EntityId, session: Session) {
        let k = &mut self.clients.counters;
        for (a, b) in k.refused_closed.iter_mut().zip(session.refused()) {
            *a += b;
        }
        self.space_left(session.travel().counted);
        if let Some(mut p) = self.proxies.remove(&e) {
            self.proxy_gone(e);
            p.send_destroy(now);
            while let Some(o) = p.poll_output() {
                self.route(WireSource::Proxy(e), o);
            }
        }
    }

    /// The session of `entity`'s client on this shard.
    pub(super) fn session_of(&self, entity: EntityId) -> Option<&Session> {
        let id = self.clients.by_entity.get(&entity)?;
        self.clients.conns.get(id).map(|c| &c.session)
    }

    /// The session of `entity`'s client on this shard, mutable.
    pub(super) fn session_of_mut(&mut self, entity: EntityId) -> Option<&mut Session> {
        let Some(id) = self.clients.by_entity.get(&entity) else {
            return self
                .clients
                .detached
                .get_mut(&entity)
                .map(|d| &mut d.session);
        };
        self.clients.conns.get_mut(id).map(|c| &mut c.session)
    }

    /// Step 3: each proxy's ordered client data to its session (a
    /// dropped one keeps its books and writes nowhere); the buffers go
    /// back to the pool.
    pub(super) fn downstream(&mut self) {
        let tick = self.tick;
        let pool = &mut self.down_pool;
        for (e, d) in &mut self.clients.detached {
            let Some(p) = self.proxies.get_mut(e) else {
                continue;
            };
            while let Some((_, data)) = p.poll_client() {
                d.session.handle_down(tick, &data);
                pool.give(data.into_buffer());
            }
            d.session.end_tick();
            d.session.clear_output();
        }
        // Only proxies given work can hold client data (see `busy_proxies`):
        // each listed once, in the order they were given it.
        let mut busy = std::mem::take(&mut self.busy_proxies);
        for e in busy.drain(..) {
            // One probe of each table a proxy (the proxy found once, not
            // again for its data).
            let Some(p) = self.proxies.get_mut(&e) else {
                continue;
            };
            p.unlist();
            let Some(&id) = self.clients.by_entity.get(&e) else {
                continue;
            };
            let Some(c) = self.clients.conns.get_mut(&id) else {
                continue;
            };
            while let Some((_, data)) = p.poll_client() {
                let t = c.session.take_down(tick, data);
                self.down_pool.give(t.spare);
                let k = &mut self.clients.counters;
                k.bad_downstream += u64::from(!t.understood);
                k.views_in_place += u64::from(t.in_place);
            }
        }
        debug_assert!(
            (self.clients.by_entity.iter())
                .all(|(e, _)| self.proxies.get(e).is_none_or(|p| p.client_is_empty())),
            "client data left in a proxy no one marked busy"
        );
        // Whatever marked a proxy while this ran waits for the next tick.
        busy.append(&mut self.busy_proxies);
        self.busy_proxies = busy;
    }

    /// Step 4: each session's frames of this tick, one send each; sessions
    /// that ended on downstream news (a kick, a refused spawn) are closed.
    pub(super) fn write_clients(&mut self, now: Time, port: &mut ClientPort) {
        self.expire_detached(now);
        let mut ended = std::mem::take(&mut self.clients.scratch_conns);
        ended.clear();
        for (id, c) in self.clients.conns.iter_mut() {
            let _ = c.session.check_timeouts(now);
            c.session.end_tick();
            if c.session.phase() == SessionPhase::Closed {
                ended.push(id);
                continue;
            }
            if !c.session.output_due() {
                continue;
            }
            // Swapped into the port's queue when it is empty (no copy).
            match c.session.write_output(|out| port.send_buf(id, out)) {
                // A full queue: the port closes it (SlowReader follows).
                Ok(()) | Err(PortError::SendQueueFull { .. }) | Err(PortError::Unknown(_)) => {}
            }
        }
        for &id in &ended {
            let closing = self
                .clients
                .conns
                .get(&id)
                .and_then(|c| c.session.closing())
                .unwrap_or(Closing::Kicked(ErrorCode::ProtocolViolation));
            self.close_conn(now, port, id, closing);
        }
        self.clients.scratch_conns = ended;
    }

    /// Dropped avatars whose reconnect window ended are destroyed.
    fn expire_detached(&mut self, now: Time) {
        while let Some((&e, _)) = self.clients.detached.iter().find(|(_, d)| d.until <= now) {
            let d = self.clients.detached.remove(&e).expect("found");
            self.clients.door.release(&d.account, e);
            self.clients.counters.reconnect_expired += 1;
            self.destroy_avatar(now, e, d.session);
        }
    }

    /// Shutdown: every client gets Kick(shutdown) before the port closes.
    pub(super) fn kick_all(&mut self, port: &mut ClientPort) {
        for (id, c) in self.clients.conns.iter_mut() {
            c.session.kick(ErrorCode::Shutdown, "the server stops");
            let _ = port.send(id, c.session.output());
            c.session.clear_output();
        }
    }

    /// The client side's metrics (`gateway_*`, `game_*`).
    pub(super) fn export_client_metrics(&self, sink: &mut MetricSink) {
        let k = &self.clients.counters;
        sink.gauge(
            "gateway_clients",
            "client sessions open",
            self.clients.len() as u64,
        );
        sink.counter("gateway_connections", "client connections opened", k.opened);
        sink.counter("gateway_logins", "avatars spawned for logins", k.logins);
        sink.counter(
            "gateway_bad_downstream",
            "downstream messages a session did not understand",
            k.bad_downstream,
        );
        sink.counter(
            "gateway_views_in_place",
            "view batches taken as the session's output without a copy",
            k.views_in_place,
        );
        for d in Disconnect::ALL {
            let n = k.disconnects[d as usize];
            sink.counter(d.metric(), "client connections ended, by reason", n);
        }
        for r in LoginRefusal::ALL {
            let n = k.login_refused[r.index()];
            sink.counter(r.metric(), "logins refused, by reason", n);
        }
        sink.counter(
            "gateway_takeovers",
            "logins that took over their account's avatar",
            k.takeovers,
        );
        sink.counter(
            "gateway_handoffs",
            "logins handed to the shard of their account's avatar",
            k.handoffs,
        );
        sink.counter(
            "gateway_adopted",
            "logins handed over by another shard, taken up here",
            k.adopted,
        );
        sink.counter(
            "gateway_accounts_full",
            "new accounts refused at gateway.accounts_max",
            k.accounts_full,
        );
        sink.counter(
            "gateway_reconnect_expired",
            "dropped avatars removed after the reconnect window",
            k.reconnect_expired,
        );
        sink.gauge(
            "gateway_detached",
            "dropped avatars waiting for their account",
            self.clients.detached() as u64,
        );
        let refused = self.clients.refused();
        let g = self.game.counters();
        for &code in ErrorCode::ALL {
            let n = refused[usize::from(code.code()).min(RULES - 1)];
            sink.counter(refused_metric(code), "client messages refused, by rule", n);
        }
        sink.counter("game_inputs", "client inputs applied at reals", g.inputs);
        sink.counter(
            "game_deferred",
            "inputs or client data deferred past an offload",
            g.deferred,
        );
        sink.counter("game_lost", "deferred effects with no real left", g.lost);
        sink.counter(
            "game_overtaken_acks",
            "inputs processed after a later one (deferred past a migration): no ack of their own",
            g.overtaken_acks,
        );
        sink.counter("game_hits", "client hits accepted into combat", g.hits);
        sink.counter("game_props_set", "properties set by clients", g.props_set);
    }

    /// Routes the outputs of every proxy.
    pub(super) fn drain_proxies(&mut self) {
        let mut outs = std::mem::take(&mut self.clients.scratch_outs);
        // Only proxies given work can have output (see `busy_proxies`), each
        // listed once, in the order they were given it; the list is kept for
        // `downstream` (their client data).
        for e in &self.busy_proxies {
            if let Some(p) = self.proxies.get_mut(e) {
                outs.extend(std::iter::from_fn(|| p.poll_output()).map(|o| (*e, o)));
            }
        }
        debug_assert!(
            self.proxies.values().all(Proxy::output_is_empty),
            "output left in a proxy no one marked busy"
        );
        for (e, o) in outs.drain(..) {
            self.route(WireSource::Proxy(e), o);
        }
        self.clients.scratch_outs = outs;
    }
}

#[cfg(test)]
mod tests {
    use super::Handover;

    #[test]
    fn a_handover_note_round_trips_and_bad_bytes_are_refused() {
        let h = Handover {
            hops: 1,
            account: "acct-7".into(),
            name: "Ann Ö".into(),
        };
        assert_eq!(Handover::decode(&h.encode()), Some(h.clone()));
        let b = h.encode();
        assert_eq!(Handover::decode(&b[..1]), None, "no length");
        assert_eq!(Handover::decode(&b[..4]), None, "name cut");
        let mut bad = b.clone();
        bad[2] = 0xff;
        assert_eq!(Handover::decode(&bad), None, "not UTF-8");
    }
}
