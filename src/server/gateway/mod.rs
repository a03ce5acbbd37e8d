//! The client gateway, sans-IO: one [`Session`] per client connection on
//! the shard that accepted it (where the client's proxy lives).
//!
//! - [`session`]: [`Session`], the server end of the client protocol
//!   (handshake, input rules, strikes, downstream frames, acks).
//! - [`rules`]: the speed limit, settable properties, login names.
//! - [`travel`]: the session's space and its one space change at a time.
//! - [`ticket`]: signed login tickets and the replay table.
//!
//! Owns the protocol state of connections; never touches a socket (the
//! host feeds it the bytes of its `ClientPort`) nor a cell (inputs go out
//! through the proxy, results come back as downstream data).

pub mod rules;
pub mod session;
#[cfg(test)]
mod tests;
pub mod ticket;
pub mod travel;

pub use rules::{check_name, check_pos, check_set_prop, MoveLimiter};
pub use session::{Closing, Session, SessionPhase, Step, TakenDown};
pub use ticket::{mint, ReplayTable, Ticket, TicketError, TicketKey};
pub use travel::Travel;

use std::time::Duration;

use crate::config::Config;
use crate::core::fault::Fault;
use crate::core::geom::Rect;
use crate::wire::client::ErrorCode;

/// Bounds and rules of the gateway (config `[gateway]`, `[runtime]`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct GatewayParams {
    /// Largest client frame body (`gateway.frame_bytes_max`). Default 4096.
    pub client_body_bytes_max: u32,
    /// Refusals tolerated before a Kick (`gateway.abuse_strikes_max`).
    /// Default 8.
    pub abuse_strikes_max: u32,
    /// Speed limit of moves (`gateway.move_speed_max_mps`). Default 12.
    pub move_speed_max_mps: f64,
    /// Distance a client may move beyond the limit in a burst
    /// (`gateway.move_slack_m`). Default 6.
    pub move_slack_m: f64,
    /// Inputs forwarded and not yet acknowledged by the real
    /// (`gateway.inputs_in_flight_max`); more are refused `rate-limited`.
    /// Default 1024.
    pub inputs_in_flight_max: usize,
    /// Hits waiting for their result (their combat seq is remembered).
    /// Default 64.
    pub hits_pending_max: usize,
    /// The tick period announced in Welcome. Default 50.
    pub tick_ms: u32,
    /// The world's bounds (moves outside are `bad-value`).
    pub world: Rect,
    /// Random spawns prefer a cell of the accepting shard
    /// (`gateway.spawn_local`). Default true.
    pub spawn_local: bool,
    /// A live client's proxy follows its real to the real's shard at once,
    /// but at most once per this long (`gateway.proxy_follow_ms`); `None`
    /// if `gateway.proxy_follow` is off. Default 1 s.
    pub proxy_follow: Option<Duration>,
    /// Connections handed to one shard and not yet taken up there
    /// (`gateway.handoffs_max`). Default 256.
    pub handoffs_max: usize,
    /// A fault to inject on purpose (config `testing.fault`): `Silence`
    /// sends no view batches after Welcome, `DropAck` no InputAcks; the
    /// others are the observer's. Default none.
    pub fault: Fault,
    /// Ticks between two view batches of a client (config
    /// `view.client_update_hz`): output that is only input acknowledgements
    /// waits up to this many ticks minus one for the next view batch, so
    /// that a client gets one write per update, not one per tick. Default 1.
    pub send_every_ticks: u16,
    /// No whole Login this long after connecting closes the connection
    /// (`gateway.handshake_timeout_ms`). Default 5 s.
    pub handshake_timeout: Duration,
    /// Nothing heard this long from a live client closes it
    /// (`gateway.idle_timeout_ms`). Default 30 s.
    pub idle_timeout: Duration,
    /// A dropped client's avatar waits this long for its account
    /// (`gateway.reconnect_window_ms`). Default 10 s.
    pub reconnect_window: Duration,
}

