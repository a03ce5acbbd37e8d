//! End-to-end update latency: matching what an observer sees with when the
//! mover sent it.
//!
//! The view protocol carries no mover timestamp, but the server applies a
//! Move input's position exactly and the view carries it quantised to
//! [`POSITION_RESOLUTION_M`] (tags are taken on that grid), and every bot of the run
//! lives in this process on one clock. So [`MoveBook`] keeps, for each bot,
//! a ring of the last [`RING_SLOTS`] positions it sent with their send
//! times, and maps the bot's entity id (from its Welcome) to the bot. An
//! observer that receives a Move of entity `E` at position `P` asks the
//! book: which bot is `E`, and when did that bot send `P`? The difference
//! to the receipt time is the end-to-end latency (client encode, TCP, the
//! server's input handling, real/ghost sync, view batching, TCP, decode).
//! Positions a bot repeats (standing still) match the latest send, which
//! can only understate; unmatched updates (NPCs, positions older than the
//! ring) are counted, not timed.
//!
//! The book is shared by every executor thread: slots are atomics written
//! by the one thread that owns the bot and read by any observer; a slot is
//! published by writing its time last (0 = being written) and a reader
//! re-checks the tag after reading the time, so a torn read is discarded.
//! The entity map is behind an `RwLock` (written once per login), with a
//! per-thread [`EntityCache`] in front of it and, in front of that, each
//! observer's [`HandleBots`] (by handle: no hashing per update).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU32, AtomicU64, Ordering};
use std::sync::RwLock;

use tessera::core::geom::Vec3;
use tessera::core::ids::EntityId;
use tessera::core::time::Time;
use tessera::core::view::codec::quantise;
#[cfg(doc)]
use tessera::core::view::POSITION_RESOLUTION_M;

/// Positions remembered per bot (6.4 s of moves at 10 Hz).
pub const RING_SLOTS: usize = 64;

#[derive(Default)]
struct Slot {
    tag: AtomicU64,
    at_us: AtomicU64,
}

struct Ring {
    head: AtomicU32,
    slots: [Slot; RING_SLOTS],
}

impl Default for Ring {
    fn default() -> Self {
        Ring {
            head: AtomicU32::new(0),
            slots: std::array::from_fn(|_| Slot::default()),
        }
    }
}

/// A 64-bit tag of a ground position on the wire's grid (never 0): the
/// view carries positions quantised to [`POSITION_RESOLUTION_M`], so a sent
/// position and the one an observer decodes share the tag.
pub fn pos_tag(pos: Vec3) -> u64 {
    let q = quantise(pos);
    let mut h = (q[0] as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    h ^= (q[2] as u64)
        .rotate_left(31)
        .wrapping_mul(0xc2b2_ae3d_27d4_eb4f);
    h ^= h >> 29;
    h | 1
}

/// Sent positions of every bot and the entity of each (see the module doc).
pub struct MoveBook {
    rings: Box<[Ring]>,
    entities: RwLock<HashMap<u64, u32>>,
    generation: AtomicU64,
}

impl std::fmt::Debug for MoveBook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MoveBook")
            .field("bots", &self.rings.len())
            .finish_non_exhaustive()
    }
}

impl MoveBook {
    /// A book for `bots` bots.
    pub fn new(bots: usize) -> Self {
        MoveBook {
            rings: (0..bots).map(|_| Ring::default()).collect(),
            entities: RwLock::new(HashMap::with_capacity(bots)),
            generation: AtomicU64::new(0),
        }
    }

