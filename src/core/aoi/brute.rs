//! [`BruteAoi`]: the brute-force oracle. Every update recomputes every area's
//! set from scratch over every entity, straight from the rules in the module
//! doc of [`crate::core::aoi`], with ordered maps and no cleverness.
//!
//! It shares only the pure rule functions of `types.rs` with the grid
//! (validation, `FlagFilter::accepts`, `HeightBand::accepts`, `dist2`) and
//! must not share any of the grid's bookkeeping.

use super::types::{check_position, dist2, AoiError, AoiEvent, AoiParams, AreaId, AreaSpec};
use super::{AoiIndex, EventKind, FlagFilter};
use crate::core::geom::{Shape, Vec3};
use crate::core::ids::EntityId;
use std::collections::{BTreeMap, BTreeSet};

#[derive(Clone, Debug)]
struct BEnt {
    pos: Vec3,
    flags: u64,
    /// Distinguishes a removed-and-re-added id from the original.
    incarnation: u64,
    areas: usize,
}

#[derive(Clone, Debug)]
struct BArea {
    owner: EntityId,
    spec: AreaSpec,
    members: BTreeSet<(EntityId, u64)>,
    forced: BTreeSet<EntityId>,
}

/// Brute-force AOI: O(areas x entities) per update. The oracle.
#[derive(Clone, Debug)]
pub struct BruteAoi {
    params: AoiParams,
    ents: BTreeMap<EntityId, BEnt>,
    areas: BTreeMap<AreaId, BArea>,
    next_area: u64,
    next_incarnation: u64,
}

impl BruteAoi {
    /// An empty index.
    ///
    /// # Errors
    /// [`AoiError::Params`] when `params` is unusable.
    pub fn new(params: AoiParams) -> Result<Self, AoiError> {
        params.validate()?;
        Ok(BruteAoi {
            params,
            ents: BTreeMap::new(),
            areas: BTreeMap::new(),
            next_area: 1,
            next_incarnation: 0,
        })
    }

    fn ent_mut(&mut self, id: EntityId) -> Result<&mut BEnt, AoiError> {
        self.ents.get_mut(&id).ok_or(AoiError::UnknownEntity(id))
    }

    /// The new set of one area.
    fn recompute(&self, area: &BArea) -> BTreeSet<(EntityId, u64)> {
        let owner = &self.ents[&area.owner];
        let spec = &area.spec;
        let (re2, rl) = (spec.radius_m * spec.radius_m, spec.leave_radius());
        let rl2 = rl * rl;
        let mut forced = BTreeSet::new();
        let mut others: Vec<(f64, EntityId, u64)> = Vec::new();
        for (&id, e) in &self.ents {
            if id == area.owner {
                continue;
            }
            let key = (id, e.incarnation);
            if area.forced.contains(&id) {
                forced.insert(key);
                continue;
            }
            let passes = spec.filter.accepts(e.flags)
                && spec.height.is_none_or(|h| h.accepts(owner.pos.y, e.pos.y));
            let d2 = dist2(owner.pos, e.pos);
            let inside = d2 <= re2 || (d2 <= rl2 && area.members.contains(&key));
            if passes && inside {
                others.push((d2, id, e.incarnation));
            }
        }
        if let Some(cap) = spec.max_interest {
            others.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            others.truncate((cap as usize).saturating_sub(forced.len()));
        }
        forced.extend(others.into_iter().map(|(_, id, inc)| (id, inc)));
        forced
    }
}

impl AoiIndex for BruteAoi {
    fn add_entity(&mut self, id: EntityId, pos: Vec3, flags: u64) -> Result<(), AoiError> {
        check_position(pos)?;
        if self.ents.contains_key(&id) {
            return Err(AoiError::DuplicateEntity(id));
        }
        if self.ents.len() >= self.params.max_entities {
            return Err(AoiError::Full {
                what: "max_entities",
                max: self.params.max_entities,
            });
        }
        self.next_incarnation += 1;
        let incarnation = self.next_incarnation;
        self.ents.insert(
            id,
            BEnt {
                pos,
                flags,
                incarnation,
                areas: 0,
            },
        );
        Ok(())
    }

    fn remove_entity(&mut self, id: EntityId) -> Result<(), AoiError> {
        self.ents.remove(&id).ok_or(AoiError::UnknownEntity(id))?;
        self.areas.retain(|_, a| a.owner != id);
        for a in self.areas.values_mut() {
            a.forced.remove(&id);
        }
        Ok(())
    }

    fn set_position(&mut self, id: EntityId, pos: Vec3) -> Result<(), AoiError> {
        check_position(pos)?;
        self.ent_mut(id)?.pos = pos;
        Ok(())
    }

