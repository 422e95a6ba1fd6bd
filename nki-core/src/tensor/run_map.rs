//! A value per cell of an allocation, kept as runs of equal values.
//!
//! The race record of a launch ([`super::write_races`]) stamps every cell of
//! shared HBM a program accesses. Kernels access it a tile at a time, and a
//! tile is usually one contiguous run of cells with one stamp, so the record
//! keeps runs: a whole-process attention output (2 Mi cells) is a few hundred
//! runs instead of 24 MiB of per-cell stamps the OS would have to zero, and an
//! access costs a few map operations instead of a loop over its cells.
//! Accesses that scatter (strided or indirect writes) would make a run per
//! cell; past [`MAX_RUNS`] runs the map turns into one value per cell, so the
//! worst case costs what a per-cell record costs.
use std::collections::BTreeMap;
use std::ops::Range;

/// The number of runs past which a map keeps one value per cell instead.
const MAX_RUNS: usize = 4096;

/// A value per cell of `0..len`, the default until set.
pub(super) struct RunMap<T> {
    len: usize,
    repr: Repr<T>,
}

enum Repr<T> {
    /// `start → (end, value)`: disjoint runs of a value other than the
    /// default, no two touching runs with the same value.
    Runs(BTreeMap<usize, (usize, T)>),
    /// One value per cell.
    Cells(Vec<T>),
}

impl<T: Copy + Default + PartialEq> RunMap<T> {
    /// `len` cells, every one the default.
    pub(super) fn new(len: usize) -> RunMap<T> {
        RunMap { len, repr: Repr::Runs(BTreeMap::new()) }
    }

    /// Calls `f(piece, value)` for the pieces of `cells` (inside the map)
    /// that hold one value, in ascending order, until `f` returns `Some`.
    pub(super) fn find<R>(&self, cells: Range<usize>, mut f: impl FnMut(Range<usize>, T) -> Option<R>) -> Option<R> {
        let Range { start, end } = cells;
        match &self.repr {
            Repr::Runs(runs) => {
                let mut at = start;
                // The run holding `start`, if one begins before it, then those beginning inside.
                let before = runs.range(..start).next_back().filter(|(_, (e, _))| *e > start);
                for (&s, &(e, v)) in before.into_iter().chain(runs.range(start..end)) {
                    let s = s.max(start);
                    if at < s
                        && let Some(r) = f(at..s, T::default())
                    {
                        return Some(r);
                    }
                    let e = e.min(end);
                    if let Some(r) = f(s..e, v) {
                        return Some(r);
                    }
                    at = e;
                }
                if at < end { f(at..end, T::default()) } else { None }
            }
            Repr::Cells(values) => {
                let mut at = start;
                while at < end {
                    let v = values[at];
                    let e = values[at..end].iter().position(|&x| x != v).map_or(end, |n| at + n);
                    if let Some(r) = f(at..e, v) {
                        return Some(r);
                    }
                    at = e;
                }
                None
            }
        }
    }

    /// The pieces of `cells` (inside the map) whose value satisfies `keep`.
    pub(super) fn pieces_where(&self, cells: Range<usize>, mut keep: impl FnMut(T) -> bool) -> Vec<Range<usize>> {
        let mut out: Vec<Range<usize>> = Vec::new();
        self.find(cells, |piece, v| {
            if keep(v) {
                match out.last_mut() {
                    Some(last) if last.end == piece.start => last.end = piece.end,
                    _ => out.push(piece),
                }
            }
            None::<()>
        });
        out
    }

