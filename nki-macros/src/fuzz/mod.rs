//! Seeded fuzzing of the whole expansion (parse, check, both emitters): every
//! `#[nki_kernel]` / `#[nki_helper]` item of the workspace's example kernels, library kernels,
//! attention kernels and UI cases, mutated, plus token soup. Each case runs under
//! `catch_unwind` and must neither panic nor take more than [`MAX_CASE_TIME`]
//! of its thread's CPU time (wall time where that is not available);
//! its output must parse as Rust items nested no deeper than the emitters'
//! bound.
//!
//! `cargo test --release -p nki-macros fuzz` runs the CI budget of [`CI_CASES`]
//! cases; `NKI_FUZZ_CASES=200000` is the long run before a release,
//! `NKI_FUZZ_SEED=n` changes the seed and `NKI_FUZZ_CASE=i` replays case `i`
//! alone. A failing case is printed with its seed and the mutated source.

mod corpus;
mod imports;
mod mutate;
mod rng;
mod soup;

use crate::ast::FnKind;
use crate::bounds::{MAX_EMITTED_DEPTH, group_depth};
use crate::expand::expand;
use crate::parse::check_token_nesting;
use corpus::Corpus;
use proc_macro2::{TokenStream, TokenTree};
use rng::{Rng, case_seed};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::time::{Duration, Instant};

/// Cases per CI run.
const CI_CASES: u64 = 3000;
/// The seed of CI runs.
const DEFAULT_SEED: u64 = 0x6e6b_692d_6675_7a7a;
/// The most CPU time one expansion may take: the macro's work is bounded.
const MAX_CASE_TIME: Duration = Duration::from_secs(1);
/// Every tenth case is token soup; the others mutate a corpus item.
const SOUP_EVERY: u64 = 10;

fn env_u64(name: &str) -> Option<u64> {
    let v = std::env::var(name).ok()?;
    let v = v.trim();
    match v.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => v.replace('_', "").parse().ok(),
    }
}

/// One generated input.
struct Case {
    origin: String,
    kind: FnKind,
    attr: TokenStream,
    item: TokenStream,
}

impl Case {
    fn source(&self) -> String {
        let attr = match self.kind {
            FnKind::Kernel => "nki_kernel",
            FnKind::Helper => "nki_helper",
        };
        format!("#[{attr}({})]\n{}", self.attr, self.item)
    }
}

/// Case `index` of the run seeded `base`.
fn generate(corpus: &Corpus, base: u64, index: u64) -> Case {
    let mut rng = Rng::new(case_seed(base, index));
    let n = corpus.entries.len() as u64;
    let kernel_index = (index - index / SOUP_EVERY) % n.max(1);
    let Some(entry) = corpus.entries.get(kernel_index as usize) else {
        return Case { origin: "empty corpus".into(), kind: FnKind::Kernel, attr: TokenStream::new(), item: TokenStream::new() };
    };
    if index % SOUP_EVERY == SOUP_EVERY - 1 {
        let (kind, attr, item) = soup::soup(&mut rng, &corpus.pool, &entry.item);
        return Case { origin: "token soup".into(), kind, attr, item };
    }
    let mut tree = mutate::to_nodes(entry.item.clone());
    for _ in 0..1 + rng.below(3) {
        mutate::mutate(&mut tree, &mut rng, &corpus.pool);
    }
    Case { origin: format!("mutated {}", entry.origin), kind: entry.kind, attr: entry.attr.clone(), item: mutate::to_stream(&tree) }
}

/// Whether the expansion reported errors.
fn has_errors(ts: &TokenStream) -> bool {
    ts.clone().into_iter().any(|t| matches!(&t, TokenTree::Ident(i) if i == "compile_error"))
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic".into())
}

/// What one expansion showed.
struct Outcome {
    /// The item parses as Rust, so the macro's own parser and checker saw it
    /// (rustc only ever hands attribute macros such items).
    parsed: bool,
    /// The expansion reported no errors, so both emitters ran.
    clean: bool,
    took: Duration,
    /// The group nesting of the expansion.
    depth: usize,
}

/// Expands one case under `catch_unwind`; `Err` says why the case fails.
fn run_case(case: &Case) -> Result<Outcome, String> {
    let start = CaseClock::start();
    let out = catch_unwind(AssertUnwindSafe(|| expand(case.kind, case.attr.clone(), case.item.clone())));
    let took = start.elapsed();
    let out = out.map_err(|p| format!("panicked: {}", panic_message(p.as_ref())))?;
    if took > MAX_CASE_TIME {
        return Err(format!("took {took:?} (more than {MAX_CASE_TIME:?})"));
    }
    let parsed = check_token_nesting(&case.item).is_ok() && syn::parse2::<syn::Item>(case.item.clone()).is_ok();
    if parsed {
        syn::parse2::<syn::File>(out.clone()).map_err(|e| format!("the expansion is not valid Rust: {e}"))?;
    }
    let depth = group_depth(&out);
    if depth > MAX_EMITTED_DEPTH {
        return Err(format!("the expansion nests {depth} groups deep, more than {MAX_EMITTED_DEPTH}"));
    }
    Ok(Outcome { parsed, clean: !has_errors(&out), took, depth })
}

/// The time a case takes: its thread's CPU time, so that other processes on a
/// busy machine do not make a bounded expansion look unbounded.
struct CaseClock {
    cpu: Option<Duration>,
    wall: Instant,
}

impl CaseClock {
    fn start() -> CaseClock {
        CaseClock { cpu: thread_cpu_time(), wall: Instant::now() }
    }

    fn elapsed(&self) -> Duration {
        match (self.cpu, thread_cpu_time()) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => self.wall.elapsed(),
        }
    }
}

