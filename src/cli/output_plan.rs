//! Where a command's outputs go: checked against its inputs and each other before
//! any work, then written all or nothing.
//!
//! A command declares its input files and output paths first. An output is
//! refused when it is the same file as an input or as another output — compared
//! by resolved location and by file identity (device and inode), so `./q.npy`
//! and `q.npy`, a symlink and its target, or two hard links all count as the
//! same file — when it names a directory or a non-regular file, or when its
//! directory is missing or cannot take new files.
//!
//! [`OutputPlan::commit`] then writes every output to a temporary file in the
//! output's own directory and flushes it to disk (starting writeback while it
//! writes, see [`EarlyWriteback`]); any failure up to there removes
//! the temporaries and leaves every output path untouched. Only then are the
//! temporaries renamed over their targets, one by one (a rename within a
//! directory is atomic: a target is either its old file or the complete new
//! one). Existing targets are first hard-linked (or copied) to a backup, so that
//! if a later rename fails the earlier ones are undone: new files are removed and
//! overwritten ones restored.
//!
//! What this cannot promise: POSIX has no atomic rename of several files, so a
//! crash or kill during the rename phase (between two renames) leaves some
//! outputs new and others old, plus a temporary or backup named
//! `.NAME.nki-PID-N.tmp` / `.bak` next to them. If undoing a rename fails too,
//! the error names the outputs left holding the new data.

use super::deadline;
use super::writeback::EarlyWriteback;
use nki::io::npy::{NpyFile, NpyType, read_opened, write_tensor_npy_as};
use nki::{Dtype, Tensor};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set when stdout carries a machine-readable result (`nki profile --json`): the
/// lines naming written files then go to stderr.
pub static STATUS_TO_STDERR: AtomicBool = AtomicBool::new(false);

/// Where a path leads: its location with the directory resolved, and the identity
/// of the file there, if one exists.
#[derive(Debug)]
struct Place {
    location: PathBuf,
    id: Option<(u64, u64)>,
}

impl Place {
    fn same_file(&self, other: &Place) -> bool {
        self.location == other.location || (self.id.is_some() && self.id == other.id)
    }
}

#[cfg(unix)]
fn file_id(meta: &fs::Metadata) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    Some((meta.dev(), meta.ino()))
}

#[cfg(not(unix))]
fn file_id(_meta: &fs::Metadata) -> Option<(u64, u64)> {
    None
}

/// A declared file: the flag that named it, the path as given, and where it leads.
#[derive(Debug)]
struct Declared {
    flag: String,
    path: PathBuf,
    place: Place,
}

impl Declared {
    fn describe(&self) -> String {
        format!("--{} {}", self.flag, self.path.display())
    }
}

/// A command's input files and output paths (see the module docs).
#[derive(Default)]
pub struct OutputPlan {
    inputs: Vec<Declared>,
    /// Each input opened, its header read (in declaration order).
    files: Vec<NpyFile>,
    outputs: Vec<Declared>,
    /// Threads that may read each input (0 counts as 1).
    threads: usize,
    /// Write float outputs as float32 (the `fp32` numeric model keeps every
    /// value in f32, whatever its tile's dtype).
    widen_floats: bool,
}

/// The sibling of `target` named `.NAME.nki-PID-N.SUFFIX`.
fn sibling(target: &Path, n: usize, suffix: &str) -> PathBuf {
    let name = target.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    target.with_file_name(format!(".{name}.nki-{}-{n}.{suffix}", std::process::id()))
}

/// Whether process `pid` is alive (on Linux: it has a `/proc` entry; elsewhere
/// assumed alive, so nothing of it is removed).
fn alive(pid: u32) -> bool {
    !cfg!(target_os = "linux") || Path::new(&format!("/proc/{pid}")).exists()
}

