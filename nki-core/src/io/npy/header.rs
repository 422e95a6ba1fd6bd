//! The `.npy` preamble and header dictionary: parsed strictly (a file is input
//! from anyone) and written in NumPy's own form.
//!
//! Layout: the magic `\x93NUMPY`, a major and minor version byte, the header
//! length (2 bytes little-endian in version 1, 4 bytes in versions 2 and 3), then
//! a Python dict literal with exactly the keys `descr` (a string),
//! `fortran_order` (a bool) and `shape` (a tuple of non-negative integers),
//! padded with spaces and ended by a newline.

use std::io::Read;

/// The magic string every `.npy` file starts with.
const MAGIC: &[u8; 6] = b"\x93NUMPY";

/// Longest header accepted. NumPy writes well under a kilobyte and its reader
/// refuses large headers too; a bigger one is a hostile or corrupt file, and
/// reading it would allocate whatever it claims.
pub(super) const MAX_HEADER: usize = 64 * 1024;

/// The header's fields.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct Header {
    /// The element type string, e.g. `<f4`.
    pub descr: String,
    /// Column-major data.
    pub fortran_order: bool,
    /// Dimensions.
    pub shape: Vec<usize>,
}

/// Reads the preamble and header from `r`: the header and the number of bytes
/// they took (where the data starts).
pub(super) fn read_header(r: &mut impl Read) -> Result<(Header, usize), String> {
    let mut pre = [0u8; 8];
    r.read_exact(&mut pre).map_err(|_| "not a .npy file (shorter than the 8-byte preamble)".to_string())?;
    if &pre[..6] != MAGIC {
        return Err("not a .npy file (missing the \\x93NUMPY magic)".into());
    }
    let (major, minor) = (pre[6], pre[7]);
    let len_bytes = match (major, minor) {
        (1, 0) => 2,
        (2 | 3, 0) => 4,
        _ => return Err(format!("unsupported .npy format version {major}.{minor} (1.0, 2.0 and 3.0 are read)")),
    };
    let mut len = [0u8; 4];
    r.read_exact(&mut len[..len_bytes]).map_err(|_| "truncated header length".to_string())?;
    let hlen = u32::from_le_bytes(len) as usize;
    if hlen > MAX_HEADER {
        return Err(format!("header of {hlen} bytes is longer than the {MAX_HEADER} accepted"));
    }
    let mut text = vec![0u8; hlen];
    r.read_exact(&mut text).map_err(|_| format!("truncated header (the preamble announces {hlen} bytes)"))?;
    Ok((parse_dict(&text)?, 8 + len_bytes + hlen))
}

/// A parsed dict value.
enum Value {
    Str(String),
    Bool(bool),
    Tuple(Vec<usize>),
}

/// Cursor over the header text.
struct Cursor<'a> {
    s: &'a [u8],
    at: usize,
}