/// The calling thread's CPU time.
#[cfg(unix)]
fn thread_cpu_time() -> Option<Duration> {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid timespec for the call to write.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    (rc == 0).then(|| Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0)))
}

#[cfg(not(unix))]
fn thread_cpu_time() -> Option<Duration> {
    None
}

#[test]
fn expansion_never_panics_and_stays_bounded() {
    let base = env_u64("NKI_FUZZ_SEED").unwrap_or(DEFAULT_SEED);
    let cases = env_u64("NKI_FUZZ_CASES").unwrap_or(CI_CASES);
    let only = env_u64("NKI_FUZZ_CASE");
    // Case i runs on thread i % threads; every case has its own seed, so the
    // cases (and the failures) are the same for any thread count.
    let threads = if only.is_some() { 1 } else { std::thread::available_parallelism().map_or(1, |n| n.get()) as u64 };
    let tallies: Vec<Tally> = std::thread::scope(|scope| {
        let runs: Vec<_> = (0..threads)
            .map(|t| {
                let indices: Box<dyn Iterator<Item = u64> + Send> = match only {
                    Some(i) => Box::new(std::iter::once(i)),
                    None => Box::new((t..cases).step_by(threads as usize)),
                };
                // Room for syn to parse the deeply nested emitted code; the
                // macro's own stack needs are tested on a small stack in `bounds`.
                std::thread::Builder::new()
                    .stack_size(64 << 20)
                    .spawn_scoped(scope, move || fuzz(base, indices, (t as usize, threads as usize)))
                    .expect("a thread for the fuzz run")
            })
            .collect();
        runs.into_iter().map(|r| r.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
    });
    let mut all = Tally::default();
    for t in tallies {
        all.merge(t);
    }
    let Tally { run, parsed, clean, slowest, deepest, failures, .. } = &all;
    eprintln!(
        "fuzz: {} corpus items (slowest {} in {:.1?}), {run} cases (seed {base:#x}) on {threads} threads: {parsed} parsed, {clean} expanded without errors, {} failed; slowest case {} took {:.1?}; deepest expansion {deepest} groups",
        all.corpus_items,
        all.slowest_item.1,
        all.slowest_item.0,
        failures.len(),
        slowest.1,
        slowest.0
    );
    assert!(failures.is_empty(), "{} failing cases, the first:\n{}", failures.len(), failures[0]);
    if only.is_none() {
        // The mutations must mostly reach the macro's checker, and some its emitters.
        assert!(parsed * 10 >= run * 3, "only {parsed} of {run} cases parse: the mutations no longer reach the checker");
        assert!(clean * 100 >= run * 4, "only {clean} of {run} cases expand without errors: the mutations no longer reach the emitters");
    }
}

/// What one fuzz thread saw.
#[derive(Default)]
struct Tally {
    corpus_items: usize,
    slowest_item: (Duration, String),
    run: u64,
    parsed: u64,
    clean: u64,
    slowest: (Duration, u64),
    deepest: usize,
    failures: Vec<String>,
}

impl Tally {
    fn merge(&mut self, other: Tally) {
        self.corpus_items = self.corpus_items.max(other.corpus_items);
        if other.slowest_item.0 > self.slowest_item.0 {
            self.slowest_item = other.slowest_item;
        }
        self.run += other.run;
        self.parsed += other.parsed;
        self.clean += other.clean;
        if other.slowest.0 > self.slowest.0 {
            self.slowest = other.slowest;
        }
        self.deepest = self.deepest.max(other.deepest);
        self.failures.extend(other.failures);
    }
}

/// Runs the cases `indices` of the run seeded `base` on this thread (its own
/// corpus: token streams cannot cross threads), and the corpus items
/// themselves whose index is `thread.0` modulo `thread.1`.
fn fuzz(base: u64, indices: Box<dyn Iterator<Item = u64> + Send>, thread: (usize, usize)) -> Tally {
    let corpus = corpus::load();
    let mut tally = Tally { corpus_items: corpus.entries.len(), ..Tally::default() };
    for dir in ["examples/kernels/", "examples/nkilib/src/", "nki-attention/src/", "tests/ui/"] {
        assert!(corpus.entries.iter().any(|e| e.origin.starts_with(dir)), "no #[nki_kernel] / #[nki_helper] item found under {dir}");
    }
    // The corpus itself: the project's kernels expand without errors.
    for e in corpus.entries.iter().skip(thread.0).step_by(thread.1.max(1)) {
        let case = Case { origin: e.origin.clone(), kind: e.kind, attr: e.attr.clone(), item: e.item.clone() };
        match run_case(&case) {
            Ok(o) => {
                assert!(e.ui || o.clean, "{} does not expand cleanly on its own", e.origin);
                if o.took > tally.slowest_item.0 {
                    tally.slowest_item = (o.took, e.origin.clone());
                }
            }
            Err(why) => tally.failures.push(format!("corpus item {}: {why}\n{}", e.origin, case.source())),
        }
    }
    for index in indices {
        let case = generate(&corpus, base, index);
        tally.run += 1;
        match run_case(&case) {
            Ok(o) => {
                tally.parsed += u64::from(o.parsed);
                tally.clean += u64::from(o.clean);
                if o.took > tally.slowest.0 {
                    tally.slowest = (o.took, index);
                }
                tally.deepest = tally.deepest.max(o.depth);
            }
            Err(why) => {
                let report =
                    format!("case {index} (NKI_FUZZ_SEED={base:#x} NKI_FUZZ_CASE={index}), {}: {why}\n{}", case.origin, case.source());
                eprintln!("{report}\n");
                tally.failures.push(report);
            }
        }
    }
    tally
}
