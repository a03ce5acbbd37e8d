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
//!    (view batches become ViewBatch frames, acks and results pass);
//! 4. writes: each session's frames of the tick, one `send` per
//!    connection; a full send queue makes the port close it (slow reader).
//!
//! Ending a connection destroys its avatar everywhere: the proxy sends a
//! destroy on the inputs' path and is dropped.
//!
//! Must not touch sockets (only the port) or cells (only through the
//! host's routing and spawn).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::core::cell::{CellError, Outgoing};
use crate::core::entity::EntityType;
use crate::core::ids::EntityId;
use crate::core::proxy::Proxy;
use crate::core::time::Time;
use crate::runtime::{ClientPort, CloseReason, ConnId, MetricSink, PortError, PortEvent};
use crate::wire::client::ErrorCode;

use super::gateway::{
    refused_metric, Closing, Disconnect, GatewayParams, Session, SessionPhase, Step, RULES,
};
use super::host::{entity_id, proxy_params, CellHost, Spawn, WireSource};
use super::spawn::{new_avatar, SpawnRule};

/// What the client side of a shard counts (exported as metrics).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClientCounters {
    /// Connections opened.
    pub opened: u64,
    /// Avatars spawned for logins.
    pub logins: u64,
    /// Connections ended, by [`Disconnect`] index.
    pub disconnects: [u64; 7],
    /// Refusals of sessions that ended, by `ErrorCode::code`.
    pub refused_closed: [u64; RULES],
    /// Downstream messages the session did not understand.
    pub bad_downstream: u64,
    /// Spawns that failed in their cell (the client is kicked).
    pub spawn_failed: u64,
}

/// One connection.
#[derive(Debug)]
struct Conn {
    session: Session,
    entity: Option<EntityId>,
}

/// A host action taken out of a session step (owned, so the host can act
/// with its whole state).
#[derive(Debug)]
enum Action {
    Login(String),
    Input(Arc<[u8]>),
    EnterSpace(u32, u32),
    Close(Closing),
}

/// The client side of one shard (see the module doc).
#[derive(Debug)]
pub struct Clients {
    params: GatewayParams,
    avatar: Arc<EntityType>,
    spawn: SpawnRule,
    next_player: u64,
    conns: BTreeMap<ConnId, Conn>,
    by_entity: BTreeMap<EntityId, ConnId>,
    scratch_conns: Vec<ConnId>,
    scratch_outs: Vec<(EntityId, Outgoing)>,
    actions: Vec<Action>,
    counters: ClientCounters,
}

