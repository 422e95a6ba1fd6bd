//! Reading and writing NumPy `.npy` files (format version 1.0–3.0, C order).
//!
//! Supported element types: `<f4`, `<f8`, `<f2`, `<i4`, `<i8`, `<u1`, `|b1`, and
//! ml_dtypes' bfloat16 (stored by NumPy as `<V2`, read as bf16 bit patterns).

use crate::{Dtype, ErrorKind, NkiError, Result, Tensor};
use std::io::{Read, Write};
use std::path::Path;

/// A loaded array: shape, values widened to `f64`, and the dtype it maps to in NKI.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Values in C order.
    pub data: Vec<f64>,
    /// The closest NKI dtype of the file's element type.
    pub dtype: Dtype,
}

impl NpyArray {
    /// The array as a shared-HBM tensor of `dtype` (its own dtype when `None`).
    pub fn to_tensor(&self, dtype: Option<Dtype>) -> Result<Tensor> {
        let d = dtype.unwrap_or(self.dtype);
        if d.is_float() {
            let v: Vec<f32> = self.data.iter().map(|&x| x as f32).collect();
            Tensor::from_f32(&self.shape, &v, d)
        } else {
            let v: Vec<i64> = self.data.iter().map(|&x| x as i64).collect();
            Tensor::from_i64(&self.shape, &v, d)
        }
    }
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> NkiError {
    NkiError::new(ErrorKind::Io, format!("{}: {msg}", path.display()))
}

/// Reads a `.npy` file.
pub fn read_npy(path: impl AsRef<Path>) -> Result<NpyArray> {
    let path = path.as_ref();
    let mut bytes = Vec::new();
    std::fs::File::open(path).and_then(|mut f| f.read_to_end(&mut bytes)).map_err(|e| bad(path, e))?;
    parse_npy(&bytes).map_err(|m| bad(path, m))
}

fn parse_npy(bytes: &[u8]) -> std::result::Result<NpyArray, String> {
    if bytes.len() < 10 || &bytes[..6] != b"\x93NUMPY" {
        return Err("not a .npy file (missing the \\x93NUMPY magic)".into());
    }
    let (hlen, hstart) = match bytes[6] {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10),
        2 | 3 if bytes.len() >= 12 => (u32::from_le_bytes([bytes[8], bytes[9], bytes[10], bytes[11]]) as usize, 12),
        v => return Err(format!("unsupported .npy format version {v}")),
    };
    let header = std::str::from_utf8(bytes.get(hstart..hstart + hlen).ok_or("truncated header")?).map_err(|_| "header is not text")?;
    let descr = dict_value(header, "descr").ok_or("header has no 'descr'")?;
    let descr = descr.strip_prefix(['\'', '"']).and_then(|d| d.split(['\'', '"']).next()).ok_or("malformed 'descr'")?;
    if dict_value(header, "fortran_order").is_some_and(|v| v.starts_with("True")) {
        return Err("Fortran-ordered arrays are not supported; save with np.ascontiguousarray".into());
    }
    let shape_txt = dict_value(header, "shape").ok_or("header has no 'shape'")?;
    let inner = shape_txt.trim_start_matches('(');
    let inner = &inner[..inner.find(')').ok_or("malformed shape")?];
    let shape: Vec<usize> = inner
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| s.parse::<usize>().map_err(|_| format!("bad shape entry '{s}'")))
        .collect::<std::result::Result<_, _>>()?;
    let n: usize = shape.iter().product();
    let body = &bytes[hstart + hlen..];
    type Decode = fn(&[u8]) -> f64;
    let (size, dtype, conv): (usize, Dtype, Decode) = match descr {
        "<f4" => (4, Dtype::F32, |b| f32::from_le_bytes(b.try_into().unwrap()) as f64),
        "<f8" => (8, Dtype::F32, |b| f64::from_le_bytes(b.try_into().unwrap())),
        "<f2" => (2, Dtype::F16, |b| half::f16::from_le_bytes(b.try_into().unwrap()).to_f64()),
        "<V2" | "bfloat16" => (2, Dtype::Bf16, |b| half::bf16::from_le_bytes(b.try_into().unwrap()).to_f64()),
        "<i4" => (4, Dtype::I32, |b| i32::from_le_bytes(b.try_into().unwrap()) as f64),
        "<i8" => (8, Dtype::I32, |b| i64::from_le_bytes(b.try_into().unwrap()) as f64),
        "|u1" | "<u1" => (1, Dtype::U8, |b| b[0] as f64),
        "|b1" => (1, Dtype::U8, |b| f64::from(b[0] != 0)),
        other => {
            return Err(format!("unsupported element type '{other}' (use float32, float64, float16, bfloat16, int32, int64 or uint8)"));
        }
    };
    if body.len() < n * size {
        return Err(format!("file holds {} bytes of data, shape {shape:?} needs {}", body.len(), n * size));
    }
    let data = body[..n * size].chunks_exact(size).map(conv).collect();
    Ok(NpyArray { shape, data, dtype })
}

