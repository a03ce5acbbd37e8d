//! Identifiers shared by every layer.
//!
//! Plain newtypes over integers: cheap to copy, totally ordered (so they can key
//! `BTreeMap`s in the deterministic core) and serialisable with rkyv for the
//! wire. A shard's address is `(node, shard)` from the start, so several hosts
//! need no redesign.

use std::fmt;

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident($inner:ty), $prefix:literal) => {
        $(#[$meta])*
        #[derive(
            Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default,
            rkyv::Archive, rkyv::Serialize, rkyv::Deserialize,
        )]
        #[rkyv(derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash), compare(PartialEq))]
        pub struct $name(pub $inner);

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!($prefix, "{}"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Debug::fmt(self, f)
            }
        }
    };
}

id_type!(
    /// An entity, unique in the whole world for the life of the server.
    EntityId(u64), "e"
);
id_type!(
    /// A cell (a leaf of the space tree). Never reused within one space.
    CellId(u32), "c"
);
id_type!(
    /// A space (one world map or one instance of it).
    SpaceId(u32), "s"
);
id_type!(
    /// A host running shards. Single-host deployments use node 0.
    NodeId(u16), "n"
);

/// One executor (one pinned core) on one node.
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Default,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(
    derive(Debug, PartialEq, Eq, PartialOrd, Ord, Hash),
    compare(PartialEq)
)]
pub struct ShardId {
    /// The host.
    pub node: NodeId,
    /// The executor's index on that host, from 0.
    pub index: u16,
}

impl ShardId {
    /// Shard `index` on node 0 (single-host deployments).
    pub const fn local(index: u16) -> Self {
        ShardId {
            node: NodeId(0),
            index,
        }
    }
}

impl fmt::Debug for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.node, self.index)
    }
}

impl fmt::Display for ShardId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(self, f)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_format_with_their_prefix() {
        assert_eq!(format!("{}", EntityId(7)), "e7");
        assert_eq!(format!("{:?}", CellId(3)), "c3");
        assert_eq!(format!("{}", ShardId::local(2)), "n0/2");
    }

    #[test]
    fn ids_round_trip_through_rkyv() {
        let shard = ShardId {
            node: NodeId(1),
            index: 9,
        };
        let bytes = rkyv::to_bytes::<rkyv::rancor::Error>(&shard).expect("serialise");
        let back: ShardId =
            rkyv::from_bytes::<ShardId, rkyv::rancor::Error>(&bytes).expect("deserialise");
        assert_eq!(back, shard);
    }
}
