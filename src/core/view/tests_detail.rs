//! Unit tests of the levels of detail: what a far observer is not sent, the
//! catch-up when it nears, and the client's checks around both.

use super::tests::{apply, client, World, A, B, OWNER};
use super::*;
use crate::core::aoi::EventKind;
use crate::core::entity::{SyncCacheParams, Value};
use std::collections::BTreeMap;

fn hp_of(cv: &ClientView, e: crate::core::ids::EntityId) -> Option<Value> {
    let s = cv.find(e)?;
    let i = s.replica.props().entity_type().prop_index("hp")?;
    s.replica.props().get(i).cloned()
}

/// A and B (hp 100) in view of OWNER at the origin: A 5 m away, B `far_x`.
fn setup(
    far_x: f64,
) -> (
    World,
    BTreeMap<crate::core::ids::EntityId, LocalCopy>,
    Observer,
) {
    let mut w = World::new(&[OWNER, A, B]);
    w.step(A, 5.0, Some(100));
    w.step(B, far_x, Some(100));
    let mut host = BTreeMap::new();
    host.insert(OWNER, w.owner_copy());
    host.insert(A, w.ghost(A, SyncCacheParams::default()));
    host.insert(B, w.ghost(B, SyncCacheParams::default()));
    let o = Observer::new(OWNER, ObserverParams::default());
    (w, host, o)
}

fn step(
    w: &mut World,
    host: &mut BTreeMap<crate::core::ids::EntityId, LocalCopy>,
    o: &mut Observer,
    e: crate::core::ids::EntityId,
    x: f64,
    hp: Option<i64>,
) {
    let (m, _) = w.step(e, x, hp);
    apply(host, w.now, &m);
    o.handle_sync(&*host, e, m.version, m.kind, m.others_payload());
}