/// Removes the temporaries, backups and probes that commands which died
/// (killed mid-write) left next to `target`: the files named
/// `.NAME.nki-PID[-N].SUFFIX` whose process no longer runs.
fn remove_stale(target: &Path) {
    let (Some(dir), Some(name)) = (target.parent(), target.file_name()) else { return };
    let prefix = format!(".{}.nki-", name.to_string_lossy());
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let file = entry.file_name().to_string_lossy().into_owned();
        let Some(rest) = file.strip_prefix(&prefix) else { continue };
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let tail = &rest[digits.len()..];
        let suffix_ok = [".tmp", ".bak", ".probe"].iter().any(|s| tail.ends_with(s));
        let counter_ok = tail.trim_start_matches('-').split('.').next().is_some_and(|n| n.chars().all(|c| c.is_ascii_digit()));
        if let Ok(pid) = digits.parse::<u32>()
            && suffix_ok
            && counter_ok
            && pid != std::process::id()
            && !alive(pid)
        {
            let _ = fs::remove_file(entry.path());
        }
    }
}

/// Removes files this plan created (best effort: they are ours, and an error
/// is already being reported).
fn remove_all<'a>(paths: impl IntoIterator<Item = &'a PathBuf>) {
    for p in paths {
        let _ = fs::remove_file(p);
    }
}

/// A declared input: its index in the plan.
#[derive(Clone, Copy, Debug)]
pub struct Input(usize);

impl OutputPlan {
    /// An empty plan.
    pub fn new() -> Self {
        OutputPlan::default()
    }

    /// Lets loading each input use up to `threads` threads (the launch's
    /// budget; the tensors are the same for every count).
    pub fn threads(mut self, threads: usize) -> Self {
        self.threads = threads;
        self
    }

    /// Writes float outputs as float32 when `widen` (the `fp32` numeric model).
    pub fn widen_floats(mut self, widen: bool) -> Self {
        self.widen_floats = widen;
        self
    }

    /// The header of a declared input.
    pub fn header(&self, input: Input) -> &NpyFile {
        &self.files[input.0]
    }

    /// The flag and path of a declared input, as messages name it.
    pub fn describe(&self, input: Input) -> String {
        self.inputs[input.0].describe()
    }

    /// Reads a declared input's payload as a tensor, with the plan's threads;
    /// an error names the flag and the file.
    pub fn read(&self, input: Input) -> Result<Tensor, String> {
        self.read_all(&[input]).pop().unwrap_or_else(|| Err("nothing was read".into()))
    }

    /// Reads several declared inputs together, with the plan's threads (one
    /// result per input, in order).
    pub fn read_all(&self, inputs: &[Input]) -> Vec<Result<Tensor, String>> {
        deadline::phase(deadline::READING);
        let files: Vec<&NpyFile> = inputs.iter().map(|i| &self.files[i.0]).collect();
        read_opened(&files, self.threads.max(1))
            .into_iter()
            .zip(inputs)
            .map(|(r, i)| r.map_err(|e| format!("--{} {e}", self.inputs[i.0].flag)))
            .collect()
    }

    /// Declares the input file of `--flag`: opens it if it is a regular file
    /// and reads its header (not its payload).
    pub fn input(&mut self, flag: &str, path: &Path) -> Result<Input, String> {
        let fail = |e: std::io::Error| format!("--{flag} {}: {e}", path.display());
        deadline::phase(deadline::READING);
        let file = NpyFile::open(path).map_err(|e| format!("--{flag} {e}"))?;
        let location = path.canonicalize().map_err(fail)?;
        let id = file_id(&fs::metadata(path).map_err(fail)?);
        self.inputs.push(Declared { flag: flag.into(), path: path.into(), place: Place { location, id } });
        self.files.push(file);
        Ok(Input(self.files.len() - 1))
    }

    /// Reads a declared input as the raw codes of `dtype` (see
    /// [`NpyFile::read_as_codes_of`]), checked against its header; an error
    /// names the flag and the file.
    pub fn read_as_codes_of(&mut self, input: Input, dtype: Dtype) -> Result<(), String> {
        self.files[input.0].read_as_codes_of(dtype).map_err(|e| format!("--{} {e}", self.inputs[input.0].flag))
    }

