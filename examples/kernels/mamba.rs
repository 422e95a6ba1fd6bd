//! The selective scan of a Mamba layer, in the three versions of the NKI "fused
//! Mamba" tutorial, written to be profiled (`nki::profile`) and compared with the
//! latencies the tutorial measured (`tests/profile/mamba.rs`).
//!
//! Inputs: `delta`, `u`: `[batch, channels, seq]`; `a`: `[channels, state]`;
//! `b`, `c`: `[batch, state, seq]`, all fp32, `channels` a multiple of 128. The
//! output `y: [batch, channels, seq]` is, per batch `i`, channel `ch` and time `t`,
//!
//! ```text
//! h[n, t] = exp(delta[t] · a[ch, n]) · h[n, t-1] + delta[t] · u[t] · b[i, n, t],  h[n, -1] = 0
//! y[t]    = Σ_n c[i, n, t] · h[n, t]
//! ```
//!
//! Channels go on the partitions, 128 (`nl.tile_size.pmax`) at a time, and time on
//! the free axis. For one state `n` on one channel tile the work is the
//! tutorial's steps 1–6 (`state_step`): `exp(delta · a[:, n])` in one Scalar
//! Engine `activation` (the per-partition `scale` is the multiply),
//! `delta · u · b[n]` in two Vector Engine `tensor_tensor`s (`b[n]` broadcast to
//! the 128 partitions as `nl.broadcast_to` does it, by the Tensor Engine into
//! PSUM, see [`load_row_broadcast`]), the recurrence in one
//! `tensor_tensor_scan`, then `· c[n]` and the sum over states into an fp32
//! accumulator in two more `tensor_tensor`s. The Vector Engine does most of the
//! work, so it is the engine to keep busy.
//!
//! * [`mamba_v1`]: loops `batch → state → channel tile`; `delta` and `u` are
//!   loaded again for every state, and the accumulator holds every channel tile
//!   until the last state (stored in a loop of its own). The tutorial loads the
//!   `b` and `c` rows inside the channel loop, which does not change them; the
//!   compiler hoists such loads (its profile reports only `delta` and `u` as
//!   reloaded), and a broadcast row that lives across the channel loop is held
//!   in SBUF rather than in a PSUM bank. So here each state's rows are
//!   broadcast once, by the DMA, into `[128, seq]` SBUF tiles, and two of the
//!   Vector Engine's `tensor_tensor`s read two SBUF inputs: the cost that makes
//!   the tutorial's v1 slower per state and tile than its v2.
//! * [`mamba_v2`]: loops `batch → channel tile → state`; `delta` and `u` are
//!   loaded once per channel tile and the accumulator is one tile, stored as soon
//!   as its states are summed (loop reordering and fusion).
//! * [`mamba_v3`]: v2 with time tiled, `batch → channel tile → state → time
//!   tile` of `seq_tile` (512 in the tutorial) columns; each time tile's scan
//!   starts from the last column of the previous one's.

use nki::prelude::*;

/// `src[bi, row, c0..c0 + cols]` on all 128 partitions, as the tutorial's
/// `nl.broadcast_to` of the `[1, cols]` row: the row loaded into SBUF, then
/// grown down the partitions on the Tensor Engine (`ones` `[1, 128]` times the
/// row, exact) into PSUM, which the Vector Engine reads directly (the
/// architecture guide's partition broadcast). A row wider than a PSUM bank
/// (`psum_fmax` fp32 columns) cannot be one PSUM tile: it is broadcast by the
/// DMA that loads it into a `[128, cols]` SBUF tile instead.
#[nki_helper]
fn load_row_broadcast(src: Hbm, ones: Sbuf, bi: i64, row: i64, c0: i64, cols: i64) -> Tensor {
    let rows = src[s![bi, row..row + 1, c0..c0 + cols]];
    if cols <= nl::tile_size::psum_fmax { broadcast_in_psum(rows, ones) } else { broadcast_by_dma(rows) }
}

