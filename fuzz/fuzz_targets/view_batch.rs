//! The view batch decoder (`BatchReader`) and the checking client view.
//!
//! Checks: no panic; every decoded event re-encodes to bytes that decode to
//! the same event; the client view turns any bytes into violations, never a
//! panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::Arc;
use tessera::core::entity::TypeRegistry;
use tessera::core::ids::EntityId;
use tessera::core::view::{encode_event, BatchReader, ClientView, ClientViewParams};

fuzz_target!(|data: &[u8]| {
    let mut buf = Vec::new();
    for ev in BatchReader::new(data) {
        let Ok(ev) = ev else { break };
        buf.clear();
        encode_event(&mut buf, &ev);
        let mut again = BatchReader::new(&buf);
        let back = again.next().expect("one event").expect("re-decodes");
        // NaN positions compare unequal: compare the bytes instead.
        let mut buf2 = Vec::new();
        encode_event(&mut buf2, &back);
        assert_eq!(buf, buf2);
        assert!(again.next().is_none());
    }
    let reg = Arc::new(TypeRegistry::with_builtins());
    let params = ClientViewParams {
        shown_max: 64,
        ..ClientViewParams::default()
    };
    let mut view = ClientView::new(EntityId(1), reg, params);
    // Twice: the second pass meets the state the first one built.
    view.handle_batch(data);
    view.handle_batch(data);
    let _ = view.violation_count();
});