    /// Checks that `--flag DIR` takes new files (for outputs declared once a run
    /// says how many there are).
    pub fn check_dir(&self, flag: &str, dir: &Path) -> Result<(), String> {
        let probe = sibling(&dir.join("out"), self.outputs.len(), "probe");
        File::create_new(&probe).map_err(|e| format!("--{flag} {}: cannot create files: {e}", dir.display()))?;
        fs::remove_file(&probe).map_err(|e| format!("--{flag} {}: {e}", dir.display()))
    }

    /// Declares the output path of `--flag`, refusing it if it is an input or
    /// another output, a directory or a non-regular file, or if its directory is
    /// missing or refuses new files.
    pub fn output(&mut self, flag: &str, path: &Path) -> Result<(), String> {
        let what = format!("--{flag} {}", path.display());
        let name = path.file_name().ok_or_else(|| format!("{what}: not a file name"))?;
        let dir = path.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let resolved = dir.canonicalize().map_err(|e| format!("{what}: directory {}: {e}", dir.display()))?;
        let existing = match fs::metadata(path) {
            Ok(m) if m.is_dir() => return Err(format!("{what}: is a directory")),
            Ok(m) if !m.is_file() => return Err(format!("{what}: is not a regular file")),
            Ok(m) => Some(m),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
            Err(e) => return Err(format!("{what}: {e}")),
        };
        let place = Place { location: resolved.join(name), id: existing.as_ref().and_then(file_id) };
        remove_stale(&place.location);
        if let Some(i) = self.inputs.iter().find(|i| i.place.same_file(&place)) {
            return Err(format!("{what} is the same file as {}: an output never overwrites an input", i.describe()));
        }
        if let Some(o) = self.outputs.iter().find(|o| o.place.same_file(&place)) {
            return Err(format!("{what} is the same file as {}: every output needs its own file", o.describe()));
        }
        // The commit will need to create a file next to the target.
        let probe = sibling(&place.location, self.outputs.len(), "probe");
        File::create_new(&probe).map_err(|e| format!("{what}: cannot create files in {}: {e}", resolved.display()))?;
        fs::remove_file(&probe).map_err(|e| format!("{what}: {e}"))?;
        self.outputs.push(Declared { flag: flag.into(), path: path.into(), place });
        Ok(())
    }

    /// Writes `tensors` (one per declared output, in order) as `.npy` files, all
    /// or nothing, and prints a line per file written (to stdout, or to stderr
    /// when [`STATUS_TO_STDERR`] is set).
    pub fn commit(&self, tensors: &[&Tensor]) -> Result<(), String> {
        if tensors.len() != self.outputs.len() {
            return Err(format!("{} outputs were declared but {} tensors are to be written", self.outputs.len(), tensors.len()));
        }
        deadline::phase(deadline::WRITING);
        let types: Vec<NpyType> = tensors.iter().map(|t| self.file_type(t)).collect();
        let mut staged = Vec::with_capacity(tensors.len());
        for (i, ((o, t), &ty)) in self.outputs.iter().zip(tensors).zip(&types).enumerate() {
            let tmp = sibling(&o.place.location, i, "tmp");
            deadline::staged(tmp.clone());
            if let Err(e) = stage(&tmp, t, ty) {
                remove_all(&staged);
                return Err(format!("{}: {e}; nothing was written", o.describe()));
            }
            staged.push(tmp);
        }
        deadline::publishing(|| self.publish(&staged))?;
        for ((o, t), ty) in self.outputs.iter().zip(tensors).zip(types) {
            let line = format!("wrote {} {:?} {}", o.path.display(), t.shape(), ty.name());
            if STATUS_TO_STDERR.load(Ordering::Relaxed) { eprintln!("{line}") } else { outln!("{line}") }
        }
        Ok(())
    }

    /// The element type an output tensor is written as: its own dtype's
    /// (float16 as float16, uint32 as uint32, bfloat16 as ml_dtypes stores it),
    /// float32 for floats under the `fp32` model.
    fn file_type(&self, t: &Tensor) -> NpyType {
        if self.widen_floats && t.dtype().is_float() { NpyType::F32 } else { NpyType::of_dtype(t.dtype()) }
    }

