//! PROTOCOL.md's checked examples: the ```` ```hex NAME ```` blocks, shared
//! by the tests that compare them with the encoder (`wire_props`) and that
//! replay them as fuzz seeds (`fuzz_corpus`).

#![allow(dead_code)]

/// The ```` ```hex NAME ```` blocks of `doc`, in order: bytes are pairs of
/// hex digits, anything after `#` on a line is a comment.
pub fn parse(doc: &str) -> Vec<(String, Vec<u8>)> {
    let mut out = Vec::new();
    let mut cur: Option<(String, Vec<u8>)> = None;
    for line in doc.lines() {
        let t = line.trim();
        if let Some(name) = t.strip_prefix("```hex ") {
            cur = Some((name.trim().to_owned(), Vec::new()));
        } else if t == "```" {
            out.extend(cur.take());
        } else if let Some((_, bytes)) = cur.as_mut() {
            let code = t.split('#').next().unwrap_or("");
            for h in code.split_whitespace() {
                bytes.push(u8::from_str_radix(h, 16).expect("hex byte"));
            }
        }
    }
    out
}
