//! The live viewer's JSON API and event stream on the admin port, and the
//! page that draws them (`viewer.html`, in the binary). Fields, units and
//! caps: docs/viewer.md.
//!
//! Everything here runs on admin threads and reads only what the shards
//! published (`runtime::viewer`) and their lock-free counters: it never
//! reaches a shard.
//!
//! Runs on: the admin thread (`/api/space`, `/api/entities`) and one
//! `tessera-sse` thread per event stream. Owns: nothing.

use super::admin::AdminState;
use super::metrics::ShardStats;
use crate::shard::view_sink::{ShardView, ViewEvent};
use crate::shard::Level;
use serde_json::{json, Value};
use std::io::Write;
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Instant;

/// The viewer page: HTML with inline CSS and JS, no other resource.
pub(crate) const PAGE: &str = include_str!("viewer.html");

/// How a request to the API went wrong (the reply's status and message).
#[derive(Debug, PartialEq, thiserror::Error)]
pub(crate) enum ApiError {
    /// `/api/entities` without `cell`.
    #[error("query parameter `cell` is missing: use /api/entities?cell=ID (a cell id from /api/space, or all)")]
    MissingCell,
    /// `cell=` is no cell id.
    #[error("query parameter `cell`: {0:?} is not a cell id (an unsigned integer, or all)")]
    BadCell(String),
    /// A query parameter the endpoint does not take.
    #[error("unknown query parameter {0:?} (see docs/viewer.md)")]
    UnknownParam(String),
    /// A number that is not one.
    #[error("{0}: {1:?} is not a number (an unsigned integer)")]
    BadNumber(&'static str, String),
    /// No shard publishes this cell.
    #[error("unknown cell {0}: no shard hosts it (see /api/space)")]
    UnknownCell(u32),
    /// No such path.
    #[error("not found: {0:?} (try /, /metrics, /api/space, /api/entities?cell=ID, /api/events)")]
    NotFound(String),
    /// Every event stream slot is taken.
    #[error("too many event streams: admin.viewer_streams_max = {0} are open")]
    StreamsBusy(usize),
}

impl ApiError {
    /// The HTTP status line's tail.
    pub(crate) fn status(&self) -> &'static str {
        match self {
            ApiError::MissingCell
            | ApiError::BadCell(_)
            | ApiError::UnknownParam(_)
            | ApiError::BadNumber(..) => "400 Bad Request",
            ApiError::UnknownCell(_) | ApiError::NotFound(_) => "404 Not Found",
            ApiError::StreamsBusy(_) => "503 Service Unavailable",
        }
    }

    /// The JSON body: `{"error": "..."}`.
    pub(crate) fn body(&self) -> String {
        json!({ "error": self.to_string() }).to_string()
    }
}

/// Which cells `/api/entities` asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Request {
    /// One cell.
    Cell(u32),
    /// Every cell.
    All,
}

impl Request {
    /// Parses the query of `/api/entities`.
    ///
    /// # Errors
    /// [`ApiError`] naming the parameter that is missing, unknown or bad.
    pub(crate) fn entities(query: &str) -> Result<Request, ApiError> {
        let mut cell = None;
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if key != "cell" {
                return Err(ApiError::UnknownParam(key.to_owned()));
            }
            cell = Some(match value {
                "all" => Request::All,
                v => v
                    .parse::<u32>()
                    .map(Request::Cell)
                    .map_err(|_| ApiError::BadCell(v.to_owned()))?,
            });
        }
        cell.ok_or(ApiError::MissingCell)
    }
}

/// What `/api/events` was asked for.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct StreamRequest {
    /// End the stream after this long (`for_ms=`); the client reconnects
    /// with `Last-Event-ID` and loses nothing the ring still holds.
    pub(crate) for_ms: Option<u64>,
    /// The `Last-Event-ID` header: resume after this event.
    pub(crate) last_id: Option<u64>,
}

impl StreamRequest {
    /// Parses the query of `/api/events` and the request `head`'s
    /// `Last-Event-ID` header.
    ///
    /// # Errors
    /// [`ApiError`] naming the parameter that is unknown or bad.
    pub(crate) fn parse(query: &str, head: &[u8]) -> Result<StreamRequest, ApiError> {
        let mut req = StreamRequest::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
            if key != "for_ms" {
                return Err(ApiError::UnknownParam(key.to_owned()));
            }
            let ms = value
                .parse::<u64>()
                .map_err(|_| ApiError::BadNumber("for_ms", value.to_owned()))?;
            req.for_ms = Some(ms);
        }
        let text = String::from_utf8_lossy(head);
        for line in text.split("\r\n").skip(1) {
            let Some((name, value)) = line.split_once(':') else {
                continue;
            };
            if name.trim().eq_ignore_ascii_case("last-event-id") {
                let value = value.trim();
                let id = value
                    .parse::<u64>()
                    .map_err(|_| ApiError::BadNumber("Last-Event-ID", value.to_owned()))?;
                req.last_id = Some(id);
            }
        }
        Ok(req)
    }
}

