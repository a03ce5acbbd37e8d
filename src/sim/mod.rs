//! The deterministic simulator (filled in by the simulator work).
