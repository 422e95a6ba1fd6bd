//! Reading and writing NumPy `.npy` files (format versions 1.0–3.0, C order,
//! little-endian).
//!
//! Files are untrusted input. The header is parsed strictly, the element count
//! is checked against overflow ([`checked_numel`]) and the payload length must
//! match it exactly before anything is allocated, and values the loaded dtype
//! cannot hold are errors. [`read_tensor_npy`] reads a little-endian float32
//! payload straight into the tensor's cells (they are its bytes) and converts
//! other element types a chunk at a time, so loading costs the tensor plus at
//! most one chunk; [`read_tensor_npy_threads`] splits a large payload over
//! threads that each read their own part in place, and
//! [`read_tensors_npy_threads`] does so for several files in one pass.
//! The element types read and the dtype each loads as are [`NpyType`]'s.
//! Only regular files are opened ([`NpyFile::open`] checks before opening, so a
//! FIFO or a device never blocks or streams forever); [`NpyFile`] holds a file
//! whose header was read, so a command can check every input's shape and dtype
//! before it reads any payload ([`read_opened`]). Tensors are written as their
//! own element type ([`write_tensor_npy`]).

mod elem;
mod header;
mod parts;

pub use elem::NpyType;

use crate::tensor::{checked_numel, reserve_cells};
use crate::{Dtype, ErrorKind, NkiError, Result, Tensor};
use header::{Header, format_header, read_header};
use std::fs::File;
use std::io::{BufWriter, Write};
use std::mem::MaybeUninit;
use std::path::Path;

/// Bytes read or written per chunk.
const CHUNK_BYTES: usize = 1 << 20;

/// A loaded array: shape, values widened to `f64`, and the dtype it maps to in NKI.
#[derive(Clone, Debug, PartialEq)]
pub struct NpyArray {
    /// Dimensions.
    pub shape: Vec<usize>,
    /// Values in C order.
    pub data: Vec<f64>,
    /// The NKI dtype the file's element type loads as.
    pub dtype: Dtype,
}

fn bad(path: &Path, msg: impl std::fmt::Display) -> NkiError {
    NkiError::new(ErrorKind::Io, format!("{}: {msg}", path.display()))
}

/// An open `.npy` file positioned at its data, whose length matches the header.
struct Source {
    file: File,
    header: Header,
    ty: NpyType,
    numel: usize,
    /// The file offset of the first element.
    data_start: u64,
}

impl Source {
    fn open(path: &Path) -> std::result::Result<Source, String> {
        let mut file = open_regular(path)?;
        let meta = file.metadata().map_err(|e| e.to_string())?;
        let (header, header_len) = read_header(&mut file)?;
        let ty = NpyType::from_descr(&header.descr)?;
        if header.fortran_order {
            return Err("Fortran-ordered arrays are not supported; save with np.ascontiguousarray".into());
        }
        let numel = checked_numel(&header.shape).map_err(|e| e.message)?;
        let need = numel as u128 * ty.size() as u128;
        let have = u128::from(meta.len()).saturating_sub(header_len as u128);
        if have != need {
            let what = if have < need { "truncated" } else { "trailing bytes" };
            return Err(format!("{what}: the file holds {have} bytes of data, shape {:?} of {} needs {need}", header.shape, header.descr));
        }
        Ok(Source { file, header, ty, numel, data_start: header_len as u64 })
    }

    /// Calls `f` with the raw bytes of each chunk of whole elements of
    /// `first..first + count` in order (and the index of the chunk's first
    /// element), reading a chunk at a time at its offset (no shared file
    /// position, so parts of one file can be read by several threads).
    fn each_chunk(
        &self,
        first: usize,
        count: usize,
        mut f: impl FnMut(usize, &[u8]) -> std::result::Result<(), String>,
    ) -> std::result::Result<(), String> {
        let size = self.ty.size();
        let per_chunk = CHUNK_BYTES / size;
        let mut buf = vec![0u8; per_chunk.min(count) * size];
        let mut done = 0;
        while done < count {
            let (start, n) = (first + done, per_chunk.min(count - done));
            let bytes = &mut buf[..n * size];
            parts::read_at(&self.file, bytes, self.data_start + (start * size) as u64).map_err(|e| format!("reading the data: {e}"))?;
            f(start, bytes)?;
            done += n;
        }
        Ok(())
    }
}