#[test]
fn a_far_observer_is_not_sent_a_detail_change_and_catches_up_once_near() {
    let (mut w, mut host, mut o) = setup(40.0);
    let mut cv = client(&w);
    o.handle_aoi(&host, A, EventKind::Enter);
    o.handle_aoi(&host, B, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    assert_eq!(hp_of(&cv, A), Some(Value::Int(100)));
    assert_eq!(hp_of(&cv, B), Some(Value::Int(0)), "beyond 30 m: left out");
    // Both lose hp: the near client view gets it, the far one only the
    // version (an empty delta).
    step(&mut w, &mut host, &mut o, A, 5.0, Some(80));
    step(&mut w, &mut host, &mut o, B, 40.0, Some(60));
    cv.handle_batch(o.flush(&host));
    assert_eq!(hp_of(&cv, A), Some(Value::Int(80)));
    assert_eq!(hp_of(&cv, B), Some(Value::Int(0)));
    assert_eq!(cv.find(B).map(|s| s.version), Some(2), "the version counts");
    assert_eq!(o.stats().detail_cut, 1);
    // B comes within 30 m: its hp arrives once, at the version shown.
    step(&mut w, &mut host, &mut o, B, 20.0, None);
    let batch = o.flush(&host).to_vec();
    let details = BatchReader::new(&batch)
        .filter(|e| matches!(e, Ok(ClientEvent::Detail { .. })))
        .count();
    assert_eq!(details, 1);
    cv.handle_batch(&batch);
    assert_eq!(hp_of(&cv, B), Some(Value::Int(60)), "caught up");
    assert_eq!(
        cv.find(B).map(|s| (s.version, s.replica.core().pos.x)),
        Some((3, 20.0))
    );
    assert!(o.flush(&host).is_empty(), "once");
    // Near now, its changes flow as usual.
    step(&mut w, &mut host, &mut o, B, 20.0, Some(50));
    cv.handle_batch(o.flush(&host));
    assert_eq!(hp_of(&cv, B), Some(Value::Int(50)));
    assert_eq!(o.stats().details, 1);
    assert_eq!(cv.violations(), &[]);
}

#[test]
fn a_client_beyond_reach_keeps_its_last_value_past_the_hysteresis() {
    let (mut w, mut host, mut o) = setup(20.0);
    let mut cv = client(&w);
    o.handle_aoi(&host, B, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    assert_eq!(hp_of(&cv, B), Some(Value::Int(100)), "within 30 m");
    // 31 m: beyond reach but within the 2 m hysteresis, the value flows.
    step(&mut w, &mut host, &mut o, B, 31.0, Some(90));
    cv.handle_batch(o.flush(&host));
    assert_eq!(hp_of(&cv, B), Some(Value::Int(90)));
    // 33 m: beyond both; the client keeps 90 (not cleared).
    step(&mut w, &mut host, &mut o, B, 33.0, Some(70));
    cv.handle_batch(o.flush(&host));
    assert_eq!(hp_of(&cv, B), Some(Value::Int(90)), "keeps the last value");
    // Back to 31 m: stale, and not within reach yet: no catch-up.
    step(&mut w, &mut host, &mut o, B, 31.0, Some(65));
    cv.handle_batch(o.flush(&host));
    assert_eq!(hp_of(&cv, B), Some(Value::Int(90)));
    assert_eq!(o.stats().details, 0);
    step(&mut w, &mut host, &mut o, B, 29.0, None);
    cv.handle_batch(o.flush(&host));
    assert_eq!(hp_of(&cv, B), Some(Value::Int(65)));
    assert_eq!((o.stats().details, o.stats().detail_cut), (1, 2));
    assert_eq!(cv.violations(), &[]);
}

#[test]
fn stale_detail_travels_with_the_observer_and_is_caught_up_after() {
    let (mut w, mut host, mut o) = setup(40.0);
    let mut cv = client(&w);
    o.handle_aoi(&host, B, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    step(&mut w, &mut host, &mut o, B, 40.0, Some(60));
    cv.handle_batch(o.flush(&host));
    let mut blob = Vec::new();
    o.encode_blob(&mut blob);
    let mut o = Observer::decode_blob(OWNER, ObserverParams::default(), &blob).expect("blob");
    o.handle_view(&host, &[B]);
    step(&mut w, &mut host, &mut o, B, 10.0, None);
    cv.handle_batch(o.flush(&host));
    assert_eq!(hp_of(&cv, B), Some(Value::Int(60)));
    assert_eq!(cv.violations(), &[]);
}

/// Re-encodes `batch` without the events `drop` picks.
fn without(batch: &[u8], drop: impl Fn(&ClientEvent<'_>) -> bool) -> Vec<u8> {
    let mut out = Vec::new();
    for ev in BatchReader::new(batch) {
        let ev = ev.expect("decodes");
        if !drop(&ev) {
            encode_event(&mut out, &ev);
        }
    }
    out
}

#[test]
fn the_checks_still_catch_a_lost_change_within_reach_and_a_bad_catch_up() {
    let (mut w, mut host, mut o) = setup(40.0);
    let mut cv = client(&w);
    o.handle_aoi(&host, A, EventKind::Enter);
    o.handle_aoi(&host, B, EventKind::Enter);
    cv.handle_batch(o.flush(&host));
    let near = o.handle_of(A).expect("shown");
    // A broken server path: A's hp change (within reach) never reaches
    // the client. B's (cut by the level of detail) is no loss.
    step(&mut w, &mut host, &mut o, A, 5.0, Some(80));
    step(&mut w, &mut host, &mut o, B, 40.0, Some(60));
    let batch = o.flush(&host).to_vec();
    cv.handle_batch(&without(&batch, |e| e.handle() == Some(near)));
    assert_eq!(cv.violations(), &[], "nothing to see yet");
    step(&mut w, &mut host, &mut o, A, 5.0, Some(70));
    step(&mut w, &mut host, &mut o, B, 40.0, Some(50));
    cv.handle_batch(o.flush(&host));
    let rules: Vec<_> = cv
        .violations()
        .iter()
        .map(|v| (v.handle, v.rule.clone()))
        .collect();
    assert_eq!(
        rules,
        [(
            Some(near),
            Rule::VersionGap {
                expected: 2,
                got: 3
            }
        )],
        "the lost delta is caught, the cut ones are not"
    );
    // A catch-up at another version than the one shown is caught too.
    let far = o.handle_of(B).expect("shown");
    let shown = cv.find(B).expect("shown").version;
    let mut bad = Vec::new();
    for (low, rule) in [
        (
            shown as u8 + 1,
            Rule::VersionGap {
                expected: shown,
                got: shown + 1,
            },
        ),
        (
            shown as u8 - 1,
            Rule::Stale {
                shown,
                got: shown - 1,
            },
        ),
    ] {
        bad.clear();
        let ev = ClientEvent::Detail {
            handle: far,
            version_low: low,
            delta: &[0],
        };
        encode_event(&mut bad, &ev);
        cv.handle_batch(&bad);
        assert_eq!(cv.violations().last().map(|v| v.rule.clone()), Some(rule));
    }
}