impl Cursor<'_> {
    fn skip_ws(&mut self) {
        while self.s.get(self.at).is_some_and(|c| c.is_ascii_whitespace()) {
            self.at += 1;
        }
    }

    /// The next non-space byte, consumed.
    fn next(&mut self) -> Option<u8> {
        self.skip_ws();
        let c = self.s.get(self.at).copied();
        self.at += usize::from(c.is_some());
        c
    }

    fn peek(&mut self) -> Option<u8> {
        self.skip_ws();
        self.s.get(self.at).copied()
    }

    fn expect(&mut self, want: u8) -> Result<(), String> {
        match self.next() {
            Some(c) if c == want => Ok(()),
            Some(c) => Err(format!("malformed header: expected '{}' at byte {}, found '{}'", want as char, self.at - 1, c.escape_ascii())),
            None => Err(format!("malformed header: expected '{}', found the end", want as char)),
        }
    }

    /// A quoted string without escapes.
    fn string(&mut self) -> Result<String, String> {
        let quote = self.next().filter(|&c| c == b'\'' || c == b'"').ok_or("malformed header: expected a quoted string")?;
        let rest = &self.s[self.at..];
        let end = rest.iter().position(|&c| c == quote).ok_or("malformed header: unterminated string")?;
        let body = &rest[..end];
        if body.iter().any(|&c| c == b'\\' || !(c.is_ascii_graphic() || c == b' ')) {
            return Err(format!("malformed header: unexpected characters in string '{}'", body.escape_ascii()));
        }
        self.at += end + 1;
        Ok(String::from_utf8_lossy(body).into_owned())
    }

    /// A run of ASCII letters, digits, signs and dots (a word or a number).
    fn word(&mut self) -> &[u8] {
        self.skip_ws();
        let start = self.at;
        while self.s.get(self.at).is_some_and(|c| c.is_ascii_alphanumeric() || matches!(c, b'-' | b'+' | b'.')) {
            self.at += 1;
        }
        &self.s[start..self.at]
    }

    fn value(&mut self) -> Result<Value, String> {
        match self.peek() {
            Some(b'\'' | b'"') => self.string().map(Value::Str),
            Some(b'(') => self.tuple().map(Value::Tuple),
            _ => match self.word() {
                b"True" => Ok(Value::Bool(true)),
                b"False" => Ok(Value::Bool(false)),
                w => Err(format!("malformed header: unexpected value '{}'", w.escape_ascii())),
            },
        }
    }

    /// `(a, b, ...)` of non-negative integers, a trailing comma allowed.
    fn tuple(&mut self) -> Result<Vec<usize>, String> {
        self.expect(b'(')?;
        let mut dims = Vec::new();
        loop {
            if self.peek() == Some(b')') {
                self.at += 1;
                return Ok(dims);
            }
            let w = self.word();
            // Python 2 wrote long integers with an `L` suffix.
            let digits = w.strip_suffix(b"L").unwrap_or(w);
            if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
                return Err(format!("bad shape entry '{}' (dims are non-negative integers)", w.escape_ascii()));
            }
            let text = std::str::from_utf8(digits).expect("ASCII digits");
            let dim = text.parse::<usize>().map_err(|_| format!("shape entry {text} does not fit a {}-bit size", usize::BITS))?;
            dims.push(dim);
            match self.next() {
                Some(b',') => {}
                Some(b')') => return Ok(dims),
                _ => return Err("malformed shape tuple".into()),
            }
        }
    }
}

/// Parses the header dict (trailing spaces and the final newline allowed).
fn parse_dict(text: &[u8]) -> Result<Header, String> {
    let mut c = Cursor { s: text, at: 0 };
    let (mut descr, mut fortran_order, mut shape) = (None, None, None);
    c.expect(b'{')?;
    loop {
        if c.peek() == Some(b'}') {
            c.at += 1;
            break;
        }
        let key = c.string()?;
        if !matches!(key.as_str(), "descr" | "fortran_order" | "shape") {
            return Err(format!("unexpected header key '{key}' (a .npy header holds descr, fortran_order and shape)"));
        }
        c.expect(b':')?;
        let value = c.value()?;
        let slot_taken = match (key.as_str(), value) {
            ("descr", Value::Str(s)) => descr.replace(s).is_some(),
            ("fortran_order", Value::Bool(b)) => fortran_order.replace(b).is_some(),
            ("shape", Value::Tuple(t)) => shape.replace(t).is_some(),
            _ => return Err(format!("header key '{key}' has a value of the wrong kind")),
        };
        if slot_taken {
            return Err(format!("header key '{key}' appears twice"));
        }
        match c.next() {
            Some(b',') => {}
            Some(b'}') => break,
            _ => return Err("malformed header: expected ',' or '}' after a value".into()),
        }
    }
    if c.peek().is_some() {
        return Err("malformed header: text after the dict".into());
    }
    Ok(Header {
        descr: descr.ok_or("header has no 'descr'")?,
        fortran_order: fortran_order.ok_or("header has no 'fortran_order'")?,
        shape: shape.ok_or("header has no 'shape'")?,
    })
}

