"""The engines' pseudo-random generators: XORWOW per compute lane.

Every lane (partition) of an engine has its own XORWOW generator (Marsaglia
2003): five 32-bit shift-register words x, y, z, w, v and a Weyl counter d;
a step sets `t = x ^ (x >> 2)`, shifts the words down, sets
`v = (v ^ (v << 4)) ^ (t ^ (t << 1))`, adds 362437 to d and yields `v + d`
(mod 2^32). A GpSimd lane holds one generator (6 words); a Vector lane holds
four (24 words), and element j of an instruction's row comes from generator
j % 4 of its lane. A state is 6 or 24 uint32 words per lane in that order,
as `nisa.rand_get_state` / `rand_set_state` move it.

Seeding (`nisa.set_rng_seed`, `nl.random_seed`, and seed 0 at launch): word k
of generator g of lane p is the low 32 bits of SplitMix64 applied to
`seed * 2^32 + p * 2^8 + g * 8 + k`; a generator whose five shift words come
out all zero gets x = 1. Uniform floats are `(bits >> 8) * 2^-24`, in [0, 1).
"""

import numpy as np

WORDS = 6
STREAMS = {"vector": 4, "gpsimd": 1}
_WEYL = np.uint32(362437)
_M64 = (1 << 64) - 1


def _splitmix64(x):
    x = (x + 0x9E3779B97F4A7C15) & _M64
    x = ((x ^ (x >> 30)) * 0xBF58476D1CE4E5B9) & _M64
    x = ((x ^ (x >> 27)) * 0x94D049BB133111EB) & _M64
    return x ^ (x >> 31)


def seeded(seed, lanes, engine):
    """The state of `lanes` lanes of `engine` ('vector' / 'gpsimd') seeded with `seed`."""
    streams = STREAMS[engine]
    state = np.zeros((lanes, streams * WORDS), dtype=np.uint32)
    base = (int(seed) & 0xFFFFFFFF) << 32
    for p in range(lanes):
        for g in range(streams):
            words = [_splitmix64(base + p * 256 + g * 8 + k) & 0xFFFFFFFF for k in range(WORDS)]
            if not any(words[:5]):
                words[0] = 1
            state[p, g * WORDS:(g + 1) * WORDS] = words
    return state


def draw(state, count):
    """`count` 32-bit draws for every lane of `state` (lanes x words), advancing it in place."""
    lanes, width = state.shape
    streams = width // WORDS
    out = np.zeros((lanes, count), dtype=np.uint32)
    for j in range(count):
        g = slice((j % streams) * WORDS, (j % streams + 1) * WORDS)
        x, y, z, w, v, d = (state[:, g][:, k].copy() for k in range(WORDS))
        t = x ^ (x >> np.uint32(2))
        v_new = (v ^ (v << np.uint32(4))) ^ (t ^ (t << np.uint32(1)))
        d = d + _WEYL
        state[:, g] = np.stack([y, z, w, v, v_new, d], axis=1)
        out[:, j] = v_new + d
    return out


def uniform(bits):
    """Draws as float32 values in [0, 1)."""
    return ((bits >> np.uint32(8)).astype(np.float64) * 2.0 ** -24).astype(np.float32)