    /// Bot `bot` plays entity `entity` (after its Welcome).
    pub fn register(&self, bot: u32, entity: EntityId) {
        let mut map = self.entities.write().unwrap_or_else(|p| p.into_inner());
        map.insert(entity.0, bot);
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// The bot playing `entity`, if any.
    pub fn bot_of(&self, entity: EntityId) -> Option<u32> {
        let map = self.entities.read().unwrap_or_else(|p| p.into_inner());
        map.get(&entity.0).copied()
    }

    /// Changes whenever an entity is registered.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Bot `bot` sent a move to `pos` at `at` (only its own thread calls
    /// this for a given bot).
    ///
    /// # Panics
    /// If `bot` is out of range.
    pub fn record(&self, bot: u32, pos: Vec3, at: Time) {
        let ring = &self.rings[bot as usize];
        let i = ring.head.load(Ordering::Relaxed) as usize % RING_SLOTS;
        let slot = &ring.slots[i];
        slot.at_us.store(0, Ordering::Release);
        slot.tag.store(pos_tag(pos), Ordering::Release);
        slot.at_us.store(at.0.max(1), Ordering::Release);
        ring.head.store((i + 1) as u32, Ordering::Release);
    }

    /// When bot `bot` last sent `pos` (newest first), if still remembered.
    pub fn sent_at(&self, bot: u32, pos: Vec3) -> Option<Time> {
        let ring = self.rings.get(bot as usize)?;
        let tag = pos_tag(pos);
        let head = ring.head.load(Ordering::Acquire) as usize;
        for k in 1..=RING_SLOTS {
            let slot = &ring.slots[(head + RING_SLOTS - k) % RING_SLOTS];
            if slot.tag.load(Ordering::Acquire) != tag {
                continue;
            }
            let at = slot.at_us.load(Ordering::Acquire);
            if at != 0 && slot.tag.load(Ordering::Acquire) == tag {
                return Some(Time(at));
            }
        }
        None
    }
}

/// A hasher for entity ids (one `u64` each): a multiply by an odd
/// constant, so consecutive ids spread over the table's low bits and fill
/// its high (tag) bits. The cache is asked once per update received, where
/// the default SipHash cost more than the rest of the lookup; the keys come
/// from the server, but a collision only costs time.
#[derive(Clone, Copy, Debug, Default)]
pub struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = (self.0.rotate_left(8) ^ u64::from(b)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        }
    }

    fn write_u64(&mut self, x: u64) {
        self.0 = (self.0 ^ x).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
}

/// Builds [`IdHasher`]s.
pub type IdHash = std::hash::BuildHasherDefault<IdHasher>;

/// A per-thread cache of [`MoveBook::bot_of`] (answers, including "not a
/// bot", are kept until the book's generation changes).
#[derive(Debug, Default)]
pub struct EntityCache {
    map: HashMap<u64, Option<u32>, IdHash>,
    generation: u64,
}

impl EntityCache {
    /// The bot playing `entity`, through the cache.
    pub fn bot_of(&mut self, book: &MoveBook, entity: EntityId) -> Option<u32> {
        let g = book.generation();
        if g != self.generation {
            self.map.retain(|_, v| v.is_some());
            self.generation = g;
        }
        *self
            .map
            .entry(entity.0)
            .or_insert_with(|| book.bot_of(entity))
    }
}

/// One observer's memory of which bot each of its handles shows, in front
/// of the thread's [`EntityCache`]: indexed by handle (the server's are
/// small and dense), so an update of an entity already matched costs no
/// hash lookup. An entry holds the entity it was found for, so a handle
/// reused for another entity is looked up again; only bots are kept (an
/// entity that is not a bot yet may become one: its Welcome may come
/// later).
#[derive(Debug, Default)]
pub struct HandleBots {
    slots: Vec<(u64, u32)>,
}

/// Handles at or above this are not kept by [`HandleBots`] (always looked
/// up in the cache).
const HANDLE_BOTS_MAX: u32 = 1024;

impl HandleBots {
    /// The bot playing `entity`, shown under `handle`.
    pub fn bot_of(
        &mut self,
        book: &MoveBook,
        cache: &mut EntityCache,
        handle: Option<u32>,
        entity: EntityId,
    ) -> Option<u32> {
        let Some(h) = handle.filter(|&h| h < HANDLE_BOTS_MAX) else {
            return cache.bot_of(book, entity);
        };
        let i = h as usize;
        if let Some(&(e, bot)) = self.slots.get(i) {
            if e == entity.0 && bot != u32::MAX {
                return Some(bot);
            }
        }
        let bot = cache.bot_of(book, entity)?;
        if i >= self.slots.len() {
            self.slots.resize(i + 1, (0, u32::MAX));
        }
        self.slots[i] = (entity.0, bot);
        Some(bot)
    }
}

/// The end-to-end latency of an update of `entity` at `pos` received at
/// `received`, if `entity` is a bot and it sent `pos`.
pub fn match_update(
    book: &MoveBook,
    cache: &mut EntityCache,
    entity: EntityId,
    pos: Vec3,
    received: Time,
) -> Option<u64> {
    let bot = cache.bot_of(book, entity)?;
    latency_of(book, bot, pos, received)
}