/// The `[1, cols]` HBM row `rows` as a `[128, cols]` PSUM tile: loaded, then
/// multiplied by the `[1, 128]` row of ones on the Tensor Engine.
#[nki_helper]
fn broadcast_in_psum(rows: Hbm, ones: Sbuf) -> Psum {
    let [_one, cols] = rows.shape();
    let row_sb = nl::ndarray([1, cols], nl::float32, buffer = nl::sbuf);
    nisa::dma_copy(row_sb, rows);
    let dst = nl::ndarray([nl::tile_size::pmax, cols], nl::float32, buffer = nl::psum);
    nisa::nc_matmul(dst, ones, row_sb);
    dst
}

/// The `[1, cols]` HBM row `rows` as a `[128, cols]` SBUF tile, broadcast to the
/// partitions by the DMA that loads it.
#[nki_helper]
fn broadcast_by_dma(rows: Hbm) -> Sbuf {
    let pmax = nl::tile_size::pmax;
    let [_one, cols] = rows.shape();
    let dst = nl::ndarray([pmax, cols], nl::float32, buffer = nl::sbuf);
    nisa::dma_copy(dst, rows.broadcast(0, pmax));
    dst
}

/// A `[1, 128]` fp32 row of ones: the stationary operand of the row broadcasts.
#[nki_helper]
fn ones_row() -> Sbuf {
    let ones = nl::ndarray([1, nl::tile_size::pmax], nl::float32, buffer = nl::sbuf);
    nisa::memset(ones, 1.0);
    ones
}

/// The channel tile `ch0..ch0 + 128` of `src[bi]` (every time step) as a
/// `[128, seq]` fp32 tile.
#[nki_helper]
fn load_channels(src: Hbm, bi: i64, ch0: i64) -> Sbuf {
    let pmax = nl::tile_size::pmax;
    let [_batch, _channels, seq] = src.shape();
    let dst = nl::ndarray([pmax, seq], nl::float32, buffer = nl::sbuf);
    nisa::dma_copy(dst, src[s![bi, ch0..ch0 + pmax, ..]]);
    dst
}

/// The inputs of channel tile `ch0..ch0 + 128` of batch `bi` that every state
/// reads, `delta` and `u` (`[128, seq]` each), with a zeroed fp32 accumulator
/// of their shape: `(acc, delta_t, u_t)`.
#[nki_helper]
fn channel_tile(delta: Hbm, u: Hbm, bi: i64, ch0: i64) -> (Sbuf, Sbuf, Sbuf) {
    let pmax = nl::tile_size::pmax;
    let [_batch, _channels, seq] = delta.shape();
    let acc = nl::ndarray([pmax, seq], nl::float32, buffer = nl::sbuf);
    nisa::memset(acc, 0.0);
    let delta_t: Sbuf = load_channels(delta, bi, ch0);
    let u_t: Sbuf = load_channels(u, bi, ch0);
    (acc, delta_t, u_t)
}

/// Column `n` of `a` for the channel tile `ch0..ch0 + 128` as a `[128, 1]` fp32 tile.
#[nki_helper]
fn load_state_column(a: Hbm, ch0: i64, n: i64) -> Sbuf {
    let pmax = nl::tile_size::pmax;
    let dst = nl::ndarray([pmax, 1], nl::float32, buffer = nl::sbuf);
    nisa::dma_copy(dst, a[s![ch0..ch0 + pmax, n..n + 1]]);
    dst
}