    /// Renames the staged temporaries over their targets (see the module docs),
    /// undoing the earlier renames if one fails.
    fn publish(&self, staged: &[PathBuf]) -> Result<(), String> {
        let mut backups = Vec::with_capacity(staged.len());
        for (i, o) in self.outputs.iter().enumerate() {
            // A directory that appeared since planning is not backed up: its rename fails below.
            let backup =
                matches!(fs::symlink_metadata(&o.place.location), Ok(m) if !m.is_dir()).then(|| sibling(&o.place.location, i, "bak"));
            if let Some(b) = &backup
                && let Err(e) = fs::hard_link(&o.place.location, b).or_else(|_| fs::copy(&o.place.location, b).map(drop))
            {
                remove_all(staged.iter().chain(backups.iter().flatten()));
                return Err(format!("{}: cannot keep a backup of the existing file: {e}; nothing was written", o.describe()));
            }
            backups.push(backup);
        }
        for (i, (o, tmp)) in self.outputs.iter().zip(staged).enumerate() {
            if let Err(e) = fs::rename(tmp, &o.place.location) {
                let left = self.roll_back(&backups[..i]);
                remove_all(staged[i..].iter().chain(backups[i..].iter().flatten()));
                let outcome = if left.is_empty() {
                    "no output was changed".to_string()
                } else {
                    format!("undoing failed, these hold the new data: {}", left.join(", "))
                };
                return Err(format!("{}: {e}; {outcome}", o.describe()));
            }
        }
        remove_all(backups.iter().flatten());
        sync_dirs(&self.outputs);
        Ok(())
    }

    /// Undoes the renames onto the first `backups.len()` outputs: restores each
    /// backup over its target, or removes a target that did not exist before.
    /// Returns the outputs it could not undo.
    fn roll_back(&self, backups: &[Option<PathBuf>]) -> Vec<String> {
        let mut left = Vec::new();
        for (o, backup) in self.outputs.iter().zip(backups).rev() {
            let undone = match backup {
                Some(b) => fs::rename(b, &o.place.location),
                None => fs::remove_file(&o.place.location),
            };
            if undone.is_err() {
                left.push(o.path.display().to_string());
            }
        }
        left
    }
}

/// Writes `t` to the new file `tmp` and flushes it to disk; on failure removes
/// what it created (and nothing that was there before).
fn stage(tmp: &Path, t: &Tensor, ty: NpyType) -> Result<(), String> {
    let file = File::create_new(tmp).map_err(|e| e.to_string())?;
    let written = write_tensor_npy_as(EarlyWriteback::new(&file), t, ty)
        .map_err(|e| e.to_string())
        .and_then(|()| file.sync_all().map_err(|e| e.to_string()));
    if written.is_err() {
        let _ = fs::remove_file(tmp);
    }
    written
}