/// The end-to-end latency of an update of bot `bot` at `pos` received at
/// `received`, if it sent `pos`.
pub fn latency_of(book: &MoveBook, bot: u32, pos: Vec3, received: Time) -> Option<u64> {
    let sent = book.sent_at(bot, pos)?;
    Some(received.saturating_since(sent).as_micros() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_observer_finds_when_the_mover_sent_a_position() {
        let book = MoveBook::new(3);
        let mut cache = EntityCache::default();
        book.register(1, EntityId(77));
        for k in 0..10u64 {
            book.record(1, Vec3::ground(k as f64, 5.0), Time(1_000 + k * 100));
        }
        let lat = match_update(
            &book,
            &mut cache,
            EntityId(77),
            Vec3::ground(4.0, 5.0),
            Time(2_000),
        );
        assert_eq!(lat, Some(2_000 - 1_400));
        // Not a bot, or a position never sent.
        assert_eq!(
            match_update(
                &book,
                &mut cache,
                EntityId(5),
                Vec3::ground(4.0, 5.0),
                Time(2_000)
            ),
            None
        );
        assert_eq!(
            match_update(
                &book,
                &mut cache,
                EntityId(77),
                Vec3::ground(4.5, 5.0),
                Time(2_000)
            ),
            None
        );
    }

    #[test]
    fn the_ring_forgets_old_positions_and_prefers_the_newest() {
        let book = MoveBook::new(1);
        for k in 0..(RING_SLOTS as u64 + 10) {
            book.record(0, Vec3::ground(k as f64, 0.0), Time(10 + k));
        }
        assert_eq!(book.sent_at(0, Vec3::ground(0.0, 0.0)), None);
        assert_eq!(book.sent_at(0, Vec3::ground(9.0, 0.0)), None);
        assert_eq!(book.sent_at(0, Vec3::ground(10.0, 0.0)), Some(Time(20)));
        book.record(0, Vec3::ground(10.0, 0.0), Time(500));
        assert_eq!(book.sent_at(0, Vec3::ground(10.0, 0.0)), Some(Time(500)));
        assert_eq!(book.sent_at(9, Vec3::ground(10.0, 0.0)), None);
    }

    #[test]
    fn handles_remember_their_bot_until_reused_for_another_entity() {
        let book = MoveBook::new(3);
        let mut cache = EntityCache::default();
        let mut hb = HandleBots::default();
        book.register(2, EntityId(70));
        book.register(1, EntityId(71));
        assert_eq!(hb.bot_of(&book, &mut cache, Some(4), EntityId(70)), Some(2));
        assert_eq!(hb.bot_of(&book, &mut cache, Some(4), EntityId(70)), Some(2));
        // Handle 4 reused for another entity; one not a bot yet.
        assert_eq!(hb.bot_of(&book, &mut cache, Some(4), EntityId(71)), Some(1));
        assert_eq!(hb.bot_of(&book, &mut cache, Some(5), EntityId(72)), None);
        book.register(0, EntityId(72));
        assert_eq!(hb.bot_of(&book, &mut cache, Some(5), EntityId(72)), Some(0));
        assert_eq!(hb.bot_of(&book, &mut cache, None, EntityId(70)), Some(2));
        assert_eq!(
            hb.bot_of(&book, &mut cache, Some(u32::MAX), EntityId(71)),
            Some(1)
        );
    }

    #[test]
    fn the_cache_learns_new_bots() {
        let book = MoveBook::new(2);
        let mut cache = EntityCache::default();
        assert_eq!(cache.bot_of(&book, EntityId(9)), None);
        book.register(0, EntityId(9));
        assert_eq!(cache.bot_of(&book, EntityId(9)), Some(0));
    }

    #[test]
    fn tags_differ_for_swapped_and_nearby_positions() {
        let a = pos_tag(Vec3::ground(1.0, 2.0));
        assert_ne!(a, pos_tag(Vec3::ground(2.0, 1.0)));
        assert_ne!(a, pos_tag(Vec3::ground(1.01, 2.0)), "one centimetre apart");
        assert_eq!(
            a,
            pos_tag(Vec3::ground(1.0 + 1e-9, 2.0)),
            "the same on the wire's grid: what an observer decodes matches"
        );
        assert_ne!(pos_tag(Vec3::ground(0.0, 0.0)), 0);
    }

    #[test]
    fn concurrent_readers_never_see_a_wrong_time() {
        let book = std::sync::Arc::new(MoveBook::new(1));
        let writer = {
            let book = book.clone();
            std::thread::spawn(move || {
                for k in 1..200_000u64 {
                    book.record(0, Vec3::ground(k as f64, 0.0), Time(k));
                }
            })
        };
        for _ in 0..200_000 {
            for k in [5u64, 1_000, 150_000] {
                if let Some(t) = book.sent_at(0, Vec3::ground(k as f64, 0.0)) {
                    assert_eq!(t, Time(k));
                }
            }
        }
        writer.join().expect("writer");
    }
}
