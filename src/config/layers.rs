//! Building the effective TOML table: embedded defaults, then a file, then
//! `key=value` overrides, each layer merged key by key over the one below.
//!
//! Works on untyped [`toml::Table`]s so a file may set a single key of a
//! section and keep the defaults of the rest; typing and validation happen
//! after merging (see `mod.rs`).

use super::ConfigError;
use toml::{Table, Value};

/// Merges `over` into `base`: tables merge recursively, anything else replaces.
pub(crate) fn merge(base: &mut Table, over: Table) {
    for (key, value) in over {
        match (base.get_mut(&key), value) {
            (Some(Value::Table(below)), Value::Table(above)) => merge(below, above),
            (_, value) => {
                base.insert(key, value);
            }
        }
    }
}

/// Applies one `section.key=value` override. The value is read as TOML
/// (`5`, `2.5`, `true`, `"text"`, `[1, 2]`); a bare word is taken as a string.
///
/// # Errors
/// [`ConfigError::Override`] when the text has no `=` or an empty key.
pub(crate) fn apply_override(table: &mut Table, text: &str) -> Result<(), ConfigError> {
    let bad = |why: &str| ConfigError::Override {
        text: text.to_owned(),
        why: why.to_owned(),
    };
    let (path, raw) = text
        .split_once('=')
        .ok_or_else(|| bad("expected key=value"))?;
    let path = path.trim();
    if path.is_empty() || path.split('.').any(str::is_empty) {
        return Err(bad("empty key"));
    }
    let raw = raw.trim();
    let value = match format!("v = {raw}").parse::<Table>() {
        Ok(mut parsed) => parsed.remove("v").ok_or_else(|| bad("no value"))?,
        Err(_) => Value::String(raw.to_owned()),
    };
    let mut keys: Vec<&str> = path.split('.').collect();
    let last = keys.pop().ok_or_else(|| bad("empty key"))?;
    let mut node = table;
    for key in keys {
        let entry = node
            .entry(key.to_owned())
            .or_insert_with(|| Value::Table(Table::new()));
        node = match entry {
            Value::Table(t) => t,
            _ => return Err(bad(&format!("`{key}` is not a section"))),
        };
    }
    node.insert(last.to_owned(), value);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn table(text: &str) -> Table {
        text.parse().expect("test TOML")
    }

    #[test]
    fn merge_keeps_untouched_keys() {
        let mut base = table("[a]\nx = 1\ny = 2\n[b]\nz = 3");
        merge(&mut base, table("[a]\ny = 20"));
        assert_eq!(base, table("[a]\nx = 1\ny = 20\n[b]\nz = 3"));
    }

    #[test]
    fn overrides_parse_toml_values() {
        let mut t = table("[a]\nx = 1");
        apply_override(&mut t, "a.x=5").expect("int");
        apply_override(&mut t, "a.s = hello").expect("bare word");
        apply_override(&mut t, "c.d.e=2.5").expect("new sections");
        assert_eq!(t, table("[a]\nx = 5\ns = \"hello\"\n[c.d]\ne = 2.5"));
        assert!(apply_override(&mut t, "nokey").is_err());
        assert!(apply_override(&mut t, "a..x=1").is_err());
        assert!(
            apply_override(&mut t, "a.x.y=1").is_err(),
            "a.x is a value, not a section"
        );
    }
}