/// The tutorial's steps 1–6 for one state on one tile of channels and columns:
/// `scan = scan(exp(delta_t · a_col), delta_t · u_t · b_row)` from `carry` (a
/// `[128, 1]` column), then `acc += c_row · scan`. The scan's last column is the
/// next time tile's `carry`.
#[nki_helper]
fn state_step(acc: Sbuf, scan: Sbuf, delta_t: Sbuf, u_t: Sbuf, a_col: Sbuf, b_row: Tensor, c_row: Tensor, carry: Sbuf) {
    let [p, cols] = delta_t.shape();
    let decay = nl::ndarray([p, cols], nl::float32, buffer = nl::sbuf);
    nisa::activation(decay, nl::exp, delta_t, scale = a_col);
    // Two temporaries, each overwritten in place once its value is dead, keep
    // SBUF use per state at the tutorial's level.
    let dbu = nl::ndarray([p, cols], nl::float32, buffer = nl::sbuf);
    nisa::tensor_tensor(dbu, delta_t, u_t, nl::multiply);
    nisa::tensor_tensor(dbu, dbu, b_row, nl::multiply);
    nisa::tensor_tensor_scan(scan, decay, dbu, carry, nl::multiply, nl::add);
    nisa::tensor_tensor(decay, scan, c_row, nl::multiply);
    nisa::tensor_tensor(acc, acc, decay, nl::add);
}

/// The start the three versions share: the inputs' shapes checked against
/// each other and the output `[batch, channels, seq]` in HBM: `(out, batch,
/// channels, seq, state)`.
#[nki_helper]
fn start_scan(delta: Hbm, u: Hbm, a: Hbm, b: Hbm, c: Hbm) -> (Hbm, i64, i64, i64, i64) {
    let pmax = nl::tile_size::pmax;
    let [batch, channels, seq] = delta.shape();
    let [ua, uc, us] = u.shape();
    let [ac, state] = a.shape();
    let [bb, bs, bl] = b.shape();
    let [cb, cs, cl] = c.shape();
    assert!(channels % pmax == 0, "channels must be a multiple of {pmax}, got {channels}");
    assert!(ua == batch && uc == channels && us == seq, "u must be [batch, channels, seq] like delta");
    assert!(ac == channels, "a must be [channels, state]: {ac} rows for {channels} channels");
    assert!(bb == batch && bs == state && bl == seq, "b must be [batch, state, seq]");
    assert!(cb == batch && cs == state && cl == seq, "c must be [batch, state, seq]");
    let out = nl::ndarray([batch, channels, seq], delta.dtype(), buffer = nl::shared_hbm);
    (out, batch, channels, seq, state)
}

/// Version 1: `batch → state → channel tile`, `delta` and `u` loaded per state,
/// the `b` and `c` rows of a state broadcast once into SBUF for all its tiles.
#[nki_kernel]
pub fn mamba_v1(delta: Hbm, u: Hbm, a: Hbm, b: Hbm, c: Hbm) -> Hbm {
    let pmax = nl::tile_size::pmax;
    let (out, batch, channels, seq, state): (Hbm, i64, i64, i64, i64) = start_scan(delta, u, a, b, c);
    let tiles = channels / pmax;
    let zero = nl::ndarray([pmax, 1], nl::float32, buffer = nl::sbuf);
    nisa::memset(zero, 0.0);
    for bi in 0..batch {
        let acc = nl::ndarray([pmax, tiles * seq], nl::float32, buffer = nl::sbuf);
        nisa::memset(acc, 0.0);
        for n in 0..state {
            let b_row: Sbuf = broadcast_by_dma(b[s![bi, n..n + 1, ..]]);
            let c_row: Sbuf = broadcast_by_dma(c[s![bi, n..n + 1, ..]]);
            for ti in 0..tiles {
                let delta_t: Sbuf = load_channels(delta, bi, ti * pmax);
                let u_t: Sbuf = load_channels(u, bi, ti * pmax);
                let a_col: Sbuf = load_state_column(a, ti * pmax, n);
                let scan = nl::ndarray([pmax, seq], nl::float32, buffer = nl::sbuf);
                state_step(acc[s![.., ti * seq..(ti + 1) * seq]], scan, delta_t, u_t, a_col, b_row, c_row, zero);
            }
        }
        for ti in 0..tiles {
            nisa::dma_copy(out[s![bi, ti * pmax..(ti + 1) * pmax, ..]], acc[s![.., ti * seq..(ti + 1) * seq]]);
        }
    }
    out
}

