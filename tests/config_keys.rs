//! Every key of the embedded defaults (`src/config/defaults.toml`) is a
//! field of the config (serde `deny_unknown_fields` refuses the rest at
//! start) and is read somewhere other than its own validation: a key that
//! is parsed, validated and then ignored is a setting that silently does
//! nothing.
//!
//! "Read" is found in the source, as the tidy test finds layering: a
//! non-comment line of `src/**.rs`, outside `fn validate*` bodies and test
//! modules, with `.KEY` on it, in a file that deals with KEY's section
//! (it names `.SECTION`, the section's type, or a type flattened into it).

use std::path::{Path, PathBuf};

use tessera::config::Config;

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn defaults() -> toml::Table {
    let text = std::fs::read_to_string(root().join("src/config/defaults.toml")).expect("defaults");
    text.parse().expect("defaults.toml is TOML")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The lines of a file that can read config: code (comments cut), outside
/// `fn validate*` bodies, up to an inline `#[cfg(test)] mod ... {`.
fn reading_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip_depth: Option<i64> = None;
    let mut depth = 0i64;
    let lines: Vec<&str> = text.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let code = line.split("//").next().unwrap_or("");
        let next = lines.get(i + 1).map_or("", |l| l.trim());
        if code.trim_start().starts_with("#[cfg(test)]")
            && next.starts_with("mod ")
            && next.ends_with('{')
        {
            break; // an inline test module (`mod tests;` files are elsewhere)
        }
        if skip_depth.is_none() && code.contains("fn validate") {
            skip_depth = Some(depth);
        }
        depth += code.matches('{').count() as i64 - code.matches('}').count() as i64;
        match skip_depth {
            Some(d) if depth <= d && code.contains('}') => skip_depth = None,
            Some(_) => {}
            None => out.push(code.to_owned()),
        }
    }
    out
}

/// `text` has `needle` not followed by an identifier character.
fn has_word_end(text: &str, needle: &str) -> bool {
    text.match_indices(needle).any(|(i, _)| {
        !text[i + needle.len()..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    })
}

/// The type of `section` in `Config`, and the types flattened into it.
fn section_types(section: &str, sources: &[(PathBuf, String)]) -> Vec<String> {
    let config_rs = &sources
        .iter()
        .find(|(p, _)| p.ends_with("src/config/mod.rs"))
        .expect("src/config/mod.rs")
        .1;
    let field = format!("pub {section}: ");
    let ty = config_rs
        .lines()
        .find_map(|l| l.trim().strip_prefix(field.as_str()))
        .unwrap_or_else(|| panic!("Config has a field `{section}`"))
        .trim_end_matches(',')
        .to_owned();
    let mut types = vec![ty.clone()];
    for (_, text) in sources {
        let Some(at) = text.find(&format!("pub struct {ty} {{")) else {
            continue;
        };
        let mut lines = text[at..].lines().take_while(|l| l.trim() != "}");
        while let Some(l) = lines.next() {
            if l.contains("#[serde(flatten)]") {
                if let Some(next) = lines.next() {
                    let t = next.rsplit(':').next().unwrap_or("").trim();
                    types.push(t.trim_end_matches(',').to_owned());
                }
            }
        }
    }
    types
}

/// The keys of the defaults that no source reads.
fn unread_keys() -> Vec<String> {
    let mut files = Vec::new();
    rust_files(&root().join("src"), &mut files);
    let sources: Vec<(PathBuf, String)> = files
        .into_iter()
        .map(|p| {
            let t = std::fs::read_to_string(&p).expect("readable source");
            (p, t)
        })
        .collect();
    let mut unread = Vec::new();
    for (section, table) in defaults() {
        let toml::Value::Table(table) = table else {
            panic!("top-level `{section}` is a table");
        };
        let types = section_types(&section, &sources);
        let deals_with = |text: &str| {
            has_word_end(text, &format!(".{section}"))
                || types.iter().any(|t| has_word_end(text, t))
        };
        for key in table.keys() {
            let read = sources.iter().any(|(_, text)| {
                deals_with(text)
                    && reading_lines(text)
                        .iter()
                        .any(|l| has_word_end(l, &format!(".{key}")))
            });
            if !read {
                unread.push(format!("{section}.{key}"));
            }
        }
    }
    unread
}

#[test]
fn every_default_key_deserialises_into_a_field() {
    // deny_unknown_fields on every section: the embedded defaults load, and
    // a key that is no field is refused naming it.
    let c = Config::load(None, &[]).expect("the defaults load");
    let back: toml::Table = c.to_toml().parse().expect("TOML");
    for (section, table) in defaults() {
        let (toml::Value::Table(t), Some(toml::Value::Table(b))) = (&table, back.get(&section))
        else {
            panic!("section `{section}` round-trips");
        };
        for key in t.keys() {
            assert!(b.contains_key(key), "{section}.{key} is a config field");
        }
    }
    let err = Config::load(None, &["mesh.no_such_key=1".to_owned()]).expect_err("refused");
    assert!(format!("{err}").contains("no_such_key"), "{err}");
}

#[test]
fn every_default_key_is_read_somewhere() {
    assert_eq!(
        unread_keys(),
        Vec::<String>::new(),
        "keys parsed but never read"
    );
}

#[test]
fn the_read_check_fires_on_a_key_read_only_by_its_validation() {
    let text = "#[cfg(test)]\nmod tests;\n\
                impl MeshConfig {\n    pub(crate) fn validate(&self) -> R {\n        \
                at_least(\"mesh.x_max\", self.x_max, 1)\n    }\n}\n\
                fn use_it(c: &Config) -> u32 { c.mesh.y_max }\n\
                #[cfg(test)]\nmod tests {\n    fn t(c: &Config) -> u32 { c.mesh.z_max }\n}\n";
    let lines = reading_lines(text);
    assert!(
        !lines.iter().any(|l| has_word_end(l, ".x_max")),
        "{lines:?}"
    );
    assert!(lines.iter().any(|l| has_word_end(l, ".y_max")), "{lines:?}");
    assert!(
        !lines.iter().any(|l| has_word_end(l, ".z_max")),
        "{lines:?}"
    );
    assert!(!has_word_end("a.x_max_ms", ".x_max"));
}
