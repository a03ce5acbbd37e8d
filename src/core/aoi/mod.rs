//! The AOI engine (filled in by the AOI work).