impl Default for GatewayParams {
    fn default() -> Self {
        GatewayParams {
            client_body_bytes_max: 4096,
            abuse_strikes_max: 8,
            move_speed_max_mps: 12.0,
            move_slack_m: 6.0,
            inputs_in_flight_max: 1024,
            hits_pending_max: 64,
            tick_ms: 50,
            world: Rect::new(0.0, 0.0, 4096.0, 4096.0),
            spawn_local: true,
            proxy_follow: Some(Duration::from_secs(1)),
            handoffs_max: 256,
            fault: Fault::None,
            send_every_ticks: 1,
            handshake_timeout: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(30),
            reconnect_window: Duration::from_secs(10),
        }
    }
}

impl GatewayParams {
    /// The params of `config`.
    pub fn from_config(c: &Config) -> GatewayParams {
        GatewayParams {
            client_body_bytes_max: c.gateway.frame_bytes_max,
            abuse_strikes_max: c.gateway.abuse_strikes_max,
            move_speed_max_mps: c.gateway.move_speed_max_mps,
            move_slack_m: c.gateway.move_slack_m,
            inputs_in_flight_max: c.gateway.inputs_in_flight_max as usize,
            hits_pending_max: 64,
            tick_ms: u32::try_from(c.runtime.tick_ms).unwrap_or(u32::MAX),
            world: c.world.bounds(),
            spawn_local: c.gateway.spawn_local,
            proxy_follow: c
                .gateway
                .proxy_follow
                .then(|| Duration::from_millis(c.gateway.proxy_follow_ms)),
            handoffs_max: c.gateway.handoffs_max as usize,
            fault: c.testing.fault(),
            send_every_ticks: c.view.flush_every_ticks(c.runtime.tick_ms),
            handshake_timeout: Duration::from_millis(c.gateway.handshake_timeout_ms),
            idle_timeout: Duration::from_millis(c.gateway.idle_timeout_ms),
            reconnect_window: Duration::from_millis(c.gateway.reconnect_window_ms),
        }
    }
}

/// Slots of a per-rule counter array (indexed by [`ErrorCode::code`]).
pub const RULES: usize = 22;

/// The metric name of the refusals of one rule (static: metric names are).
pub fn refused_metric(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::UnknownMessage => "gateway_refused_unknown_message",
        ErrorCode::FrameTooLarge => "gateway_refused_frame_too_large",
        ErrorCode::MoveTooFast => "gateway_refused_move_too_fast",
        ErrorCode::NotVisible => "gateway_refused_not_visible",
        ErrorCode::PropNotSettable => "gateway_refused_prop_not_settable",
        ErrorCode::ProtocolViolation => "gateway_refused_protocol_violation",
        ErrorCode::SlowReader => "gateway_refused_slow_reader",
        ErrorCode::BadMagic => "gateway_refused_bad_magic",
        ErrorCode::VersionMismatch => "gateway_refused_version_mismatch",
        ErrorCode::LoginRefused => "gateway_refused_login_refused",
        ErrorCode::BadSequence => "gateway_refused_bad_sequence",
        ErrorCode::BadValue => "gateway_refused_bad_value",
        ErrorCode::RateLimited => "gateway_refused_rate_limited",
        ErrorCode::ServerFull => "gateway_refused_server_full",
        ErrorCode::Shutdown => "gateway_refused_shutdown",
        ErrorCode::IdleTimeout => "gateway_refused_idle_timeout",
        ErrorCode::Replaced => "gateway_refused_replaced",
        ErrorCode::UnknownSpaceType => "gateway_refused_unknown_space_type",
        ErrorCode::UnknownSpace => "gateway_refused_unknown_space",
        ErrorCode::SpaceFull => "gateway_refused_space_full",
        ErrorCode::SpaceNotAllowed => "gateway_refused_space_not_allowed",
    }
}

/// Why a connection ended (counted by the host, `gateway_disconnects_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Disconnect {
    /// The client said Bye.
    Bye,
    /// The client closed its end (or reset it).
    PeerClosed,
    /// A socket error.
    IoError,
    /// The client did not read fast enough (send queue full).
    SlowReader,
    /// Kicked for breaking the rules (abuse, framing, refused handshake).
    Kicked,
    /// The server stops.
    Shutdown,
    /// No room for one more connection.
    TooManyConnections,
    /// No Login within `gateway.handshake_timeout_ms`.
    HandshakeTimeout,
    /// Nothing received within `gateway.idle_timeout_ms`.
    IdleTimeout,
    /// The account logged in on another connection.
    Replaced,
}

