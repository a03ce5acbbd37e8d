//! Entities, properties and sync messages (filled in by the entity work).
