//! Client views in the simulated world: every client keeps a
//! [`ClientView`] fed with the view batches its proxy delivers, and after
//! healing each view is compared to the ground truth.
//!
//! View batches share the downstream channel with the game's frames and
//! notices (`crate::game::relay`, downstream): every body starts with its
//! explicit kind byte (`core::down::DownKind`), which `relay::decode_down`
//! matches as the gateway does; a client view is fed the bytes after it.
//!
//! Every rule a [`ClientView`] reports becomes a checker violation
//! ([`view_kind`]). After healing ([`World::check_views_converged`]): every
//! real within `radius_m` of the client's avatar is shown (unless the
//! interest cap may have cut it), nothing is shown beyond
//! `leave_radius_m`, and each shown entity is at its real's version and
//! position, with its real's property values as other clients see them,
//! except the properties with a level of detail whose reach the client is
//! beyond (those it may hold from earlier: PROTOCOL.md 6.6).
//!
//! Owns only these `impl World` steps; changes no cell.

use std::sync::Arc;

use crate::core::down::{self, DownKind};
use crate::core::entity::{Audience, Value};
use crate::core::geom::Vec3;
use crate::core::ids::EntityId;
use crate::core::view::{ClientView, ClientViewParams, Rule};
use crate::sim::report::ViolationKind;
use crate::sim::world::World;

/// Largest position difference (m) tolerated between a shown entity and its
/// real after healing (the wire may round).
pub const VIEW_POS_TOLERANCE_M: f64 = crate::core::view::POSITION_RESOLUTION_M;

/// Margin (m) inside a detail property's reach within which a client must
/// hold its current value after healing (the observer measures from
/// positions rounded to the wire's centimetres).
pub const DETAIL_REACH_MARGIN_M: f64 = 0.05;

/// The checker's kind for a broken client-view rule.
pub fn view_kind(rule: &Rule) -> ViolationKind {
    match rule {
        Rule::UpdateBeforeEnter | Rule::LeaveUnknown => ViolationKind::UpdateBeforeEnter,
        Rule::DoubleEnter | Rule::EntityTwice { .. } => ViolationKind::DoubleEnter,
        Rule::VersionGap { .. } => ViolationKind::VersionGap,
        Rule::AfterLeave => ViolationKind::UpdateAfterLeave,
        _ => ViolationKind::ViewDiverged,
    }
}

/// One client view per entity, for [`World::new`].
pub(super) fn new_views(world: &World, n: usize) -> Vec<ClientView> {
    (0..n)
        .map(|i| {
            ClientView::new(
                EntityId(i as u64),
                world.types.clone(),
                ClientViewParams::default(),
            )
        })
        .collect()
}

fn dist2(a: Vec3, b: Vec3) -> f64 {
    let (dx, dz) = (a.x - b.x, a.z - b.z);
    dx * dx + dz * dz
}

impl World {
    /// Feeds one view body delivered to `e`'s client (its
    /// [`DownKind::View`] byte, then the batch) into its view and reports
    /// every rule it breaks; any other body is not a view's (ignored).
    pub(super) fn feed_view(&mut self, e: EntityId, body: &Arc<[u8]>) {
        let batch = match down::split(body) {
            Ok((DownKind::View, batch)) => batch,
            // An acknowledgement alone writes no ViewBatch (the gateway's
            // `Session::take_down`).
            Ok((DownKind::ViewAcked, payload)) => match down::split_ack(payload) {
                Some((batch, _)) if !batch.is_empty() => batch,
                _ => return,
            },
            _ => return,
        };
        let i = e.0 as usize;
        let view = &mut self.views[i];
        let (count, kept) = (view.violation_count(), view.violations().len());
        view.handle_batch(batch);
        self.stats.view_batches += 1;
        self.last_view_batch[i] = Some(body.clone());
        let view = &self.views[i];
        if view.violation_count() == count {
            return;
        }
        let new = view.violations()[kept..].to_vec();
        let unkept = view.violation_count() - count - new.len() as u64;
        for v in new {
            let d = format!(
                "client view of {e}: batch {} handle {:?}: {:?}",
                v.batch, v.handle, v.rule
            );
            self.checker
                .report(self.tick, view_kind(&v.rule), Some(e), d);
        }
        if unkept > 0 {
            let d = format!("client view of {e}: {unkept} more broken rules");
            self.checker
                .report(self.tick, ViolationKind::ViewDiverged, Some(e), d);
        }
    }

    /// Feeds view batch `data` (the view codec's bytes) to `e`'s client
    /// view as if its proxy had delivered it (for tests that break a view
    /// on purpose).
    ///
    /// # Panics
    /// If `e` is not an entity of this world.
    pub fn inject_view_batch(&mut self, e: EntityId, data: &[u8]) {
        self.feed_view(e, &Arc::from(&*down::with_kind(DownKind::View, data)));
    }

