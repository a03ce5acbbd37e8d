//! [`Travel`]: where a session's avatar is among the spaces, and its one
//! space change at a time.
//!
//! A client asks to enter a space (EnterSpace); the host sends the request
//! to the directory on shard 0 (`server::spaces`). While the change is
//! under way the client must not move (its Moves are in the old space's
//! coordinates): the session drops them (acknowledged, not applied). The
//! change ends when the real's `DOWN_SPACE` notice passes downstream (the
//! session writes SpaceChanged and the move limiter restarts at the new
//! position), or when the directory refuses (an Error naming the rule).
//!
//! Also remembers the space the directory counts the player in (for a
//! disconnect) and where the avatar left the world (the way back). Owns
//! no frames; must not touch the proxy or the host.

use crate::core::geom::Vec3;
use crate::core::ids::SpaceId;

/// The space state of one session.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Travel {
    /// The space the avatar is in (as the client was told).
    pub space: SpaceId,
    /// Its type.
    pub type_id: u32,
    /// A change is under way (requested, not yet arrived or refused).
    pub pending: bool,
    /// The space the directory counts the player in.
    pub counted: SpaceId,
    /// Where the avatar left the world (the way back), if it did.
    pub world_exit: Option<Vec3>,
    /// Where the move limiter restarts at the next Move (after arriving).
    pub restart_at: Option<Vec3>,
    /// Moves dropped during changes.
    pub moves_dropped: u64,
    world: SpaceId,
}

impl Travel {
    /// In the world `world` (of type `world_type`).
    pub fn new(world: SpaceId, world_type: u32) -> Travel {
        Travel {
            space: world,
            type_id: world_type,
            pending: false,
            counted: world,
            world_exit: None,
            restart_at: None,
            moves_dropped: 0,
            world,
        }
    }

    /// The world's space id.
    pub fn world(&self) -> SpaceId {
        self.world
    }

    /// The avatar arrived in `space` at `pos`, having left `from`.
    pub fn arrived(&mut self, space: SpaceId, type_id: u32, pos: Vec3, from: Vec3) {
        if self.space == self.world && space != self.world {
            self.world_exit = Some(from);
        }
        self.space = space;
        self.type_id = type_id;
        self.pending = false;
        self.restart_at = Some(pos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_way_back_is_where_the_world_was_left() {
        let mut t = Travel::new(SpaceId(1), 1);
        t.pending = true;
        let (a, b) = (Vec3::ground(5.0, 6.0), Vec3::ground(50.0, 60.0));
        t.arrived(SpaceId(100), 2, a, b);
        assert_eq!(
            (t.space, t.pending, t.world_exit),
            (SpaceId(100), false, Some(b))
        );
        t.arrived(SpaceId(101), 3, b, a);
        assert_eq!(t.world_exit, Some(b), "kept across instances");
        assert_eq!(t.restart_at, Some(b));
    }
}