fn dict_value<'h>(header: &'h str, key: &str) -> Option<&'h str> {
    let k = header.find(&format!("'{key}'")).or_else(|| header.find(&format!("\"{key}\"")))?;
    let rest = &header[k + key.len() + 2..];
    Some(rest[rest.find(':')? + 1..].trim_start())
}

/// Element types [`write_npy`] can produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NpyType {
    /// `<f4`.
    F32,
    /// `<f8`.
    F64,
    /// `<i4`.
    I32,
}

/// Writes `data` (C order) with `shape` as a version-1.0 `.npy` file.
pub fn write_npy(path: impl AsRef<Path>, shape: &[usize], data: &[f64], ty: NpyType) -> Result<()> {
    let path = path.as_ref();
    let n: usize = shape.iter().product();
    if n != data.len() {
        return Err(bad(path, format!("{} values do not fill shape {shape:?}", data.len())));
    }
    let descr = match ty {
        NpyType::F32 => "<f4",
        NpyType::F64 => "<f8",
        NpyType::I32 => "<i4",
    };
    let dims: Vec<String> = shape.iter().map(|d| d.to_string()).collect();
    let shape_txt = if dims.len() == 1 { format!("({},)", dims[0]) } else { format!("({})", dims.join(", ")) };
    let mut header = format!("{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape_txt}, }}");
    let total = 10 + header.len() + 1;
    header.push_str(&" ".repeat((64 - total % 64) % 64));
    header.push('\n');
    let mut out = Vec::with_capacity(10 + header.len() + n * 8);
    out.extend_from_slice(b"\x93NUMPY\x01\x00");
    out.extend_from_slice(&(header.len() as u16).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for &v in data {
        match ty {
            NpyType::F32 => out.extend_from_slice(&(v as f32).to_le_bytes()),
            NpyType::F64 => out.extend_from_slice(&v.to_le_bytes()),
            NpyType::I32 => out.extend_from_slice(&(v as i32).to_le_bytes()),
        }
    }
    std::fs::File::create(path).and_then(|mut f| f.write_all(&out)).map_err(|e| bad(path, e))
}

/// Writes a tensor's values as `<f4` (float dtypes) or `<i4` (integer dtypes).
pub fn write_tensor_npy(path: impl AsRef<Path>, t: &Tensor) -> Result<()> {
    if t.dtype().is_float() {
        let v: Vec<f64> = t.to_f32_vec().into_iter().map(f64::from).collect();
        write_npy(path, t.shape(), &v, NpyType::F32)
    } else {
        let v: Vec<f64> = t.to_i64_vec().into_iter().map(|x| x as f64).collect();
        write_npy(path, t.shape(), &v, NpyType::I32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_f32_and_i32() {
        let dir = std::env::temp_dir().join(format!("nki-npy-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("a.npy");
        write_npy(&p, &[2, 3], &[1.0, -2.5, 3.0, 4.0, 5.0, 6.25], NpyType::F32).unwrap();
        let a = read_npy(&p).unwrap();
        assert_eq!((a.shape.clone(), a.dtype), (vec![2, 3], Dtype::F32));
        assert_eq!(a.data, vec![1.0, -2.5, 3.0, 4.0, 5.0, 6.25]);
        write_npy(&p, &[4], &[1.0, -2.0, 3.0, 7.0], NpyType::I32).unwrap();
        let b = read_npy(&p).unwrap();
        assert_eq!((b.shape, b.dtype, b.data), (vec![4], Dtype::I32, vec![1.0, -2.0, 3.0, 7.0]));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn rejects_garbage_with_a_reason() {
        assert!(parse_npy(b"hello world!").unwrap_err().contains("magic"));
    }
}
