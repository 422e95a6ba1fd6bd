//! `--timeout SECS` over the whole command: reading the inputs, the run and
//! writing the outputs.
//!
//! [`start`] arms a watchdog thread. The launch gets what is left of the limit
//! ([`remaining`]) and reports a run past it itself, naming what each program
//! was doing. Outside the run (reading inputs, writing outputs) the watchdog
//! ends the command at the deadline with a one-line error naming the phase,
//! after removing the temporaries the output plan had staged ([`staged`]); the
//! renames that publish the outputs hold it off ([`publishing`]), so the
//! outputs are either all old or all new. Inside the run it waits a grace
//! period for the launch's own report before it ends the command anyway.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// How long the watchdog lets a launch past the deadline report by itself.
const LAUNCH_GRACE: Duration = Duration::from_secs(5);

/// The exit code of a command past its limit (a failure, as a launch past it).
const EXIT: i32 = 1;

/// What the command is doing, for the watchdog.
struct State {
    /// The phase, as the error names it.
    phase: &'static str,
    /// Temporary files to remove if the command is ended.
    staged: Vec<PathBuf>,
    /// The outputs are published: the command is done whatever the clock says.
    done: bool,
}

static STATE: Mutex<State> = Mutex::new(State { phase: "starting", staged: Vec::new(), done: false });

/// The command's deadline and limit, once armed.
static DEADLINE: Mutex<Option<(Instant, Duration)>> = Mutex::new(None);

/// The phase names.
pub const READING: &str = "still reading the inputs";
/// The kernel is running.
pub const RUNNING: &str = "the kernel was still running";
/// Outputs are being written.
pub const WRITING: &str = "still writing the outputs";

fn state() -> std::sync::MutexGuard<'static, State> {
    STATE.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Arms the watchdog for `limit` from now (nothing without a limit).
pub fn start(limit: Option<Duration>) {
    let Some(limit) = limit else { return };
    let deadline = Instant::now() + limit;
    *DEADLINE.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = Some((deadline, limit));
    std::thread::spawn(move || {
        std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
        if state().phase == RUNNING {
            std::thread::sleep(LAUNCH_GRACE);
        }
        let s = state();
        if s.done {
            return;
        }
        for p in &s.staged {
            let _ = std::fs::remove_file(p);
        }
        eprintln!("error: the command did not finish within {limit:?} (--timeout): {}", s.phase);
        std::process::exit(EXIT);
    });
}

/// Records the phase the command is in.
pub fn phase(name: &'static str) {
    state().phase = name;
}

/// The time left for the launch (None without a limit; at least a microsecond,
/// since a launch needs a positive limit: a run that starts at the deadline
/// stops at its first op).
pub fn remaining() -> Option<Duration> {
    let armed = *DEADLINE.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    armed.map(|(deadline, _)| deadline.saturating_duration_since(Instant::now()).max(Duration::from_micros(1)))
}

/// `launch` bounded by what is left of the command's limit (unchanged without
/// one), entering the run phase: call it right before the launch.
pub fn bound(launch: nki::Launch) -> nki::Launch {
    phase(RUNNING);
    match remaining() {
        Some(left) => launch.timeout(left),
        None => launch,
    }
}

/// The command's limit, if armed.
pub fn limit() -> Option<Duration> {
    DEADLINE.lock().unwrap_or_else(std::sync::PoisonError::into_inner).map(|(_, l)| l)
}

/// Records a temporary file the output plan created (removed if the command is ended).
pub fn staged(tmp: PathBuf) {
    state().staged.push(tmp);
}

/// Runs `publish` (the renames of the outputs into place) without the watchdog
/// ending the command in between; a command whose renames all succeeded is done.
pub fn publishing<R>(publish: impl FnOnce() -> Result<R, String>) -> Result<R, String> {
    let mut s = state();
    let r = publish();
    s.staged.clear();
    s.done = r.is_ok();
    r
}