/// The version-1.0 preamble and header for `descr` and `shape` (version 2.0 if
/// the header outgrows a 2-byte length), padded so the data starts on a 64-byte
/// boundary as NumPy does.
pub(super) fn format_header(descr: &str, shape: &[usize]) -> Vec<u8> {
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_txt = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut dict = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_txt}, }}");
    let v1 = dict.len() + 11 <= usize::from(u16::MAX);
    let pre = if v1 { 10 } else { 12 };
    dict.push_str(&" ".repeat((64 - (pre + dict.len() + 1) % 64) % 64));
    dict.push('\n');
    let mut out = Vec::with_capacity(pre + dict.len());
    out.extend_from_slice(MAGIC);
    if v1 {
        out.extend_from_slice(&[1, 0]);
        out.extend_from_slice(&(dict.len() as u16).to_le_bytes());
    } else {
        out.extend_from_slice(&[2, 0]);
        out.extend_from_slice(&(dict.len() as u32).to_le_bytes());
    }
    out.extend_from_slice(dict.as_bytes());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(bytes: &[u8]) -> Result<(Header, usize), String> {
        read_header(&mut &bytes[..])
    }

    fn with_dict(dict: &str) -> Vec<u8> {
        let mut b = b"\x93NUMPY\x01\x00".to_vec();
        b.extend_from_slice(&(dict.len() as u16).to_le_bytes());
        b.extend_from_slice(dict.as_bytes());
        b
    }

    #[test]
    fn numpys_headers_round_trip() {
        for shape in [vec![], vec![5], vec![2, 3, 4], vec![1 << 40]] {
            let bytes = format_header("<f4", &shape);
            assert_eq!(bytes.len() % 64, 0, "data starts 64-byte aligned");
            let (h, len) = parse(&bytes).unwrap();
            assert_eq!((h.descr.as_str(), h.fortran_order, h.shape, len), ("<f4", false, shape, bytes.len()));
        }
        // NumPy's own spelling, with Python 2 long suffixes and double quotes.
        let (h, _) = parse(&with_dict("{\"descr\": \"|b1\", \"fortran_order\": True, \"shape\": (3L, 4L), }  \n")).unwrap();
        assert_eq!((h.descr.as_str(), h.fortran_order, h.shape), ("|b1", true, vec![3, 4]));
    }

    #[test]
    fn hostile_headers_are_refused_with_a_reason() {
        let cases: &[(&str, &str)] = &[
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, -3), }", "bad shape entry '-3'"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,), }", "does not fit"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,), }", "bad shape entry"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), 'shape': (1,)}", "appears twice"),
            ("{'descr': '<f4', 'fortran_order': False}", "no 'shape'"),
            ("{'descr': '<f4', 'fortran_order': 0, 'shape': (1,)}", "unexpected value '0'"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': '3'}", "'shape' has a value of the wrong kind"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'extra': 1}", "unexpected header key 'extra'"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (1,)} junk", "text after the dict"),
            ("{'descr': '<f4\\x00', 'fortran_order': False, 'shape': (1,)}", "unexpected characters"),
            ("{'descr': '<f4', 'fortran_order': False, 'shape': (1,", "bad shape entry ''"),
            ("{'descr': '<f4'", "expected ',' or '}'"),
        ];
        for (dict, want) in cases {
            let e = parse(&with_dict(dict)).unwrap_err();
            assert!(e.contains(want), "{dict}: {e}");
        }
        assert!(parse(b"\x93NUMPY\x01\x00").unwrap_err().contains("header length"));
        assert!(parse(b"\x93NUMPY\x01\x00\x50\x00{'descr'").unwrap_err().contains("announces 80 bytes"));
        assert!(parse(b"\x93NUMPY\x04\x00\x00\x00").unwrap_err().contains("version 4.0"));
        assert!(parse(b"\x93NUMPY\x03\x00\xff\xff\xff\xff").unwrap_err().contains("longer than"));
        assert!(parse(b"GIF89a\x01\x00\x00\x00").unwrap_err().contains("magic"));
        assert!(parse(b"\x93NUM").unwrap_err().contains("preamble"));
    }
}