    /// Replaces `e`'s client view (for tests that lose batches on purpose).
    ///
    /// # Panics
    /// If `e` is not an entity of this world.
    pub fn replace_client_view(&mut self, e: EntityId, view: ClientView) {
        self.views[e.0 as usize] = view;
    }

    /// The last view batch delivered to `e`'s client (the view codec's
    /// bytes, after the body's kind byte).
    ///
    /// # Panics
    /// If `e` is not an entity of this world.
    pub fn last_view_batch(&self, e: EntityId) -> Option<&[u8]> {
        let body = self.last_view_batch[e.0 as usize].as_deref()?;
        down::split(body).ok().map(|(_, batch)| batch)
    }

    /// `e`'s client view.
    ///
    /// # Panics
    /// If `e` is not an entity of this world.
    pub fn client_view(&self, e: EntityId) -> &ClientView {
        &self.views[e.0 as usize]
    }

    /// The real of `j`: its position and version.
    fn real_truth(&self, j: usize) -> Option<(Vec3, u64)> {
        let c = self.real_cell[j]?;
        let v = self.cells[c.0 as usize].view(EntityId(j as u64))?;
        Some((v.pos(), v.version))
    }

    /// The first property of `j` that a client `dist_m` away shows wrong
    /// (`shown`) against its real, skipping detail properties beyond reach
    /// (by more than [`DETAIL_REACH_MARGIN_M`] inside it).
    fn props_diverged(&self, j: usize, dist_m: f64, shown: &[Value]) -> Option<String> {
        let c = self.real_cell[j]?;
        let real = &self.cells[c.0 as usize].view(EntityId(j as u64))?.entity;
        let ty = real.props().entity_type();
        let budget = &self.cells[0].view_params().observer.budget;
        let truth = real.props().filtered(Audience::OtherClients);
        (ty.props().iter().zip(truth.iter().zip(shown)))
            .filter(|(p, _)| {
                p.detail
                    .is_none_or(|d| dist_m <= budget.reach_m(d) - DETAIL_REACH_MARGIN_M)
            })
            .find(|(_, (t, s))| t != s)
            .map(|(p, (t, s))| format!("{} shows {s:?}, real {t:?} at {dist_m:.1} m", p.name))
    }

    /// After healing: each client's view equals the truth (module doc).
    pub(super) fn check_views_converged(&mut self) {
        let vp = self.cells[0].view_params().clone();
        let (r2, leave2) = (vp.radius_m * vp.radius_m, vp.leave_radius_m.powi(2));
        let truth: Vec<Option<(Vec3, u64)>> = (0..self.real_cell.len())
            .map(|j| self.real_truth(j))
            .collect();
        let mut found = Vec::new();
        for (i, me) in truth.iter().enumerate() {
            let Some((p, _)) = *me else { continue };
            let view = &self.views[i];
            let near = (truth.iter().enumerate())
                .filter(|&(j, t)| j != i && t.is_some_and(|(q, _)| dist2(p, q) <= leave2))
                .count();
            for (j, t) in truth.iter().enumerate() {
                let Some((q, version)) = *t else { continue };
                if j == i {
                    continue;
                }
                let d2 = dist2(p, q);
                let problem = match view.find(EntityId(j as u64)) {
                    None if d2 <= r2 && near < vp.max_interest as usize => {
                        Some(format!("e{j} at {:.1} m not shown", d2.sqrt()))
                    }
                    None => None,
                    Some(_) if d2 > leave2 => {
                        Some(format!("e{j} shown at {:.1} m, beyond leave", d2.sqrt()))
                    }
                    Some(s) => {
                        let sp = s.replica.core().pos;
                        let off = dist2(sp, q).sqrt() > VIEW_POS_TOLERANCE_M;
                        let values = s.replica.props().values();
                        if s.version != version || off {
                            Some(format!(
                                "e{j} shown v{} {sp:?}, real v{version} {q:?}",
                                s.version
                            ))
                        } else {
                            (self.props_diverged(j, d2.sqrt(), values))
                                .map(|d| format!("e{j} v{version}: {d}"))
                        }
                    }
                };
                if let Some(d) = problem {
                    found.push((EntityId(i as u64), d));
                }
            }
            for s in view.shown().values() {
                if truth.get(s.entity.0 as usize).is_none_or(Option::is_none) {
                    found.push((EntityId(i as u64), format!("{} shown, no real", s.entity)));
                }
            }
        }
        for (e, d) in found {
            let d = format!("client view of {e} after healing: {d}");
            self.checker
                .report(self.tick, ViolationKind::ViewDiverged, Some(e), d);
        }
    }
}
