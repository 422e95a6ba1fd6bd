//! NumPy-style indexing of tensors (`t[0:128, k * 512:(k + 1) * 512]`).

use std::ops::{Range, RangeFrom, RangeFull, RangeInclusive, RangeTo, RangeToInclusive};

/// One index item.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idx {
    /// A single position (negative counts from the end).
    At(i64),
    /// `start:stop:step`; open ends are `None`. Out-of-range bounds are an error, not clamped.
    Range {
        /// First position (default 0).
        start: Option<i64>,
        /// One past the last position (default: the dimension's extent).
        stop: Option<i64>,
        /// Step, at least 1.
        step: i64,
    },
    /// The whole dimension (`:`).
    Full,
}

impl Idx {
    /// `start:stop:step`.
    pub fn range(start: i64, stop: i64, step: i64) -> Idx {
        Idx::Range { start: Some(start), stop: Some(stop), step }
    }

    /// `nl.ds(start, size)`: `size` positions from `start`.
    pub fn ds(start: i64, size: i64) -> Idx {
        Idx::range(start, start + size, 1)
    }
}

/// Integer types accepted in index positions.
pub trait IndexInt: Copy {
    /// The value as `i64`.
    fn as_i64(self) -> i64;
}

macro_rules! index_int {
    ($($t:ty),*) => {$(
        impl IndexInt for $t {
            fn as_i64(self) -> i64 { self as i64 }
        }
        impl From<$t> for Idx {
            fn from(v: $t) -> Idx { Idx::At(v as i64) }
        }
    )*};
}
index_int!(i32, i64, usize, u32);

impl<T: IndexInt> From<Range<T>> for Idx {
    fn from(r: Range<T>) -> Idx {
        Idx::range(r.start.as_i64(), r.end.as_i64(), 1)
    }
}

impl<T: IndexInt> From<RangeInclusive<T>> for Idx {
    fn from(r: RangeInclusive<T>) -> Idx {
        Idx::range(r.start().as_i64(), r.end().as_i64() + 1, 1)
    }
}

impl<T: IndexInt> From<RangeFrom<T>> for Idx {
    fn from(r: RangeFrom<T>) -> Idx {
        Idx::Range { start: Some(r.start.as_i64()), stop: None, step: 1 }
    }
}

impl<T: IndexInt> From<RangeTo<T>> for Idx {
    fn from(r: RangeTo<T>) -> Idx {
        Idx::Range { start: None, stop: Some(r.end.as_i64()), step: 1 }
    }
}

impl<T: IndexInt> From<RangeToInclusive<T>> for Idx {
    fn from(r: RangeToInclusive<T>) -> Idx {
        Idx::Range { start: None, stop: Some(r.end.as_i64() + 1), step: 1 }
    }
}

impl From<RangeFull> for Idx {
    fn from(_: RangeFull) -> Idx {
        Idx::Full
    }
}

/// Builds an index: `s![.., 3, 0..128, 4..;2]` (a `;step` follows a range), an
/// array of [`Idx`] to pass as `t.index(&s![...])`.
///
/// ```
/// use nki_core::{s, Idx};
/// assert_eq!(s![.., 2, 0..8;2], [Idx::Full, Idx::At(2), Idx::range(0, 8, 2)]);
/// ```
#[macro_export]
macro_rules! s {
    ($($e:expr $(; $step:expr)?),* $(,)?) => {
        [$($crate::tensor::__with_step($crate::tensor::Idx::from($e), &[$($step as i64)?])),*]
    };
}

#[doc(hidden)]
pub fn __with_step(i: Idx, step: &[i64]) -> Idx {
    match (i, step) {
        (Idx::Range { start, stop, .. }, [s]) => Idx::Range { start, stop, step: *s },
        (Idx::Full, [s]) => Idx::Range { start: None, stop: None, step: *s },
        _ => i,
    }
}
