//! Tidy: the layering and hygiene rules of tessera, checked on the source text.
//!
//! - The sans-IO layers ([`SANS_IO_DIRS`]: the core, the game logic, the
//!   shard contract, the server's application and the simulator) must not
//!   import executors,
//!   queues, sockets, threads or the OS clock, nor iterate default-hashed
//!   maps (determinism). The server's two drivers (`embedded.rs`, which
//!   starts the runtime, and the test harness) say why on each line they
//!   opt out.
//! - The core must not reach up into config, wire, runtime or sim; the
//!   game logic not into the server, the runtime or the simulator; the shard
//!   contract not into the runtime (its IO adapter), the server, the
//!   simulator or the game logic.
//! - The server and the game logic program against the shard contract,
//!   never the runtime: only the server's drivers that start it
//!   ([`RUNTIME_DRIVERS`], named one by one) may import `crate::runtime`.
//! - Library code prints nothing (`println!`, `eprintln!`, `dbg!`): binaries and
//!   tracing do.
//! - No function is longer than [`FN_LINES_MAX`] lines.
//!
//! A line may opt out of one banned word with a trailing `// tidy: allow(<word>)`
//! comment that says why; the reviewer reads every such line.

use std::fs;
use std::path::{Path, PathBuf};

/// The longest function body allowed, in lines (rustfmt-formatted source).
const FN_LINES_MAX: usize = 120;

/// Words banned in deterministic, sans-IO code.
const SANS_IO_BANNED: &[&str] = &[
    "glommio",
    "flume",
    "crossbeam",
    "std::net",
    "tokio",
    "std::thread",
    "thread::spawn",
    "Instant",
    "SystemTime",
    "HashMap",
    "HashSet",
    "std::fs",
    "std::io::stdin",
];

/// The sans-IO layers: no executor, queue, socket, thread or clock.
const SANS_IO_DIRS: &[&str] = &["src/core", "src/game", "src/server", "src/shard", "src/sim"];

/// Modules the game logic must not depend on (its drivers are above it).
const GAME_BANNED_UP: &[&str] = &["crate::server", "crate::runtime", "crate::sim"];

/// Modules the shard contract must not depend on: its IO adapter (the
/// runtime) and the applications and drivers above it.
const SHARD_BANNED_UP: &[&str] = &[
    "crate::runtime",
    "crate::server",
    "crate::sim",
    "crate::game",
];

/// The application layers that see a shard only through the contract
/// (`crate::shard`), never through the runtime.
const APP_DIRS: &[&str] = &["src/server", "src/game"];

/// What the application layers must not import.
const APP_BANNED: &[&str] = &["crate::runtime"];

/// The server's drivers: the only application files that start the runtime
/// (`embedded.rs`: the in-process server; `harness.rs`: the sans-IO test
/// harness wires hosts over the runtime's mesh queues and flush).
const RUNTIME_DRIVERS: &[&str] = &["src/server/embedded.rs", "src/server/harness.rs"];

/// Modules the core must not depend on (layering: core is the bottom layer).
const CORE_BANNED_UP: &[&str] = &[
    "crate::config",
    "crate::wire",
    "crate::runtime",
    "crate::sim",
];

/// Printing is for binaries only.
const LIB_BANNED: &[&str] = &["println!", "eprintln!", "print!(", "eprint!(", "dbg!"];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// The code part of a line: comments and doc comments are not code.
fn code_of(line: &str) -> &str {
    let trimmed = line.trim_start();
    if trimmed.starts_with("//") {
        return "";
    }
    match line.find("//") {
        // Keep `//` inside string literals such as URLs: only cut when an even
        // number of quotes precede it.
        Some(i) if line[..i].matches('"').count() % 2 == 0 => &line[..i],
        _ => line,
    }
}

fn allowed(line: &str, word: &str) -> bool {
    line.contains(&format!("tidy: allow({word})"))
}

fn banned_words(files: &[PathBuf], words: &[&str], what: &str) -> Vec<String> {
    let mut found = Vec::new();
    for file in files {
        let text = fs::read_to_string(file).expect("read source file");
        for (i, line) in text.lines().enumerate() {
            let code = code_of(line);
            for word in words {
                if code.contains(word) && !allowed(line, word) {
                    found.push(format!("{}:{}: {what}: `{word}`", file.display(), i + 1));
                }
            }
        }
    }
    found
}