impl Clients {
    /// No connections yet; players get entity numbers from `first_player`.
    pub fn new(
        params: GatewayParams,
        avatar: Arc<EntityType>,
        spawn: SpawnRule,
        first_player: u64,
    ) -> Clients {
        Clients {
            params,
            avatar,
            spawn,
            next_player: first_player,
            conns: BTreeMap::new(),
            by_entity: BTreeMap::new(),
            scratch_conns: Vec::new(),
            scratch_outs: Vec::new(),
            actions: Vec::new(),
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
                        Session::new(self.clients.params, self.clients.avatar.clone());
                    session.set_world_type(self.spaces.world_type);
                    let c = Conn {
                        session,
                        entity: None,
                    };
                    self.clients.conns.insert(conn, c);
                    self.clients.counters.opened += 1;
                }
                PortEvent::Closed { conn, reason } => {
                    if let Some(c) = self.clients.conns.remove(&conn) {
                        self.end_conn(now, c, disconnect_of(reason));
                    }
                }
            }
        }
    }

    /// Step 2: frames from every readable connection.
    pub(super) fn read_clients(&mut self, now: Time, port: &mut ClientPort) {
        let mut ids = std::mem::take(&mut self.clients.scratch_conns);
        ids.clear();
        ids.extend(port.readable());
        for &id in &ids {
            let Clients { conns, actions, .. } = &mut self.clients;
            let Some(conn) = conns.get_mut(&id) else {
                continue;
            };
            let used = conn.session.handle_input(now, port.input(id), |_, step| {
                actions.push(match step {
                    Step::None => return,
                    Step::Login { name } => Action::Login(name.to_owned()),
                    Step::Input(i) => Action::Input(i.to_arc()),
                    Step::EnterSpace { space, type_id } => Action::EnterSpace(space, type_id),
                    Step::Close(c) => Action::Close(c),
                })
            });
            port.consume(id, used);
            let mut actions = std::mem::take(&mut self.clients.actions);
            for a in actions.drain(..) {
                match a {
                    Action::Login(name) => self.login(now, id, &name),
                    Action::Input(data) => {
                        let e = self.clients.conns.get(&id).and_then(|c| c.entity);
                        if let Some(p) = e.and_then(|e| self.proxies.get_mut(&e)) {
                            p.send_input(now, data);
                        }
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

    /// A login: a new avatar at the spawn rule's point, created in the
    /// cell there (here, or by a spawn message to that cell's shard, which
    /// precedes every input on that FIFO channel), its proxy here; Welcome
    /// at once.
    fn login(&mut self, now: Time, id: ConnId, name: &str) {
        let n = self.clients.next_player;
        self.clients.next_player += 1;
        let entity = entity_id(self.ctx.shard.index, n);
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
            return;
        };
        if !ok {
            self.clients.counters.spawn_failed += 1;
            let _ = conn
                .session
                .refuse_login(ErrorCode::ServerFull, "no cell for the spawn");
            return;
        }
        self.proxies.insert(entity, proxy);
        conn.session.welcome(now, entity, pos);
        conn.entity = Some(entity);
        self.clients.by_entity.insert(entity, id);
        self.clients.counters.logins += 1;
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
        };
        self.end_conn(now, conn, reason);
    }

    /// A connection ended: counted, its avatar destroyed everywhere.
    fn end_conn(&mut self, now: Time, conn: Conn, why: Disconnect) {
        let k = &mut self.clients.counters;
        k.disconnects[why as usize] += 1;
        for (a, b) in k.refused_closed.iter_mut().zip(conn.session.refused()) {
            *a += b;
        }
        let Some(e) = conn.entity else { return };
        self.clients.by_entity.remove(&e);
        self.space_left(conn.session.travel().counted);
        if let Some(mut p) = self.proxies.remove(&e) {
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
        let id = self.clients.by_entity.get(&entity)?;
        self.clients.conns.get_mut(id).map(|c| &mut c.session)
    }

    /// Step 3: each proxy's ordered client data to its session.
    pub(super) fn downstream(&mut self) {
        let tick = self.tick;
        for (&e, &id) in &self.clients.by_entity {
            let (Some(p), Some(c)) = (self.proxies.get_mut(&e), self.clients.conns.get_mut(&id))
            else {
                continue;
            };
            while let Some((_, data)) = p.poll_client() {
                if !c.session.handle_down(tick, &data) {
                    self.clients.counters.bad_downstream += 1;
                }
            }
        }
    }

    /// Step 4: each session's frames of this tick, one send each; sessions
    /// that ended on downstream news (a kick, a refused spawn) are closed.
    pub(super) fn write_clients(&mut self, now: Time, port: &mut ClientPort) {
        let mut ended = std::mem::take(&mut self.clients.scratch_conns);
        ended.clear();
        for (&id, c) in &mut self.clients.conns {
            c.session.end_tick();
            if c.session.phase() == SessionPhase::Closed {
                ended.push(id);
                continue;
            }
            if !c.session.output_due() {
                continue;
            }
            match port.send(id, c.session.output()) {
                // A full queue: the port closes it (SlowReader follows).
                Ok(()) | Err(PortError::SendQueueFull { .. }) | Err(PortError::Unknown(_)) => {}
            }
            c.session.clear_output();
        }
        for &id in &ended {
            self.close_conn(now, port, id, Closing::Kicked(ErrorCode::ProtocolViolation));
        }
        self.clients.scratch_conns = ended;
    }

    /// Shutdown: every client gets Kick(shutdown) before the port closes.
    pub(super) fn kick_all(&mut self, port: &mut ClientPort) {
        for (&id, c) in &mut self.clients.conns {
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
        for d in Disconnect::ALL {
            let n = k.disconnects[d as usize];
            sink.counter(d.metric(), "client connections ended, by reason", n);
        }
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
        sink.counter("game_hits", "client hits accepted into combat", g.hits);
        sink.counter("game_props_set", "properties set by clients", g.props_set);
    }

    /// Routes the outputs of every proxy.
    pub(super) fn drain_proxies(&mut self) {
        let mut outs = std::mem::take(&mut self.clients.scratch_outs);
        for (&e, p) in &mut self.proxies {
            outs.extend(std::iter::from_fn(|| p.poll_output()).map(|o| (e, o)));
        }
        for (e, o) in outs.drain(..) {
            self.route(WireSource::Proxy(e), o);
        }
        self.clients.scratch_outs = outs;
    }
}
