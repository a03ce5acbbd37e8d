//! Configuration (filled in next).
