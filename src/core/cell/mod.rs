//! The cell state machine (filled in by the cell work).
