//! Every preset in `tuning/presets/` loads and validates against the current
//! config schema, so a renamed key or a broken relation fails CI.

use std::path::PathBuf;
use tessera::config::Config;

#[test]
fn every_preset_validates() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tuning/presets");
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).expect("tuning/presets exists") {
        let path = entry.expect("dir entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            Config::load(Some(&path), &[]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            seen += 1;
        }
    }
    assert!(seen >= 3, "expected the presets, found {seen}");
}

#[test]
fn the_defaults_file_matches_the_embedded_defaults() {
    let printed = Config::default().to_toml();
    assert_eq!(
        Config::from_toml(&printed).expect("printed config loads"),
        Config::default()
    );
}

#[test]
fn the_production_preset_checks_signed_tickets() {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tuning/presets/production.toml");
    let c = Config::load(Some(&path), &[]).expect("loads");
    assert_eq!(c.gateway.auth, "hmac");
    assert!(!c.gateway.key_file.is_empty());
}