/// Flushes the directory entries of the renames (best effort: not every platform
/// can open a directory).
fn sync_dirs(outputs: &[Declared]) {
    for o in outputs {
        if let Some(dir) = o.place.location.parent() {
            let _ = File::open(dir).and_then(|d| d.sync_all());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki::io::npy::read_npy;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("nki-plan-{}-{name}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        dir
    }

    fn entries(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = fs::read_dir(dir).unwrap().map(|e| e.unwrap().file_name().to_string_lossy().into_owned()).collect();
        names.sort();
        names
    }

    fn tensor(v: f32) -> Tensor {
        Tensor::from_f32(&[2], &[v, v], Dtype::F32).unwrap()
    }

    #[test]
    fn the_same_file_under_another_name_is_refused() {
        let dir = scratch("same");
        let q = dir.join("q.npy");
        let input = [nki::io::npy::header_bytes(NpyType::F32, &[1]), 1.0f32.to_le_bytes().to_vec()].concat();
        fs::write(&q, &input).unwrap();
        fs::hard_link(&q, dir.join("hard.npy")).unwrap();
        std::os::unix::fs::symlink(&q, dir.join("soft.npy")).unwrap();
        fs::create_dir(dir.join("sub")).unwrap();
        let mut plan = OutputPlan::new();
        plan.input("q", &q).unwrap();
        for (path, why) in [
            (dir.join("q.npy"), "same file as --q"),
            (dir.join("./q.npy"), "same file as --q"),
            (dir.join("sub/../q.npy"), "same file as --q"),
            (dir.join("hard.npy"), "same file as --q"),
            (dir.join("soft.npy"), "same file as --q"),
            (dir.join("sub"), "is a directory"),
            (dir.join("missing/o.npy"), "directory"),
            (q.join("o.npy"), "directory"),
            (PathBuf::from("/dev/null"), "not a regular file"),
        ] {
            let e = plan.output("out", &path).unwrap_err();
            assert!(e.starts_with(&format!("--out {}", path.display())) && e.contains(why), "{}: {e}", path.display());
        }
        plan.output("out", &dir.join("o.npy")).unwrap();
        let e = plan.output("lse", &dir.join("sub/../o.npy")).unwrap_err();
        assert!(e.contains("same file as --out") && e.contains("its own file"), "{e}");
        assert_eq!(entries(&dir), ["hard.npy", "q.npy", "soft.npy", "sub"], "planning writes nothing");
        assert_eq!(fs::read(&q).unwrap(), input);
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_commit_writes_every_output_and_leaves_no_temporaries() {
        let dir = scratch("commit");
        fs::write(dir.join("b.npy"), b"old").unwrap();
        let mut plan = OutputPlan::new();
        plan.output("a", &dir.join("a.npy")).unwrap();
        plan.output("b", &dir.join("b.npy")).unwrap();
        plan.commit(&[&tensor(1.0), &tensor(2.0)]).unwrap();
        assert_eq!(entries(&dir), ["a.npy", "b.npy"]);
        assert_eq!(read_npy(dir.join("a.npy")).unwrap().data, [1.0, 1.0]);
        assert_eq!(read_npy(dir.join("b.npy")).unwrap().data, [2.0, 2.0]);
        assert!(plan.commit(&[&tensor(1.0)]).unwrap_err().contains("2 outputs were declared but 1"));
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failing_rename_undoes_the_earlier_ones() {
        let dir = scratch("rollback");
        fs::write(dir.join("a.npy"), b"old a").unwrap();
        let mut plan = OutputPlan::new();
        for name in ["a", "new", "c"] {
            plan.output(name, &dir.join(format!("{name}.npy"))).unwrap();
        }
        // After planning, `c.npy` turns into a non-empty directory: its rename, the last, fails.
        fs::create_dir(dir.join("c.npy")).unwrap();
        fs::write(dir.join("c.npy/keep"), b"x").unwrap();
        let e = plan.commit(&[&tensor(1.0), &tensor(2.0), &tensor(3.0)]).unwrap_err();
        assert!(e.starts_with(&format!("--c {}", dir.join("c.npy").display())) && e.ends_with("no output was changed"), "{e}");
        assert_eq!(entries(&dir), ["a.npy", "c.npy"], "new.npy removed, no temporaries or backups left");
        assert_eq!(fs::read(dir.join("a.npy")).unwrap(), b"old a", "the overwritten output is restored");
        fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_failing_write_leaves_every_target_untouched() {
        let dir = scratch("stage");
        fs::write(dir.join("a.npy"), b"old a").unwrap();
        let mut plan = OutputPlan::new();
        plan.output("a", &dir.join("a.npy")).unwrap();
        plan.output("b", &dir.join("b.npy")).unwrap();
        // The second temporary's name is taken (by a directory), so staging it fails.
        let blocker = sibling(&dir.canonicalize().unwrap().join("b.npy"), 1, "tmp");
        fs::create_dir(&blocker).unwrap();
        let e = plan.commit(&[&tensor(1.0), &tensor(2.0)]).unwrap_err();
        assert!(e.contains("--b") && e.ends_with("nothing was written"), "{e}");
        fs::remove_dir(&blocker).unwrap();
        assert_eq!(entries(&dir), ["a.npy"], "the first temporary is removed");
        assert_eq!(fs::read(dir.join("a.npy")).unwrap(), b"old a");
        fs::remove_dir_all(&dir).unwrap();
    }
}