fn under(dir: &str) -> Vec<PathBuf> {
    let mut files = Vec::new();
    rust_files(&root().join(dir), &mut files);
    files.sort();
    files
}

fn sans_io_files() -> Vec<PathBuf> {
    SANS_IO_DIRS.iter().flat_map(|d| under(d)).collect()
}

/// The application files held to [`APP_BANNED`]: every file of
/// [`APP_DIRS`] but the named [`RUNTIME_DRIVERS`].
fn app_files() -> Vec<PathBuf> {
    let drivers: Vec<PathBuf> = RUNTIME_DRIVERS.iter().map(|d| root().join(d)).collect();
    APP_DIRS
        .iter()
        .flat_map(|d| under(d))
        .filter(|f| !drivers.contains(f))
        .collect()
}

#[test]
fn sans_io_layers_are_sans_io_and_deterministic() {
    let files = sans_io_files();
    assert!(files.len() > 3, "tidy found no core sources: wrong root?");
    let found = banned_words(&files, SANS_IO_BANNED, "banned in sans-IO code");
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

#[test]
fn core_does_not_reach_up() {
    let found = banned_words(
        &under("src/core"),
        CORE_BANNED_UP,
        "core imports a higher layer",
    );
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

#[test]
fn game_does_not_reach_up() {
    let files = under("src/game");
    assert!(!files.is_empty(), "tidy found no game sources");
    let found = banned_words(&files, GAME_BANNED_UP, "game imports its driver");
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

#[test]
fn shard_contract_does_not_reach_up() {
    let files = under("src/shard");
    assert!(files.len() > 3, "tidy found no shard contract sources");
    let found = banned_words(
        &files,
        SHARD_BANNED_UP,
        "shard contract imports a higher layer",
    );
    assert!(
        found.is_empty(),
        "layering violations:\n{}",
        found.join("\n")
    );
}

#[test]
fn applications_use_the_contract_not_the_runtime() {
    let files = app_files();
    assert!(!files.is_empty(), "tidy found no server or game sources");
    let found = banned_words(&files, APP_BANNED, "application imports the runtime");
    assert!(
        found.is_empty(),
        "layering violations (import from crate::shard; only {RUNTIME_DRIVERS:?} may start \
         the runtime):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_contract_rules_fire_and_drivers_are_named() {
    // The contract is held to the sans-IO rule...
    let sans_io = sans_io_files();
    assert!(sans_io.contains(&root().join("src/shard/outbox.rs")));
    // ... the application rule reads the server and the game, but not the
    // two named drivers (each named file must exist: a rename must update
    // the allowance)...
    let apps = app_files();
    assert!(apps.contains(&root().join("src/server/host.rs")));
    assert!(apps.contains(&root().join("src/game/relay.rs")));
    for driver in RUNTIME_DRIVERS {
        let path = root().join(driver);
        assert!(path.is_file(), "named driver {driver} does not exist");
        assert!(!apps.contains(&path), "{driver} is a named driver");
    }
    // ... and both rules fire on the imports they ban.
    let dir = std::env::temp_dir().join(format!("tessera-tidy-shard-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("temp dir");
    let file = dir.join("host.rs");
    let source = "use crate::runtime::{ClientPort, ShardApp};\n\
                  use crate::server::CellHost; // in src/shard: reaching up\n\
                  use crate::shard::{Inbox, Outbox}; // fine everywhere\n\
                  // crate::runtime in a comment is fine\n\
                  use crate::game::relay;\n";
    fs::write(&file, source).expect("write temp file");
    let files = std::slice::from_ref(&file);
    let up = banned_words(files, SHARD_BANNED_UP, "x");
    assert_eq!(up.len(), 3, "{up:?}");
    let app = banned_words(files, APP_BANNED, "x");
    assert_eq!(app.len(), 1, "{app:?}");
    assert!(app[0].contains("host.rs:1:"), "{app:?}");
    fs::remove_dir_all(&dir).expect("clean temp dir");
}

#[test]
fn the_server_is_held_to_the_sans_io_rule() {
    // The rule reads the server's files...
    let files = sans_io_files();
    let balance = root().join("src/server/balance.rs");
    assert!(files.contains(&balance), "src/server is not checked");
    // ... and fires on the wall clock the server's balancer used to read.
    let dir = std::env::temp_dir().join(format!("tessera-tidy-server-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("temp dir");
    let old = dir.join("balance.rs");
    let source = "pub struct MonotonicClock {\n    start: std::time::Instant,\n}\n\
                  use crate::server::relay; // in src/game: reaching up\n";
    fs::write(&old, source).expect("write temp file");
    let found = banned_words(std::slice::from_ref(&old), SANS_IO_BANNED, "x");
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("Instant"));
    let up = banned_words(std::slice::from_ref(&old), GAME_BANNED_UP, "x");
    assert_eq!(up.len(), 1, "{up:?}");
    fs::remove_dir_all(&dir).expect("clean temp dir");
}

#[test]
fn library_code_does_not_print() {
    let files: Vec<PathBuf> = under("src")
        .into_iter()
        .filter(|p| {
            p.file_name().is_some_and(|n| n != "main.rs")
                && !p.components().any(|c| c.as_os_str() == "bin")
        })
        .collect();
    let found = banned_words(&files, LIB_BANNED, "printing in library code");
    assert!(found.is_empty(), "stray output:\n{}", found.join("\n"));
}

/// Finds `fn` items and measures them up to the closing brace at the same
/// indentation (the layout rustfmt produces).
fn long_functions(file: &Path) -> Vec<String> {
    let text = fs::read_to_string(file).expect("read source file");
    let lines: Vec<&str> = text.lines().collect();
    let mut found = Vec::new();
    for (start, line) in lines.iter().enumerate() {
        let code = code_of(line);
        let trimmed = code.trim_start();
        let is_fn = trimmed.starts_with("fn ")
            || trimmed.starts_with("pub fn ")
            || trimmed.starts_with("pub(crate) fn ")
            || trimmed.starts_with("pub(super) fn ")
            || trimmed.starts_with("const fn ")
            || trimmed.starts_with("pub const fn ")
            || trimmed.starts_with("async fn ")
            || trimmed.starts_with("pub async fn ");
        if !is_fn || code.trim_end().ends_with(';') {
            continue;
        }
        let indent = &code[..code.len() - trimmed.len()];
        let closing = format!("{indent}}}");
        if let Some(len) = lines[start + 1..]
            .iter()
            .position(|l| l.trim_end() == closing)
        {
            if len + 1 > FN_LINES_MAX {
                found.push(format!(
                    "{}:{}: function of {} lines",
                    file.display(),
                    start + 1,
                    len + 2
                ));
            }
        }
    }
    found
}

#[test]
fn functions_are_short() {
    let mut files = under("src");
    for member in ["bench", "loadgen", "tuning", "tests"] {
        files.extend(under(member));
    }
    let found: Vec<String> = files.iter().flat_map(|f| long_functions(f)).collect();
    assert!(
        found.is_empty(),
        "functions over {FN_LINES_MAX} lines:\n{}",
        found.join("\n")
    );
}

#[test]
fn tidy_catches_what_it_should() {
    // The checker itself must be able to fail.
    let dir = std::env::temp_dir().join(format!("tessera-tidy-{}", std::process::id()));
    fs::create_dir_all(&dir).expect("temp dir");
    let bad = dir.join("bad.rs");
    let body: String = (0..FN_LINES_MAX + 5)
        .map(|i| format!("    let _x{i} = {i};\n"))
        .collect();
    let source = format!(
        "use std::collections::HashMap; // a comment with Instant\n\
         // Instant in a comment is fine\n\
         fn long() {{\n{body}}}\n\
         fn fine() {{ dbg!(1); }}\n\
         fn allowed() -> u32 {{ let _t = std::time::Instant::now(); 0 }} // tidy: allow(Instant)\n"
    );
    fs::write(&bad, source).expect("write temp file");
    let files = vec![bad.clone()];
    let sans_io = banned_words(&files, SANS_IO_BANNED, "x");
    assert_eq!(sans_io.len(), 1, "{sans_io:?}");
    assert!(sans_io[0].contains("HashMap"));
    assert_eq!(banned_words(&files, LIB_BANNED, "x").len(), 1);
    assert_eq!(long_functions(&bad).len(), 1);
    fs::remove_dir_all(&dir).expect("clean temp dir");
}