    fn set_flags(&mut self, id: EntityId, flags: u64) -> Result<(), AoiError> {
        self.ent_mut(id)?.flags = flags;
        Ok(())
    }

    fn add_area(&mut self, owner: EntityId, spec: AreaSpec) -> Result<AreaId, AoiError> {
        spec.validate()?;
        let (limit, max_areas) = (self.params.max_areas_per_entity, self.params.max_areas);
        let n_areas = self.areas.len();
        let e = self.ent_mut(owner)?;
        if e.areas >= limit {
            return Err(AoiError::Full {
                what: "max_areas_per_entity",
                max: limit,
            });
        }
        if n_areas >= max_areas {
            return Err(AoiError::Full {
                what: "max_areas",
                max: max_areas,
            });
        }
        e.areas += 1;
        let id = AreaId(self.next_area);
        self.next_area += 1;
        let area = BArea {
            owner,
            spec,
            members: BTreeSet::new(),
            forced: BTreeSet::new(),
        };
        self.areas.insert(id, area);
        Ok(id)
    }

    fn remove_area(&mut self, area: AreaId) -> Result<(), AoiError> {
        let a = self
            .areas
            .remove(&area)
            .ok_or(AoiError::UnknownArea(area))?;
        if let Some(e) = self.ents.get_mut(&a.owner) {
            e.areas -= 1;
        }
        Ok(())
    }

    fn set_area_spec(&mut self, area: AreaId, spec: AreaSpec) -> Result<(), AoiError> {
        spec.validate()?;
        let a = self
            .areas
            .get_mut(&area)
            .ok_or(AoiError::UnknownArea(area))?;
        a.spec = spec;
        Ok(())
    }

    fn force(&mut self, area: AreaId, entity: EntityId) -> Result<(), AoiError> {
        let max = self.params.max_forced_per_area;
        let known = self.ents.contains_key(&entity);
        let a = self
            .areas
            .get_mut(&area)
            .ok_or(AoiError::UnknownArea(area))?;
        if !known {
            return Err(AoiError::UnknownEntity(entity));
        }
        if a.owner == entity {
            return Err(AoiError::SelfInterest(area));
        }
        if !a.forced.contains(&entity) && a.forced.len() >= max {
            return Err(AoiError::Full {
                what: "max_forced_per_area",
                max,
            });
        }
        a.forced.insert(entity);
        Ok(())
    }

    fn unforce(&mut self, area: AreaId, entity: EntityId) -> Result<bool, AoiError> {
        let known = self.ents.contains_key(&entity);
        let a = self
            .areas
            .get_mut(&area)
            .ok_or(AoiError::UnknownArea(area))?;
        if !known {
            return Err(AoiError::UnknownEntity(entity));
        }
        Ok(a.forced.remove(&entity))
    }

    fn update(&mut self, out: &mut Vec<AoiEvent>) {
        let ids: Vec<AreaId> = self.areas.keys().copied().collect();
        self.update_due(out, &ids);
    }

    fn update_due(&mut self, out: &mut Vec<AoiEvent>, due: &[AreaId]) {
        out.clear();
        let ids: Vec<AreaId> = self
            .areas
            .keys()
            .copied()
            .filter(|id| due.contains(id))
            .collect();
        for id in ids {
            let new = self.recompute(&self.areas[&id]);
            let a = self.areas.get_mut(&id).expect("listed above");
            let ev = |kind, entity| AoiEvent {
                area: id,
                owner: a.owner,
                entity,
                kind,
            };
            for &(e, _) in a.members.difference(&new) {
                out.push(ev(EventKind::Leave, e));
            }
            for &(e, _) in new.difference(&a.members) {
                out.push(ev(EventKind::Enter, e));
            }
            a.members = new;
        }
    }

    fn interest(&self, area: AreaId, out: &mut Vec<EntityId>) -> Result<(), AoiError> {
        let a = self.areas.get(&area).ok_or(AoiError::UnknownArea(area))?;
        out.clear();
        out.extend(a.members.iter().map(|&(e, _)| e));
        Ok(())
    }

    fn query(
        &self,
        shape: &Shape,
        filter: &FlagFilter,
        out: &mut Vec<EntityId>,
    ) -> Result<(), AoiError> {
        shape.validate()?;
        out.clear();
        for (&id, e) in &self.ents {
            if filter.accepts(e.flags) && shape.contains(e.pos) {
                out.push(id);
            }
        }
        Ok(())
    }

    fn position(&self, id: EntityId) -> Option<Vec3> {
        self.ents.get(&id).map(|e| e.pos)
    }

    fn entity_count(&self) -> usize {
        self.ents.len()
    }
}