fn shard_figures(state: &AdminState, snaps: &[ShardView]) -> Vec<Value> {
    state
        .shards
        .iter()
        .zip(snaps)
        .map(|(s, v)| shard_json(s, Some(v), state.params.tick_budget_us))
        .collect()
}

fn shard_json(s: &ShardStats, v: Option<&ShardView>, budget_us: u64) -> Value {
    let mut out = json!({
        "shard": s.shard().index,
        "node": s.shard().node.0,
        "tick_p99_us": s.level(Level::TickP99WindowUs),
        "tick_budget_us": budget_us,
        "clients": s.level(Level::ClientConnections),
    });
    if let (Some(v), Value::Object(m)) = (v, &mut out) {
        m.insert("cells".into(), v.cells.len().into());
        m.insert(
            "reals".into(),
            v.cells
                .iter()
                .map(|c| u64::from(c.reals))
                .sum::<u64>()
                .into(),
        );
        m.insert(
            "ghosts".into(),
            v.cells
                .iter()
                .map(|c| u64::from(c.ghosts))
                .sum::<u64>()
                .into(),
        );
        m.insert("published".into(), v.serial.into());
    }
    out
}

fn ms_since(epoch: Instant) -> u64 {
    u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
}

/// `GET /api/space`.
pub(crate) fn space(state: &AdminState) -> String {
    let snaps = state.board.snapshots();
    let mut cells: Vec<_> = snaps.iter().flat_map(|v| v.cells.iter()).collect();
    cells.sort_by_key(|c| c.id);
    let mut spaces: Vec<(u32, [f64; 4], usize)> = Vec::new();
    for c in &cells {
        match spaces.iter_mut().find(|s| s.0 == c.space) {
            Some(s) => {
                s.1 = [
                    s.1[0].min(c.rect[0]),
                    s.1[1].min(c.rect[1]),
                    s.1[2].max(c.rect[2]),
                    s.1[3].max(c.rect[3]),
                ];
                s.2 += 1;
            }
            None => spaces.push((c.space, c.rect, 1)),
        }
    }
    let spaces: Vec<Value> = spaces
        .iter()
        .map(|(id, b, n)| json!({ "id": id, "bounds": b, "cells": n }))
        .collect();
    json!({
        "t_ms": ms_since(state.params.epoch),
        "tick_budget_us": state.params.tick_budget_us,
        "entities_max": state.board.entities_max(),
        "spaces": spaces,
        "cells": cells,
        "shards": shard_figures(state, &snaps),
    })
    .to_string()
}

/// `GET /api/entities?cell=ID`.
///
/// # Errors
/// [`ApiError::UnknownCell`] if no shard published the cell.
pub(crate) fn entities(state: &AdminState, req: Request) -> Result<String, ApiError> {
    let snaps = state.board.snapshots();
    let max = state.board.entities_max();
    let mut cells = Vec::new();
    for v in &snaps {
        for c in &v.cells {
            if req != Request::All && req != Request::Cell(c.id) {
                continue;
            }
            let entities: Vec<Value> = v
                .entities
                .iter()
                .filter(|e| e.cell == c.id)
                .map(|e| {
                    let mut j = serde_json::to_value(e).unwrap_or(Value::Null);
                    if let Value::Object(m) = &mut j {
                        m.insert("haunts".into(), v.haunts_of(e).into());
                    }
                    j
                })
                .collect();
            let total = c.reals as usize + c.ghosts as usize;
            cells.push(json!({
                "cell": c.id,
                "shard": c.shard,
                "reals": c.reals,
                "ghosts": c.ghosts,
                "sampled": total > entities.len(),
                "entities": entities,
            }));
        }
    }
    match req {
        Request::Cell(id) => {
            let mut one = cells.pop().ok_or(ApiError::UnknownCell(id))?;
            if let Value::Object(m) = &mut one {
                m.insert("entities_max".into(), max.into());
            }
            Ok(one.to_string())
        }
        Request::All => Ok(json!({ "entities_max": max, "cells": cells }).to_string()),
    }
}

