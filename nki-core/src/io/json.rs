//! A minimal JSON writer for the profile report, its trace and `nki ops --json`
//! (no dependency needed for flat objects of numbers and strings).

use std::fmt::Write;

/// `s` as a JSON string literal.
pub fn string(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// `x` as a JSON number (non-finite values, which JSON lacks, and -0 as 0).
pub fn number(x: f64) -> String {
    // -0.0 prints as "-0"; JSON readers take it, but it reads as a sign error.
    if x.is_finite() && x != 0.0 { format!("{x}") } else { "0".to_string() }
}

/// An object from already-encoded members.
pub fn object<'a>(members: impl IntoIterator<Item = (&'a str, String)>) -> String {
    let body: Vec<String> = members.into_iter().map(|(k, v)| format!("{}:{v}", string(k))).collect();
    format!("{{{}}}", body.join(","))
}

/// An array from already-encoded items.
pub fn array(items: impl IntoIterator<Item = String>) -> String {
    format!("[{}]", items.into_iter().collect::<Vec<_>>().join(","))
}