impl Disconnect {
    /// Every reason, in index order.
    pub const ALL: [Disconnect; 10] = [
        Disconnect::Bye,
        Disconnect::PeerClosed,
        Disconnect::IoError,
        Disconnect::SlowReader,
        Disconnect::Kicked,
        Disconnect::Shutdown,
        Disconnect::TooManyConnections,
        Disconnect::HandshakeTimeout,
        Disconnect::IdleTimeout,
        Disconnect::Replaced,
    ];

    /// The stable name (what `ServerCounters::disconnects` uses).
    pub fn name(self) -> &'static str {
        match self {
            Disconnect::Bye => "bye",
            Disconnect::PeerClosed => "peer-closed",
            Disconnect::IoError => "io-error",
            Disconnect::SlowReader => "slow-reader",
            Disconnect::Kicked => "kicked",
            Disconnect::Shutdown => "shutdown",
            Disconnect::TooManyConnections => "too-many-connections",
            Disconnect::HandshakeTimeout => "handshake-timeout",
            Disconnect::IdleTimeout => "idle-timeout",
            Disconnect::Replaced => "replaced",
        }
    }

    /// The metric name.
    pub fn metric(self) -> &'static str {
        match self {
            Disconnect::Bye => "gateway_disconnects_bye",
            Disconnect::PeerClosed => "gateway_disconnects_peer_closed",
            Disconnect::IoError => "gateway_disconnects_io_error",
            Disconnect::SlowReader => "gateway_disconnects_slow_reader",
            Disconnect::Kicked => "gateway_disconnects_kicked",
            Disconnect::Shutdown => "gateway_disconnects_shutdown",
            Disconnect::TooManyConnections => "gateway_disconnects_too_many_connections",
            Disconnect::HandshakeTimeout => "gateway_disconnects_handshake_timeout",
            Disconnect::IdleTimeout => "gateway_disconnects_idle_timeout",
            Disconnect::Replaced => "gateway_disconnects_replaced",
        }
    }
}

/// Why a login was refused (Error `login-refused`; counted by reason,
/// `gateway_login_refused_*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LoginRefusal {
    /// The name is not 1..=64 bytes of printable UTF-8 (refused by the
    /// session before the host sees it).
    BadName,
    /// The ticket was refused.
    Ticket(TicketError),
}

impl LoginRefusal {
    /// Every reason, in index order.
    pub const ALL: [LoginRefusal; 7] = [
        LoginRefusal::BadName,
        LoginRefusal::Ticket(TicketError::Malformed),
        LoginRefusal::Ticket(TicketError::Forged),
        LoginRefusal::Ticket(TicketError::Expired),
        LoginRefusal::Ticket(TicketError::TooLong),
        LoginRefusal::Ticket(TicketError::Replayed),
        LoginRefusal::Ticket(TicketError::TableFull),
    ];

    /// The index in [`LoginRefusal::ALL`].
    pub fn index(self) -> usize {
        Self::ALL
            .iter()
            .position(|&r| r == self)
            .expect("every reason is listed")
    }

    /// The metric name.
    pub fn metric(self) -> &'static str {
        match self {
            LoginRefusal::BadName => "gateway_login_refused_bad_name",
            LoginRefusal::Ticket(TicketError::Malformed) => "gateway_login_refused_malformed",
            LoginRefusal::Ticket(TicketError::Forged) => "gateway_login_refused_forged",
            LoginRefusal::Ticket(TicketError::Expired) => "gateway_login_refused_expired",
            LoginRefusal::Ticket(TicketError::TooLong) => "gateway_login_refused_too_long",
            LoginRefusal::Ticket(TicketError::Replayed) => "gateway_login_refused_replayed",
            LoginRefusal::Ticket(TicketError::TableFull) => "gateway_login_refused_table_full",
        }
    }
}