/// What a path that is not a regular file is, for the refusal.
fn not_regular(meta: &std::fs::Metadata) -> String {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        let t = meta.file_type();
        let what = if t.is_dir() {
            "a directory"
        } else if t.is_fifo() {
            "a FIFO"
        } else if t.is_socket() {
            "a socket"
        } else if t.is_char_device() || t.is_block_device() {
            "a device"
        } else {
            "not a regular file"
        };
        if what.starts_with("not") { what.to_string() } else { format!("not a regular file ({what})") }
    }
    #[cfg(not(unix))]
    {
        let _ = meta;
        "not a regular file".to_string()
    }
}

/// Opens `path` for reading only if it is a regular file: its type is checked
/// before it is opened (a FIFO would block the open, a device could hand out
/// endless data), and the file opened without blocking is checked again, so a
/// path swapped for something else in between is refused too.
fn open_regular(path: &Path) -> std::result::Result<File, String> {
    let meta = std::fs::metadata(path).map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOCTTY);
    }
    let file = options.open(path).map_err(|e| e.to_string())?;
    let meta = file.metadata().map_err(|e| e.to_string())?;
    if !meta.is_file() {
        return Err(not_regular(&meta));
    }
    Ok(file)
}

/// An opened `.npy` input: its header read and checked against the file's
/// length, its payload not read yet. Commands open every input first, check the
/// shapes and dtypes the headers declare, and only then read the payloads
/// ([`read_opened`]).
pub struct NpyFile {
    src: Source,
    path: std::path::PathBuf,
    /// The dtype whose raw codes the payload holds ([`NpyFile::read_as_codes_of`]).
    codes: Option<Dtype>,
}

impl NpyFile {
    /// Opens `path` (a regular file) and reads its header.
    pub fn open(path: impl AsRef<Path>) -> Result<NpyFile> {
        let path = path.as_ref();
        Source::open(path).map(|src| NpyFile { src, path: path.to_path_buf(), codes: None }).map_err(|m| bad(path, m))
    }

    /// Reads the payload as the raw codes of `dtype` ([`NpyType::codes_of`]):
    /// the tensor is of `dtype`, each 8-bit float code decoded to its value,
    /// each packed MX word kept as it is. Refused, from the header alone, when
    /// `dtype` has no codes or the file's element type is not its codes'.
    pub fn read_as_codes_of(&mut self, dtype: Dtype) -> Result<()> {
        let Some(want) = NpyType::codes_of(dtype) else {
            return Err(bad(
                &self.path,
                format!(
                    "{dtype} is not read from codes (only float8_e4m3, float8_e4m3fn, float8_e5m2 and the packed float8_e4m3fn_x4, float8_e5m2_x4 and float4_e2m1fn_x4 are)"
                ),
            ));
        };
        if self.src.ty != want {
            return Err(bad(&self.path, format!("{dtype} codes are {}, but the file holds {}", want.name(), self.src.ty.name())));
        }
        self.codes = Some(dtype);
        Ok(())
    }

    /// The shape the header declares.
    pub fn shape(&self) -> &[usize] {
        &self.src.header.shape
    }

    /// The file's element type.
    pub fn npy_type(&self) -> NpyType {
        self.src.ty
    }

    /// The dtype the payload loads as (the codes' dtype when it holds codes).
    pub fn dtype(&self) -> Dtype {
        self.codes.unwrap_or(self.src.ty.dtype())
    }

    /// The path it was opened from.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes of the tensor it loads as (4 per element).
    pub fn tensor_bytes(&self) -> u64 {
        self.src.numel as u64 * 4
    }
}

/// Reads a `.npy` file as values widened to `f64` (for inspection and tests;
/// [`read_tensor_npy`] loads a tensor without the `f64` copy).
pub fn read_npy(path: impl AsRef<Path>) -> Result<NpyArray> {
    let path = path.as_ref();
    let load = || {
        let src = Source::open(path)?;
        let mut data = Vec::new();
        data.try_reserve_exact(src.numel).map_err(|_| format!("cannot allocate {} values", src.numel))?;
        let ty = src.ty;
        src.each_chunk(0, src.numel, |_, bytes| {
            ty.decode(bytes, &mut data);
            Ok(())
        })?;
        Ok(NpyArray { shape: src.header.shape, data, dtype: src.ty.dtype() })
    };
    load().map_err(|m: String| bad(path, m))
}