/// Version 2: `batch → channel tile → state`, `delta` and `u` loaded once per tile.
#[nki_kernel]
pub fn mamba_v2(delta: Hbm, u: Hbm, a: Hbm, b: Hbm, c: Hbm) -> Hbm {
    let pmax = nl::tile_size::pmax;
    let (out, batch, channels, seq, state): (Hbm, i64, i64, i64, i64) = start_scan(delta, u, a, b, c);
    let ones: Sbuf = ones_row();
    let zero = nl::ndarray([pmax, 1], nl::float32, buffer = nl::sbuf);
    nisa::memset(zero, 0.0);
    for bi in 0..batch {
        for ti in 0..channels / pmax {
            let (acc, delta_t, u_t): (Sbuf, Sbuf, Sbuf) = channel_tile(delta, u, bi, ti * pmax);
            for n in 0..state {
                let a_col: Sbuf = load_state_column(a, ti * pmax, n);
                let b_row: Tensor = load_row_broadcast(b, ones, bi, n, 0, seq);
                let c_row: Tensor = load_row_broadcast(c, ones, bi, n, 0, seq);
                let scan = nl::ndarray([pmax, seq], nl::float32, buffer = nl::sbuf);
                state_step(acc, scan, delta_t, u_t, a_col, b_row, c_row, zero);
            }
            nisa::dma_copy(out[s![bi, ti * pmax..(ti + 1) * pmax, ..]], acc);
        }
    }
    out
}

/// Version 3: v2 with time tiled by `seq_tile` columns (a divisor of `seq`). Per
/// state the scan goes into columns `1..=seq` of a `[128, 1 + seq]` tile whose
/// column 0 is zero, so each time tile's scan starts from the column before it:
/// zero for the first, the previous tile's last value after that.
#[nki_kernel]
pub fn mamba_v3(
    delta: Hbm,
    u: Hbm,
    a: Hbm,
    b: Hbm,
    c: Hbm,
    #[default(512)]
    #[range(>= 1)]
    seq_tile: i64,
) -> Hbm {
    let pmax = nl::tile_size::pmax;
    let (out, batch, channels, seq, state): (Hbm, i64, i64, i64, i64) = start_scan(delta, u, a, b, c);
    let ones: Sbuf = ones_row();
    assert!(seq % seq_tile == 0, "seq_tile must divide seq ({seq}), got {seq_tile}");
    for bi in 0..batch {
        for ti in 0..channels / pmax {
            let (acc, delta_t, u_t): (Sbuf, Sbuf, Sbuf) = channel_tile(delta, u, bi, ti * pmax);
            for n in 0..state {
                let a_col: Sbuf = load_state_column(a, ti * pmax, n);
                let history = nl::ndarray([pmax, 1 + seq], nl::float32, buffer = nl::sbuf);
                nisa::memset(history[s![.., 0..1]], 0.0);
                for si in 0..seq / seq_tile {
                    let (t0, t1) = (si * seq_tile, (si + 1) * seq_tile);
                    let b_row: Tensor = load_row_broadcast(b, ones, bi, n, t0, seq_tile);
                    let c_row: Tensor = load_row_broadcast(c, ones, bi, n, t0, seq_tile);
                    state_step(
                        acc[s![.., t0..t1]],
                        history[s![.., t0 + 1..t1 + 1]],
                        delta_t[s![.., t0..t1]],
                        u_t[s![.., t0..t1]],
                        a_col,
                        b_row,
                        c_row,
                        history[s![.., t0..t0 + 1]],
                    );
                }
            }
            nisa::dma_copy(out[s![bi, ti * pmax..(ti + 1) * pmax, ..]], acc);
        }
    }
    out
}