    /// Sets every cell of `cells` (inside the map) to `value`.
    pub(super) fn fill(&mut self, cells: Range<usize>, value: T) {
        if cells.is_empty() {
            return;
        }
        let len = self.len;
        let runs = match &mut self.repr {
            Repr::Cells(values) => return values[cells].fill(value),
            Repr::Runs(runs) => runs,
        };
        let Range { mut start, mut end } = cells;
        // A run reaching into `cells` from the left keeps its part before them
        // (and after them, when it covers them).
        if let Some((&s, &(e, v))) = runs.range(..start).next_back().filter(|(_, (e, _))| *e > start) {
            runs.insert(s, (start, v));
            if e > end {
                runs.insert(end, (e, v));
            }
        }
        // Runs beginning inside `cells` keep only their part after them.
        while let Some((&s, &(e, v))) = runs.range(start..end).next() {
            runs.remove(&s);
            if e > end {
                runs.insert(end, (e, v));
            }
        }
        if value == T::default() {
            return;
        }
        // Touching runs of the same value become one.
        if let Some((&s, _)) = runs.range(..start).next_back().filter(|(_, (e, v))| *e == start && *v == value) {
            runs.remove(&s);
            start = s;
        }
        if let Some(&(e, _)) = runs.get(&end).filter(|&&(_, v)| v == value) {
            runs.remove(&end);
            end = e;
        }
        runs.insert(start, (end, value));
        if runs.len() > MAX_RUNS {
            let mut values = vec![T::default(); len];
            for (&s, &(e, v)) in runs.iter() {
                values[s..e].fill(v);
            }
            self.repr = Repr::Cells(values);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_rng::xorshift;

    /// The map's values, cell by cell.
    fn cells(m: &RunMap<u32>) -> Vec<u32> {
        (0..m.len).map(|c| get(m, c)).collect()
    }

    fn get(m: &RunMap<u32>, c: usize) -> u32 {
        m.find(c..c + 1, |_, v| Some(v)).unwrap_or(u32::MAX)
    }

    /// The pieces `find` visits over `range`.
    fn pieces(m: &RunMap<u32>, range: Range<usize>) -> Vec<(Range<usize>, u32)> {
        let mut out = Vec::new();
        m.find(range, |p, v| {
            out.push((p, v));
            None::<()>
        });
        out
    }

    #[test]
    fn fills_agree_with_a_plain_array() {
        let mut seed = 0x9e37_79b9_7f4a_7c15;
        for round in 0..200 {
            let len = 1 + (xorshift(&mut seed) % 200) as usize;
            let mut m = RunMap::new(len);
            let mut plain = vec![0u32; len];
            for _ in 0..50 {
                let a = (xorshift(&mut seed) % len as u64) as usize;
                let b = a + (xorshift(&mut seed) % (len - a) as u64) as usize + 1;
                // Few values, so that touching runs often merge; 0 clears.
                let v = (xorshift(&mut seed) % 3) as u32;
                m.fill(a..b, v);
                plain[a..b].fill(v);
                assert_eq!(cells(&m), plain, "round {round}");
            }
            // Pieces cover the range in order, each with one value, and
            // neighbours differ (for the runs form) or are merged.
            let got = pieces(&m, 0..len);
            assert_eq!(got.first().map(|p| p.0.start), Some(0));
            assert_eq!(got.last().map(|p| p.0.end), Some(len));
            for w in got.windows(2) {
                assert_eq!(w[0].0.end, w[1].0.start);
                assert_ne!(w[0].1, w[1].1, "round {round}: {got:?}");
            }
            for (p, v) in &got {
                assert!(plain[p.clone()].iter().all(|x| x == v));
            }
            let inner = len / 3..len - len / 4;
            let kept = m.pieces_where(inner.clone(), |v| v == 1);
            let expect: Vec<usize> = inner.filter(|&c| plain[c] == 1).collect();
            assert_eq!(kept.into_iter().flatten().collect::<Vec<_>>(), expect);
        }
    }

    #[test]
    fn touching_runs_of_one_value_are_one_run() {
        let mut m = RunMap::new(100);
        m.fill(0..10, 7u32);
        m.fill(20..30, 7);
        m.fill(10..20, 7);
        assert_eq!(pieces(&m, 0..100), vec![(0..30, 7), (30..100, 0)]);
        m.fill(15..16, 0);
        assert_eq!(pieces(&m, 10..20), vec![(10..15, 7), (15..16, 0), (16..20, 7)]);
    }

    #[test]
    fn a_scattered_map_keeps_a_value_per_cell() {
        let len = 4 * MAX_RUNS;
        let mut m = RunMap::new(len);
        for c in (0..len).step_by(2) {
            m.fill(c..c + 1, 1u32 + (c % 3) as u32);
        }
        assert!(matches!(m.repr, Repr::Cells(_)));
        assert!((0..len).all(|c| get(&m, c) == if c % 2 == 0 { 1 + (c % 3) as u32 } else { 0 }));
        m.fill(0..len, 0);
        assert_eq!(pieces(&m, 0..len), vec![(0..len, 0)]);
    }

    #[test]
    fn find_stops_at_the_first_answer() {
        let mut m = RunMap::new(50);
        m.fill(10..20, 1u32);
        m.fill(30..40, 2);
        assert_eq!(m.find(0..50, |p, v| (v == 2).then_some(p.start)), Some(30));
        assert_eq!(m.find(15..35, |p, v| (v != 0).then_some(p)), Some(15..20));
        assert_eq!(m.find(0..10, |_, v| (v != 0).then_some(())), None);
    }
}
