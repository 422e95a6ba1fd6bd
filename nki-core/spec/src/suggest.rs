//! "Did you mean" suggestions for misspelled names, shared by the macro's
//! diagnostics and the command line.

/// The closest candidate to `name` by edit distance, if it is close enough to be a
/// likely typo.
pub fn did_you_mean<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let a: Vec<char> = name.chars().collect();
    let limit = (name.len() / 3).max(1);
    let mut rows = Rows::default();
    candidates.into_iter().filter_map(|c| Some((rows.distance_within(&a, c, limit)?, c))).min_by_key(|&(d, _)| d).map(|(_, c)| c)
}

/// The two rows of the edit-distance table, kept between candidates: a kernel
/// with thousands of misspelled names asks for thousands of suggestions, each
/// against the whole vocabulary.
#[derive(Default)]
struct Rows {
    b: Vec<char>,
    prev: Vec<usize>,
    cur: Vec<usize>,
}

impl Rows {
    /// The edit distance from `a` to `b` if it is at most `limit`. The distance
    /// is at least the difference of the lengths, and a row's minimum never
    /// decreases down the table, so a candidate stops as soon as it is out of
    /// reach.
    fn distance_within(&mut self, a: &[char], b: &str, limit: usize) -> Option<usize> {
        self.b.clear();
        self.b.extend(b.chars());
        if a.len().abs_diff(self.b.len()) > limit {
            return None;
        }
        self.prev.clear();
        self.prev.extend(0..=self.b.len());
        for (i, &ca) in a.iter().enumerate() {
            self.cur.clear();
            self.cur.push(i + 1);
            for (j, &cb) in self.b.iter().enumerate() {
                let d = (self.prev[j] + usize::from(ca != cb)).min(self.prev[j + 1] + 1).min(self.cur[j] + 1);
                self.cur.push(d);
            }
            if self.cur.iter().min().is_some_and(|&m| m > limit) {
                return None;
            }
            std::mem::swap(&mut self.prev, &mut self.cur);
        }
        self.prev.last().copied().filter(|&d| d <= limit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn suggests_close_names_only() {
        assert_eq!(did_you_mean("nc_matmull", ["nc_matmul", "nc_transpose"]), Some("nc_matmul"));
        assert_eq!(did_you_mean("zzz", ["nc_matmul"]), None);
    }

    #[test]
    fn the_first_of_equally_close_names_wins() {
        assert_eq!(did_you_mean("nl::exq", ["nl::exp", "nl::exr", "nl::tanh"]), Some("nl::exp"));
    }

    #[test]
    fn distances_are_exact_within_the_limit() {
        let mut rows = Rows::default();
        let a: Vec<char> = "kitten".chars().collect();
        assert_eq!(rows.distance_within(&a, "sitting", 3), Some(3));
        assert_eq!(rows.distance_within(&a, "sitting", 2), None);
        assert_eq!(rows.distance_within(&a, "kitten", 0), Some(0));
        assert_eq!(rows.distance_within(&a, "", 6), Some(6));
    }
}