/// Loads a `.npy` file as a shared-HBM tensor of the dtype its element type maps
/// to ([`NpyType::dtype`]), streaming the data into the tensor's cells on one
/// thread (see [`read_tensor_npy_threads`]).
///
/// Peak memory is the tensor's cells (4 bytes per element, whatever the file's
/// element size) plus one 1 MiB chunk.
pub fn read_tensor_npy(path: impl AsRef<Path>) -> Result<Tensor> {
    read_tensor_npy_threads(path, 1)
}

/// [`read_tensor_npy`] with up to `threads` threads, each reading and
/// converting its own contiguous part of a large payload (one thread below
/// 4 MiB per part); plus one chunk per thread of memory. The tensor is the same
/// for every thread count.
pub fn read_tensor_npy_threads(path: impl AsRef<Path>, threads: usize) -> Result<Tensor> {
    let path = path.as_ref();
    read_tensors_npy_threads(&[path], threads).pop().unwrap_or_else(|| Err(bad(path, "nothing was read")))
}

/// Loads several `.npy` files as [`read_tensor_npy_threads`] does, in one pass:
/// the parts of all their payloads go to up to `threads` threads together, so
/// the files load side by side rather than one after another. One result per
/// path, in order; the tensors are the same for every thread count.
pub fn read_tensors_npy_threads(paths: &[&Path], threads: usize) -> Vec<Result<Tensor>> {
    let files: Vec<Result<NpyFile>> = paths.iter().map(NpyFile::open).collect();
    let opened: Vec<&NpyFile> = files.iter().filter_map(|f| f.as_ref().ok()).collect();
    let mut read = read_opened(&opened, threads).into_iter();
    files
        .into_iter()
        .map(|f| f.and_then(|_| read.next().unwrap_or_else(|| Err(NkiError::new(ErrorKind::Io, "nothing was read")))))
        .collect()
}

/// Reads the payloads of opened files as [`read_tensors_npy_threads`] does: one
/// result per file, in order.
pub fn read_opened(files: &[&NpyFile], threads: usize) -> Vec<Result<Tensor>> {
    let mut opened: Vec<std::result::Result<(&Source, Vec<f32>), String>> = files
        .iter()
        .map(|f| {
            let cells = reserve_cells(f.src.numel, "shape").map_err(|e| e.message)?;
            Ok((&f.src, cells))
        })
        .collect();
    // A job is one part of one file: (file, its source, first element, the part's cells).
    let mut jobs = Vec::new();
    for (file, (src, cells)) in opened.iter_mut().enumerate().filter_map(|(i, o)| o.as_mut().ok().map(|o| (i, o))) {
        let n = src.numel;
        let per = n.div_ceil(parts::count(n.saturating_mul(src.ty.size()), threads)).max(1);
        for (j, part) in cells.spare_capacity_mut()[..n].chunks_mut(per).enumerate() {
            jobs.push((file, *src, j * per, part));
        }
    }
    let owners: Vec<usize> = jobs.iter().map(|j| j.0).collect();
    let results = parts::run_jobs(jobs, threads, |(_, src, first, part)| src.read_cells(first, part));
    // The first failed part of each file (in part order) is its error.
    let mut failed: Vec<Option<String>> = vec![None; files.len()];
    for (file, r) in owners.into_iter().zip(results) {
        if let (Err(e), f @ None) = (r, &mut failed[file]) {
            *f = Some(e);
        }
    }
    opened
        .into_iter()
        .zip(failed)
        .zip(files)
        .map(|((o, failed), file)| {
            let path = file.path.as_path();
            let (src, mut cells) = o.map_err(|m| bad(path, m))?;
            if let Some(m) = failed {
                return Err(bad(path, m));
            }
            // SAFETY: `read_cells` returned Ok for every part of this file, so
            // each of the first `numel` slots of the reserved capacity holds an
            // initialised value.
            unsafe { cells.set_len(src.numel) };
            if let Some(dtype) = file.codes {
                decode_codes(dtype, &mut cells);
            }
            Tensor::from_cells(&src.header.shape, file.dtype(), cells).map_err(|e| bad(path, e.message))
        })
        .collect()
}

/// Turns the cells of codes read as their unsigned integer into cells of
/// `dtype`: an 8-bit float code becomes its value (NaN codes NaN); a packed MX
/// word's cell is the word itself, as the integer's.
fn decode_codes(dtype: Dtype, cells: &mut [f32]) {
    if dtype.packs().is_some() {
        return;
    }
    for c in cells {
        let code = NpyType::U8.dtype().cell_to_i64(*c) as u8;
        *c = dtype.f32_to_cell(crate::dtype::fp8_decode(dtype, code).unwrap_or(f32::NAN), true);
    }
}

