//! Sync flags (who may see a property) and audiences (who receives a payload).
//!
//! Owns the [`SyncFlags`] bitset and the [`Audience`] enum. It knows nothing of
//! values, schemas or messages.
//!
//! # The flag table
//!
//! A property always lives on the real. The flags add the *remote* audiences
//! that also receive it (BigWorld's names; `X` = receives the property):
//!
//! | flags                 | real | ghosts | own client | other clients |
//! |-----------------------|------|--------|------------|---------------|
//! | `CELL_PRIVATE`        |  X   |        |            |               |
//! | `CELL_PUBLIC`         |  X   |   X    |            |               |
//! | `OWN_CLIENT`          |  X   |        |     X      |               |
//! | `CELL_PUBLIC_AND_OWN` |  X   |   X    |     X      |               |
//! | `OTHER_CLIENTS`       |  X   |   X    |            |       X       |
//! | `ALL_CLIENTS`         |  X   |   X    |     X      |       X       |
//!
//! Rule: *other clients implies ghosts*. Observers in a neighbouring cell are
//! fed from the ghost there, so anything other clients see must be on the
//! ghost; [`SyncFlags::validate`] rejects `OTHERS` without `GHOSTS`. The own
//! client is fed by the real's cell directly, so `OWN_CLIENT` alone is legal
//! and keeps private data (an inventory) off every other machine.

/// A set of remote audiences that receive a property or record field.
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
#[rkyv(derive(Debug, PartialEq, Eq))]
pub struct SyncFlags(u8);

impl SyncFlags {
    /// Bit: the ghosts of the entity in neighbouring cells.
    pub const GHOSTS: u8 = 1;
    /// Bit: the client that owns (controls) the entity.
    pub const OWN: u8 = 2;
    /// Bit: the clients of other players that see the entity in their AOI.
    pub const OTHERS: u8 = 4;

    /// Real only.
    pub const CELL_PRIVATE: SyncFlags = SyncFlags(0);
    /// Real and ghosts.
    pub const CELL_PUBLIC: SyncFlags = SyncFlags(Self::GHOSTS);
    /// Real and the own client (never leaves the real's cell for a ghost).
    pub const OWN_CLIENT: SyncFlags = SyncFlags(Self::OWN);
    /// Real, ghosts and the own client.
    pub const CELL_PUBLIC_AND_OWN: SyncFlags = SyncFlags(Self::GHOSTS | Self::OWN);
    /// Real, ghosts and other clients (not the own client).
    pub const OTHER_CLIENTS: SyncFlags = SyncFlags(Self::GHOSTS | Self::OTHERS);
    /// Everyone.
    pub const ALL_CLIENTS: SyncFlags = SyncFlags(Self::GHOSTS | Self::OWN | Self::OTHERS);

    /// Flags from raw bits, or `None` if a bit is unknown or the set breaks
    /// the "other clients implies ghosts" rule.
    pub const fn from_bits(bits: u8) -> Option<SyncFlags> {
        let f = SyncFlags(bits);
        if f.validate() {
            Some(f)
        } else {
            None
        }
    }

    /// The raw bits.
    pub const fn bits(self) -> u8 {
        self.0
    }

    /// True if the bits are known and other clients imply ghosts.
    pub const fn validate(self) -> bool {
        let known = self.0 & !(Self::GHOSTS | Self::OWN | Self::OTHERS) == 0;
        let others_ok = self.0 & Self::OTHERS == 0 || self.0 & Self::GHOSTS != 0;
        known && others_ok
    }

    /// True if every audience in `self` is also in `other`.
    pub const fn is_subset_of(self, other: SyncFlags) -> bool {
        self.0 & !other.0 == 0
    }

    /// True if `audience` receives data carrying these flags.
    pub const fn visible_to(self, audience: Audience) -> bool {
        match audience {
            Audience::Real => true,
            Audience::Ghost => self.0 & Self::GHOSTS != 0,
            Audience::OwnClient => self.0 & Self::OWN != 0,
            Audience::OtherClients => self.0 & Self::OTHERS != 0,
        }
    }
}

