//! Where a logged-in client's avatar appears, and what it starts with.
//!
//! Owns [`SpawnRule`] (config `gateway.spawn`: `"random"`, seeded by
//! `gateway.spawn_seed` and the shard index, or `"center"`) and the
//! avatar's starting properties ([`new_avatar`]). Must not touch cells or
//! routing.

use std::sync::Arc;

use crate::core::entity::{Entity, EntityType, Value};
use crate::core::geom::{Rect, Vec3};
use crate::core::ids::EntityId;

/// Starting hit points of an avatar.
pub const AVATAR_HP: i64 = 100;

/// Draws a random spawn tries for a point on the accepting shard.
pub const SPAWN_LOCAL_TRIES: usize = 16;

/// The spawn rule of one shard.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SpawnRule {
    /// Uniform over the world, from a splitmix64 state.
    Random(u64),
    /// The world's centre.
    Center,
}

impl SpawnRule {
    /// The rule named `name` (`"random"` or `"center"`; anything else is
    /// `"center"`, the config validates the name) for shard `shard`.
    pub fn new(name: &str, seed: u64, shard: u16) -> SpawnRule {
        match name {
            "random" => SpawnRule::Random(seed ^ (u64::from(shard) << 32) ^ 0x5EED),
            _ => SpawnRule::Center,
        }
    }

    /// The next spawn point in `world` for which `local` holds, if a random
    /// rule finds one within [`SPAWN_LOCAL_TRIES`] draws (else the last
    /// draw): uniform over the part of the world where `local` holds.
    pub fn next_where(&mut self, world: &Rect, local: impl Fn(Vec3) -> bool) -> Vec3 {
        let mut p = self.next(world);
        if matches!(self, SpawnRule::Random(_)) {
            for _ in 1..SPAWN_LOCAL_TRIES {
                if local(p) {
                    break;
                }
                p = self.next(world);
            }
        }
        p
    }

    /// The next spawn point in `world`.
    pub fn next(&mut self, world: &Rect) -> Vec3 {
        match self {
            SpawnRule::Center => {
                let c = world.center();
                Vec3::ground(c.x, c.z)
            }
            SpawnRule::Random(state) => {
                let fx = unit(splitmix(state));
                let fz = unit(splitmix(state));
                Vec3::ground(
                    world.min_x + fx * world.width(),
                    world.min_z + fz * world.depth(),
                )
            }
        }
    }
}

fn splitmix(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A float in `[0, 1)` from 53 random bits.
fn unit(bits: u64) -> f64 {
    (bits >> 11) as f64 / (1u64 << 53) as f64
}

/// A new avatar real: `name` (cut to the type's string limit), level 1,
/// full hp, and a faction of its own (every player may hit every other).
pub fn new_avatar(id: EntityId, ty: &Arc<EntityType>, pos: Vec3, name: &str) -> Entity {
    let mut e = Entity::new_real(id, ty.clone(), pos, 0.0);
    let limit = ty.limits().str_len_max;
    let mut end = name.len().min(limit);
    while !name.is_char_boundary(end) {
        end -= 1;
    }
    let faction = (id.0 & 0xFFFF_FFFF) + (id.0 >> 48) * 1_000_003 + 1;
    let values = [
        ("name", Value::Str(name[..end].to_owned())),
        ("level", Value::UInt(1)),
        ("hp", Value::Int(AVATAR_HP)),
        ("max_hp", Value::Int(AVATAR_HP)),
        ("faction", Value::UInt(faction)),
    ];
    for (prop, v) in values {
        if let Some(i) = ty.prop_index(prop) {
            let _ = e.props_mut().set(i, v);
        }
    }
    e
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::entity::{TypeRegistry, AVATAR};

    #[test]
    fn random_spawns_are_seeded_and_inside_the_world() {
        let w = Rect::new(-50.0, 0.0, 50.0, 200.0);
        let mut a = SpawnRule::new("random", 7, 1);
        let mut b = SpawnRule::new("random", 7, 1);
        let mut c = SpawnRule::new("random", 7, 2);
        let pa: Vec<Vec3> = (0..50).map(|_| a.next(&w)).collect();
        let pb: Vec<Vec3> = (0..50).map(|_| b.next(&w)).collect();
        assert_eq!(pa, pb);
        assert_ne!(pa[0], c.next(&w));
        assert!(pa.iter().all(|p| w.contains(*p)));
        assert_eq!(
            SpawnRule::new("center", 7, 1).next(&w),
            Vec3::ground(0.0, 100.0)
        );
    }

    #[test]
    fn a_local_spawn_lands_where_asked_and_center_ignores_it() {
        let w = Rect::new(0.0, 0.0, 100.0, 100.0);
        let mut r = SpawnRule::new("random", 3, 0);
        for _ in 0..200 {
            assert!(r.next_where(&w, |p| p.x < 50.0).x < 50.0);
        }
        let mut c = SpawnRule::new("center", 3, 0);
        assert_eq!(c.next_where(&w, |p| p.x < 10.0), Vec3::ground(50.0, 50.0));
        // Nowhere local: the last draw, still in the world.
        assert!(w.contains(r.next_where(&w, |_| false)));
    }

    #[test]
    fn avatars_start_alive_with_their_name() {
        let reg = TypeRegistry::with_builtins();
        let ty = reg.get(AVATAR).expect("avatar");
        let e = new_avatar(EntityId(5), ty, Vec3::ground(1.0, 2.0), "ann");
        let get = |n: &str| e.props().get(ty.prop_index(n).expect("prop")).cloned();
        assert_eq!(get("name"), Some(Value::Str("ann".into())));
        assert_eq!(get("hp"), Some(Value::Int(AVATAR_HP)));
        let other = new_avatar(EntityId(6), ty, Vec3::ground(1.0, 2.0), "bo");
        let f = |e: &Entity| e.props().get(ty.prop_index("faction").expect("f")).cloned();
        assert_ne!(f(&e), f(&other));
    }
}