impl Source {
    /// Reads elements `first..first + out.len()` as cells of the loaded dtype
    /// into `out`, a chunk at a time; on `Ok` every slot of `out` is written.
    fn read_cells(&self, first: usize, out: &mut [MaybeUninit<f32>]) -> std::result::Result<(), String> {
        let ty = self.ty;
        // Little-endian float32 data is its own cells: read straight into them
        // (no widening, nothing to range-check, no intermediate copy).
        if ty == NpyType::F32 && cfg!(target_endian = "little") {
            let len = std::mem::size_of_val(out);
            // SAFETY: the same memory as `out`, viewed as bytes (alignment 1,
            // 4 bytes per cell); any bytes written make valid `f32`s.
            let bytes = unsafe { std::slice::from_raw_parts_mut(out.as_mut_ptr().cast::<MaybeUninit<u8>>(), len) };
            let at = self.data_start + (first * 4) as u64;
            return parts::read_uninit_at(&self.file, bytes, at).map_err(|e| format!("reading the data: {e}"));
        }
        let mut values = Vec::new();
        self.each_chunk(first, out.len(), |start, bytes| {
            let dst = &mut out[start - first..][..bytes.len() / ty.size()];
            values.clear();
            ty.decode(bytes, &mut values);
            let mut written = 0;
            for (i, (d, &v)) in dst.iter_mut().zip(&values).enumerate() {
                d.write(ty.cell(v).map_err(|e| format!("element {}: {e}", start + i))?);
                written += 1;
            }
            if written != dst.len() {
                return Err(format!("decoded {written} of {} elements of a chunk", dst.len()));
            }
            Ok(())
        })
    }
}

/// The preamble and header of a `.npy` file of `ty` and `shape`, as NumPy writes
/// them (the data follows: `ty.size()` little-endian bytes per element, C order).
pub fn header_bytes(ty: NpyType, shape: &[usize]) -> Vec<u8> {
    format_header(ty.descr(), shape)
}

/// The header of `len` values of `ty` and `shape`, or why they do not fill it.
fn checked_header(ty: NpyType, shape: &[usize], len: usize) -> Result<Vec<u8>> {
    let n = checked_numel(shape)?;
    if n != len {
        return Err(NkiError::argument("data", format!("{len} values"), &format!("shape {shape:?} needs {n}")));
    }
    Ok(header_bytes(ty, shape))
}

/// Writes float32 `values` (C order) of `shape` to `out` as `<f4` straight from
/// their memory, which on a little-endian target is their encoding.
fn write_f32_le(mut out: impl Write, shape: &[usize], values: &[f32]) -> Result<()> {
    out.write_all(&checked_header(NpyType::F32, shape, values.len())?)?;
    // SAFETY: `f32` has no padding and every byte of an initialised `f32` is
    // initialised, so its memory may be read as bytes (`u8` needs no alignment).
    let bytes = unsafe { std::slice::from_raw_parts(values.as_ptr().cast::<u8>(), std::mem::size_of_val(values)) };
    for run in bytes.chunks(CHUNK_BYTES) {
        out.write_all(run)?;
    }
    out.flush()?;
    Ok(())
}

/// Writes `values` (C order) of `shape` to `out` as `ty`, each value as `encode` puts it.
fn write_values<T>(
    out: impl Write,
    shape: &[usize],
    values: impl ExactSizeIterator<Item = T>,
    ty: NpyType,
    encode: impl Fn(T, &mut Vec<u8>),
) -> Result<()> {
    let header = checked_header(ty, shape, values.len())?;
    let mut out = BufWriter::with_capacity(CHUNK_BYTES, out);
    out.write_all(&header)?;
    let mut chunk = Vec::with_capacity(CHUNK_BYTES + 8);
    for v in values {
        encode(v, &mut chunk);
        if chunk.len() >= CHUNK_BYTES {
            out.write_all(&chunk)?;
            chunk.clear();
        }
    }
    out.write_all(&chunk)?;
    out.flush()?;
    Ok(())
}