impl std::fmt::Debug for SyncFlags {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match *self {
            Self::CELL_PRIVATE => "CELL_PRIVATE",
            Self::CELL_PUBLIC => "CELL_PUBLIC",
            Self::OWN_CLIENT => "OWN_CLIENT",
            Self::CELL_PUBLIC_AND_OWN => "CELL_PUBLIC_AND_OWN",
            Self::OTHER_CLIENTS => "OTHER_CLIENTS",
            Self::ALL_CLIENTS => "ALL_CLIENTS",
            _ => return write!(f, "SyncFlags({:#05b})", self.0),
        };
        f.write_str(name)
    }
}

/// Who a payload is encoded for (and who a replica holds data for).
#[derive(
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Debug,
    rkyv::Archive,
    rkyv::Serialize,
    rkyv::Deserialize,
)]
#[rkyv(derive(Debug, PartialEq, Eq))]
pub enum Audience {
    /// The real itself: every property (used to carry a real across a migration).
    Real,
    /// A ghost in a neighbouring cell.
    Ghost,
    /// The client controlling the entity.
    OwnClient,
    /// The clients of observers that have the entity in their AOI.
    OtherClients,
}

impl Audience {
    /// The three remote audiences, in the order payloads are built.
    pub const REMOTE: [Audience; 3] =
        [Audience::Ghost, Audience::OwnClient, Audience::OtherClients];

    /// Index among [`Audience::REMOTE`] (0..3), `None` for [`Audience::Real`].
    pub const fn remote_index(self) -> Option<usize> {
        match self {
            Audience::Real => None,
            Audience::Ghost => Some(0),
            Audience::OwnClient => Some(1),
            Audience::OtherClients => Some(2),
        }
    }

    /// True if every property visible to `self` is also visible to `holder`,
    /// i.e. a replica for `holder` can produce payloads for `self`.
    pub const fn can_be_served_by(self, holder: Audience) -> bool {
        matches!(
            (holder, self),
            (Audience::Real, _)
                | (Audience::Ghost, Audience::Ghost)
                | (Audience::Ghost, Audience::OtherClients)
                | (Audience::OwnClient, Audience::OwnClient)
                | (Audience::OtherClients, Audience::OtherClients)
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_matches_bigworld() {
        use Audience::*;
        let rows = [
            (SyncFlags::CELL_PRIVATE, [false, false, false]),
            (SyncFlags::CELL_PUBLIC, [true, false, false]),
            (SyncFlags::OWN_CLIENT, [false, true, false]),
            (SyncFlags::CELL_PUBLIC_AND_OWN, [true, true, false]),
            (SyncFlags::OTHER_CLIENTS, [true, false, true]),
            (SyncFlags::ALL_CLIENTS, [true, true, true]),
        ];
        for (flags, want) in rows {
            assert!(flags.validate(), "{flags:?}");
            assert!(flags.visible_to(Real));
            let got = [
                flags.visible_to(Ghost),
                flags.visible_to(OwnClient),
                flags.visible_to(OtherClients),
            ];
            assert_eq!(got, want, "{flags:?}");
        }
    }

    #[test]
    fn others_without_ghosts_is_rejected() {
        assert!(SyncFlags::from_bits(SyncFlags::OTHERS).is_none());
        assert!(SyncFlags::from_bits(SyncFlags::OTHERS | SyncFlags::OWN).is_none());
        assert!(SyncFlags::from_bits(8).is_none());
        assert_eq!(SyncFlags::from_bits(7), Some(SyncFlags::ALL_CLIENTS));
    }

    #[test]
    fn ghost_replica_serves_other_clients() {
        // Every valid flag set visible to others is visible to ghosts.
        for bits in 0..8u8 {
            let Some(f) = SyncFlags::from_bits(bits) else {
                continue;
            };
            if f.visible_to(Audience::OtherClients) {
                assert!(f.visible_to(Audience::Ghost));
            }
        }
        assert!(Audience::OtherClients.can_be_served_by(Audience::Ghost));
        assert!(!Audience::OwnClient.can_be_served_by(Audience::Ghost));
    }
}