fn event_name(e: &ViewEvent) -> &'static str {
    match e {
        ViewEvent::Migration { .. } => "migration",
        ViewEvent::Balance { .. } => "balance",
    }
}

/// `GET /api/events`: server-sent events until the client goes, a write
/// times out (`admin.io_timeout_ms`: a client that does not read is cut
/// off), `for_ms` passes, or the server stops. Every
/// `admin.viewer_stream_period_ms`: the events new since the last period
/// (`migration`, `balance`; each with its `id`), `lost` if the ring
/// overwrote some this stream had not sent, then `shards`. A new stream
/// starts with the ring's history, or after `Last-Event-ID`.
///
/// # Errors
/// The socket's error.
pub(crate) fn stream_events(
    stream: &mut TcpStream,
    state: &AdminState,
    req: StreamRequest,
) -> std::io::Result<()> {
    stream.write_all(
        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-store\r\nConnection: close\r\n\r\n",
    )?;
    stream.write_all(b"retry: 1000\n\n")?;
    let p = &state.params;
    let started = Instant::now();
    // Without Last-Event-ID the first fetch sends the ring's history (the
    // timeline's past) and no loss is reported for what came before it.
    let mut cursor = req.last_id.map(|id| id + 1);
    let mut batch = Vec::with_capacity(p.events_max);
    let mut text = String::with_capacity(4096);
    while !state.stop.load(Ordering::Acquire) {
        batch.clear();
        text.clear();
        let got = state
            .board
            .events
            .since(cursor.unwrap_or(0), p.events_max, &mut batch);
        if got.lost > 0 && cursor.is_some() {
            let data = json!({ "lost": got.lost, "events_max": p.events_max });
            text.push_str(&format!("event: lost\ndata: {data}\n\n"));
        }
        cursor = Some(got.next);
        for (seq, e) in &batch {
            let data = serde_json::to_string(e).unwrap_or_default();
            text.push_str(&format!(
                "id: {seq}\nevent: {}\ndata: {data}\n\n",
                event_name(e)
            ));
        }
        let shards: Vec<Value> = state
            .shards
            .iter()
            .map(|s| shard_json(s, None, p.tick_budget_us))
            .collect();
        let data = json!({
            "t_ms": ms_since(p.epoch),
            "shards": shards,
            "events_dropped": state.board.events_dropped(),
        });
        text.push_str(&format!("event: shards\ndata: {data}\n\n"));
        stream.write_all(text.as_bytes())?;
        stream.flush()?;
        if req
            .for_ms
            .is_some_and(|ms| started.elapsed().as_millis() >= u128::from(ms))
        {
            break;
        }
        std::thread::sleep(p.stream_period);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_entities_query_names_what_is_wrong() {
        assert_eq!(Request::entities("cell=7"), Ok(Request::Cell(7)));
        assert_eq!(Request::entities("cell=all"), Ok(Request::All));
        assert_eq!(Request::entities(""), Err(ApiError::MissingCell));
        assert_eq!(
            Request::entities("cell=x1"),
            Err(ApiError::BadCell("x1".into()))
        );
        assert_eq!(
            Request::entities("cel=1"),
            Err(ApiError::UnknownParam("cel".into()))
        );
        let e = ApiError::BadCell("x1".into());
        assert_eq!(e.status(), "400 Bad Request");
        assert!(e.body().contains("x1"), "{}", e.body());
        assert_eq!(ApiError::UnknownCell(9).status(), "404 Not Found");
        assert_eq!(ApiError::StreamsBusy(4).status(), "503 Service Unavailable");
    }

    #[test]
    fn the_events_request_resumes_after_last_event_id() {
        let head = b"GET /api/events HTTP/1.1\r\nHost: x\r\nlast-event-id: 41\r\n\r\n";
        let req = StreamRequest::parse("for_ms=1500", head).expect("valid");
        assert_eq!(req.for_ms, Some(1500));
        assert_eq!(req.last_id, Some(41));
        let plain = StreamRequest::parse("", b"GET / HTTP/1.1\r\n\r\n").expect("valid");
        assert_eq!(plain, StreamRequest::default());
        let bad = StreamRequest::parse("for_ms=soon", b"").expect_err("refused");
        assert_eq!(bad, ApiError::BadNumber("for_ms", "soon".into()));
        let head = b"GET / HTTP/1.1\r\nLast-Event-ID: x\r\n\r\n";
        let bad = StreamRequest::parse("", head).expect_err("refused");
        assert!(bad.to_string().contains("Last-Event-ID"), "{bad}");
        assert!(StreamRequest::parse("from=1", b"").is_err());
    }
}
