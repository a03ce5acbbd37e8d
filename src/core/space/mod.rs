//! The space tree (filled in by the space-tree work).
