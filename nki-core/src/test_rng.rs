//! A fixed pseudo-random sequence for unit tests (xorshift64), so that a
//! randomised test is the same test on every run.

/// The next value of the sequence held in `state` (which must not be 0).
pub(crate) fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}