/// Writes `data` (C order) with `shape` as a `.npy` file of element type `ty`
/// (float to integer conversions saturate).
pub fn write_npy(path: impl AsRef<Path>, shape: &[usize], data: &[f64], ty: NpyType) -> Result<()> {
    let path = path.as_ref();
    let file = File::create(path).map_err(|e| bad(path, e))?;
    write_values(file, shape, data.iter().copied(), ty, |v, chunk| ty.encode(v, chunk)).map_err(|e| bad(path, e))
}

/// Writes a tensor's values to `out` as a `.npy` stream of its own element type
/// ([`NpyType::of_dtype`]: float16 as `<f2`, bfloat16 as ml_dtypes' `<V2`,
/// uint32 as `<u4`, ...). Returns the type written.
pub fn write_tensor_npy(out: impl Write, t: &Tensor) -> Result<NpyType> {
    let ty = NpyType::of_dtype(t.dtype());
    write_tensor_npy_as(out, t, ty).map(|()| ty)
}

/// Writes a tensor's values to `out` as a `.npy` stream of element type `ty`: a
/// float32 tensor that is contiguous is encoded straight from its cells; float
/// values convert to `ty` rounding to nearest (exact when `ty` holds the
/// tensor's dtype), integers convert exactly when `ty` holds their range and
/// saturate otherwise.
pub fn write_tensor_npy_as(out: impl Write, t: &Tensor, ty: NpyType) -> Result<()> {
    let d = t.dtype();
    if ty == NpyType::F32 && d.is_float() && cfg!(target_endian = "little") {
        return t.with_f32_values(|values| write_f32_le(out, t.shape(), values));
    }
    let shape = t.shape();
    t.with_cells(|cells| {
        if d.is_float() {
            write_values(out, shape, cells.iter(), ty, |&v, chunk| ty.encode(f64::from(v), chunk))
        } else {
            write_values(out, shape, cells.iter(), ty, |&c, chunk| ty.encode(d.cell_to_i64(c) as f64, chunk))
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::path::PathBuf;

    /// A scratch directory of this test process.
    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nki-npy-{}-{name}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    /// A file with a NumPy header for `descr` and `shape` followed by `payload`.
    fn file_with(dir: &Path, name: &str, descr: &str, shape: &[usize], payload: &[u8]) -> PathBuf {
        let p = dir.join(name);
        let mut bytes = format_header(descr, shape);
        bytes.extend_from_slice(payload);
        std::fs::write(&p, bytes).unwrap();
        p
    }

    #[test]
    fn every_element_type_loads_as_its_dtype() {
        let dir = scratch("types");
        let values = [1.0f64, -2.5, 3.0, 0.0, 7.0, 6.25];
        for ty in NpyType::ALL {
            let vals: Vec<f64> = match ty.dtype() {
                Dtype::I32 | Dtype::I16 | Dtype::I8 => values.iter().map(|v| v.trunc()).collect(),
                Dtype::U8 | Dtype::U16 | Dtype::U32 => values.iter().map(|v| v.abs().trunc()).collect(),
                _ => values.to_vec(),
            };
            let p = dir.join(format!("{ty:?}.npy"));
            write_npy(&p, &[2, 3], &vals, ty).unwrap();
            let t = read_tensor_npy(&p).unwrap();
            assert_eq!((t.shape(), t.dtype()), (&[2usize, 3][..], ty.dtype()), "{ty:?}");
            let want: Vec<f64> = if ty == NpyType::Bool { vals.iter().map(|&v| f64::from(u8::from(v != 0.0))).collect() } else { vals };
            let got: Vec<f64> = t.to_f32_vec().into_iter().map(f64::from).collect();
            assert_eq!(got, want, "{ty:?}");
            assert_eq!(read_npy(&p).unwrap().data, want, "{ty:?}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn large_files_stream_across_chunks() {
        let dir = scratch("chunks");
        // 3 chunks and a bit of f32s, each value its own index.
        let n = 3 * CHUNK_BYTES / 4 + 5;
        let vals: Vec<f64> = (0..n).map(|i| i as f64).collect();
        let p = dir.join("big.npy");
        write_npy(&p, &[n], &vals, NpyType::F32).unwrap();
        let t = read_tensor_npy(&p).unwrap();
        assert!(t.to_f32_vec().iter().enumerate().all(|(i, &v)| v == i as f32));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn threads_read_the_same_tensor_as_one_and_views_write_their_values() {
        let dir = scratch("threads");
        // Over 12 MiB (3 parts of 4 MiB): each value its own index (exact in f32).
        let n = 7 * ((3 << 20) / 7 + 1);
        let p = dir.join("big.npy");
        write_npy(&p, &[n / 7, 7], &(0..n).map(|i| i as f64).collect::<Vec<_>>(), NpyType::F32).unwrap();
        let one = read_tensor_npy(&p).unwrap();
        let many = read_tensor_npy_threads(&p, 3).unwrap();
        assert_eq!((many.shape(), many.dtype()), (one.shape(), one.dtype()));
        assert!(many.to_f32_vec().iter().enumerate().all(|(i, &v)| v == i as f32));
        // A value that does not fit is reported with its index from any part.
        let mut vals: Vec<i64> = (0..n as i64 / 2).collect();
        let bad = vals.len() - 3;
        vals[bad] = 1 << 40;
        let ints = file_with(&dir, "ints.npy", "<i8", &[vals.len()], &vals.iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
        let e = read_tensor_npy_threads(&ints, 4).unwrap_err().to_string();
        assert!(e.contains(&format!("element {bad}: 1099511627776 does not fit int32")), "{e}");
        // Writing: a contiguous tensor (encoded from its cells) and a strided view
        // of the same values (gathered) give NumPy's bytes for them.
        let want: Vec<u8> =
            header_bytes(NpyType::F32, &[n / 7, 7]).into_iter().chain((0..n).flat_map(|i| (i as f32).to_le_bytes())).collect();
        let wide =
            Tensor::from_array(&ndarray::ArrayD::from_shape_fn(ndarray::IxDyn(&[n / 7, 8]), |i| (i[0] * 7 + i[1]) as f32), Dtype::F32);
        let strided = wide.slice(1, 0, 7, 1).unwrap();
        assert!(!strided.is_contiguous());
        for (name, t) in [("contiguous", &one), ("strided", &strided)] {
            let mut bytes = Vec::new();
            write_tensor_npy(&mut bytes, t).unwrap();
            assert!(bytes == want, "{name}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn files_read_together_are_the_files_read_alone_and_keep_their_own_errors() {
        let dir = scratch("together");
        let n = 5 * ((5 << 20) / 5);
        let big = dir.join("big.npy");
        write_npy(&big, &[n / 5, 5], &(0..n).map(|i| (i % 1000) as f64 - 0.5).collect::<Vec<_>>(), NpyType::F32).unwrap();
        let ints = file_with(&dir, "ints.npy", "<i4", &[3], &[1i32, -2, 3].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>());
        let short = file_with(&dir, "short.npy", "<f4", &[4], &[0u8; 12]);
        for threads in [1, 2, 3] {
            let got = read_tensors_npy_threads(&[&big, &short, &ints, &big], threads);
            assert_eq!(got.len(), 4);
            for (i, path) in [(0, &big), (2, &ints), (3, &big)] {
                let (want, t) = (read_tensor_npy(path).unwrap(), got[i].as_ref().unwrap());
                assert_eq!((t.shape(), t.dtype()), (want.shape(), want.dtype()), "{threads} threads, file {i}");
                assert!(
                    t.to_f32_vec().iter().zip(want.to_f32_vec()).all(|(a, b)| a.to_bits() == b.to_bits()),
                    "{threads} threads, file {i}"
                );
            }
            let e = got[1].as_ref().unwrap_err().to_string();
            assert!(e.contains("short.npy") && e.contains("truncated"), "{e}");
        }
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn float32_payloads_load_bit_for_bit() {
        let dir = scratch("bits");
        let bits: [u32; 6] = [0x7fc0_0001, 0xffff_ffff, 0x8000_0000, 0x0000_0001, 0x7f80_0000, 0x3f80_0000];
        let p = file_with(&dir, "bits.npy", "<f4", &[bits.len()], &bits.iter().flat_map(|b| b.to_le_bytes()).collect::<Vec<_>>());
        let t = read_tensor_npy(&p).unwrap();
        assert_eq!(t.to_f32_vec().iter().map(|v| v.to_bits()).collect::<Vec<_>>(), bits);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn hostile_files_are_errors_naming_the_file() {
        let dir = scratch("hostile");
        let f4 = |vals: &[f32]| -> Vec<u8> { vals.iter().flat_map(|v| v.to_le_bytes()).collect() };
        let cases: Vec<(PathBuf, &str)> = vec![
            // 2^32 x 2^32 wraps to 0 elements in u64 arithmetic: it must not pass as an empty array.
            (file_with(&dir, "wrap.npy", "<f4", &[1 << 32, 1 << 32], &[]), "invalid shape = [4294967296, 4294967296]"),
            (file_with(&dir, "wrap3.npy", "<f4", &[3, 6_148_914_691_236_517_206], &f4(&[1.0, 2.0])), "more than"),
            // A large but representable count, with almost no data: refused before allocating.
            (file_with(&dir, "huge.npy", "<f4", &[1 << 40], &f4(&[1.0])), "truncated: the file holds 4 bytes of data"),
            (file_with(&dir, "short.npy", "<f4", &[2, 3], &f4(&[1.0; 5])), "holds 20 bytes of data, shape [2, 3] of <f4 needs 24"),
            (file_with(&dir, "long.npy", "<f4", &[2], &f4(&[1.0; 3])), "trailing bytes"),
            (file_with(&dir, "complex.npy", "<c8", &[1], &[0; 8]), "unsupported element type '<c8'"),
            (file_with(&dir, "object.npy", "|O", &[1], &[0; 8]), "unsupported element type '|O'"),
            (file_with(&dir, "be.npy", ">f4", &[1], &[0; 4]), "big-endian"),
            (
                file_with(&dir, "f64.npy", "<f8", &[2], &[1e300f64, 1.0].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()),
                "element 0: 1e300 overflows float32",
            ),
            (
                file_with(&dir, "i64.npy", "<i8", &[2], &[5i64, 1 << 40].iter().flat_map(|v| v.to_le_bytes()).collect::<Vec<_>>()),
                "element 1: 1099511627776 does not fit int32",
            ),
        ];
        for (path, want) in &cases {
            let e = read_tensor_npy(path).unwrap_err();
            assert!(e.to_string().starts_with(&path.display().to_string()) && e.message.contains(want), "{}: {e}", path.display());
        }
        assert!(read_npy(&cases[0].0).unwrap_err().message.contains("invalid shape"), "the f64 reader shares the checks");
        // Fortran order: NumPy's own header with the flag set.
        let p = dir.join("fortran.npy");
        let mut bytes = format_header("<f4", &[2, 2]);
        let at = bytes.windows(5).position(|w| w == b"False").unwrap();
        bytes.splice(at..at + 5, *b"True ");
        bytes.extend_from_slice(&f4(&[1.0; 4]));
        std::fs::write(&p, bytes).unwrap();
        assert!(read_tensor_npy(&p).unwrap_err().message.contains("Fortran-ordered"));
        assert!(read_tensor_npy(dir.join("missing.npy")).unwrap_err().message.contains("No such file"));
        assert!(read_tensor_npy(&dir).unwrap_err().message.contains("not a regular file (a directory)"));
        // A FIFO with no writer would block an open or a read forever: refused before opening.
        let fifo = dir.join("fifo.npy");
        let c = std::ffi::CString::new(fifo.display().to_string()).unwrap();
        // SAFETY: a plain system call on a NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert!(NpyFile::open(&fifo).err().unwrap().message.contains("not a regular file (a FIFO)"));
        assert!(NpyFile::open("/dev/zero").err().unwrap().message.contains("not a regular file (a device)"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn scalars_and_empty_arrays_load() {
        let dir = scratch("edge");
        let p = file_with(&dir, "scalar.npy", "<f4", &[], &2.5f32.to_le_bytes());
        let t = read_tensor_npy(&p).unwrap();
        assert_eq!((t.shape(), t.to_f32_vec()), (&[][..], vec![2.5]));
        let p = file_with(&dir, "empty.npy", "<f4", &[0, 3], &[]);
        assert_eq!(read_tensor_npy(&p).unwrap().shape(), &[0, 3]);
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn tensors_write_as_their_own_element_type_and_read_back() {
        let dir = scratch("write");
        let t = Tensor::from_f32(&[2, 2], &[1.0, 1.5, -2.0, 1e-3], Dtype::Bf16).unwrap();
        let p = dir.join("t.npy");
        assert_eq!(write_tensor_npy(File::create(&p).unwrap(), &t).unwrap(), NpyType::Bf16);
        let back = read_npy(&p).unwrap();
        assert_eq!((back.shape, back.dtype), (vec![2, 2], Dtype::Bf16));
        assert_eq!(back.data, t.to_f32_vec().into_iter().map(f64::from).collect::<Vec<_>>());
        // Every dtype is written as the element type that loads back as it, bit for bit.
        let cases: [(Dtype, &[i64], NpyType); 6] = [
            (Dtype::I32, &[-5, 0, i32::MAX as i64], NpyType::I32),
            (Dtype::U32, &[0, 7, u32::MAX as i64], NpyType::U32),
            (Dtype::I16, &[-300, 2, i16::MAX as i64], NpyType::I16),
            (Dtype::U16, &[0, 9, u16::MAX as i64], NpyType::U16),
            (Dtype::I8, &[-128, 0, 127], NpyType::I8),
            (Dtype::U8, &[0, 1, 255], NpyType::U8),
        ];
        for (d, vals, ty) in cases {
            let i = Tensor::from_i64(&[3], vals, d).unwrap();
            assert_eq!(write_tensor_npy(File::create(&p).unwrap(), &i).unwrap(), ty, "{d}");
            let back = read_tensor_npy(&p).unwrap();
            assert_eq!((back.dtype(), back.to_i64_vec()), (d, vals.to_vec()), "{d}");
        }
        let h = Tensor::from_f32(&[3], &[1.5, -65504.0, 6.1e-5], Dtype::F16).unwrap();
        assert_eq!(write_tensor_npy(File::create(&p).unwrap(), &h).unwrap(), NpyType::F16);
        let back = read_tensor_npy(&p).unwrap();
        assert_eq!((back.dtype(), back.to_f32_vec()), (Dtype::F16, h.to_f32_vec()));
        assert_eq!(std::fs::metadata(&p).unwrap().len(), header_bytes(NpyType::F16, &[3]).len() as u64 + 6, "2 bytes per element");
        // float8 widens exactly to float32.
        let f8 = Tensor::from_f32(&[2], &[0.5, -448.0], Dtype::Fp8E4m3Fn).unwrap();
        assert_eq!(write_tensor_npy(File::create(&p).unwrap(), &f8).unwrap(), NpyType::F32);
        assert_eq!(read_npy(&p).unwrap().data, vec![0.5, -448.0]);
        assert!(write_npy(&p, &[2, 2], &[1.0], NpyType::F32).unwrap_err().message.contains("needs 4"));
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn codes_load_as_the_dtype_they_are_named_for_and_other_files_are_refused_from_the_header() {
        let dir = scratch("codes");
        // Packed words keep their bits (the top bit of a uint32 too).
        let words = [0x7e38_00c0u32, 0xffff_ffff, 0];
        let p = file_with(&dir, "w.npy", "<u4", &[3], &words.iter().flat_map(|w| w.to_le_bytes()).collect::<Vec<u8>>());
        let mut f = NpyFile::open(&p).unwrap();
        f.read_as_codes_of(Dtype::Fp8E5m2x4).unwrap();
        assert_eq!(f.dtype(), Dtype::Fp8E5m2x4, "the header check sees the codes' dtype");
        let t = read_opened(&[&f], 2).pop().unwrap().unwrap();
        assert_eq!((t.dtype(), t.to_i64_vec()), (Dtype::Fp8E5m2x4, words.map(i64::from).to_vec()));
        // float8 codes decode to their values (0x7f is float8_e4m3fn's NaN).
        let p = file_with(&dir, "b.npy", "|u1", &[4], &[0x38, 0xbc, 0x7e, 0x7f]);
        let mut f = NpyFile::open(&p).unwrap();
        f.read_as_codes_of(Dtype::Fp8E4m3Fn).unwrap();
        let v = read_opened(&[&f], 1).pop().unwrap().unwrap().to_f32_vec();
        assert_eq!(v[..3], [1.0, -1.5, 448.0]);
        assert!(v[3].is_nan());
        // The codes' type must be the file's; other dtypes have no codes.
        let e = f.read_as_codes_of(Dtype::Fp4E2m1Fnx4).unwrap_err().message;
        assert!(e.ends_with("float4_e2m1fn_x4 codes are uint16, but the file holds uint8"), "{e}");
        let e = f.read_as_codes_of(Dtype::Bf16).unwrap_err().message;
        assert!(e.contains("bfloat16 is not read from codes"), "{e}");
        assert_eq!(f.dtype(), Dtype::Fp8E4m3Fn, "a refused naming leaves the file as it was");
        std::fs::remove_dir_all(dir).unwrap();
    }
}
