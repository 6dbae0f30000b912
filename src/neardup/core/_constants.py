"""The constants of the hashes and permutations, shared by the compiled kernels (``_kernels``) and
their numpy versions for small batches (``_vectorised``): both must give the same bits."""

import numpy as np

U32 = np.uint32
U64 = np.uint64
MASK32 = U64(0xFFFFFFFF)

# MurmurHash3 x86_32 constants (Appleby's public-domain reference implementation).
_C1 = U32(0xCC9E2D51)
_C2 = U32(0x1B873593)
_N1 = U32(0xE6546B64)
_F1 = U32(0x85EBCA6B)
_F2 = U32(0xC2B2AE35)
# MurmurHash3 fmix64 constants: a bijective 64-bit finaliser with full avalanche.
_M1 = U64(0xFF51AFD7ED558CCD)
_M2 = U64(0xC4CEB9FE1A85EC53)
# Odd 64-bit constants (golden ratio; a large odd number) that spread bin and attempt numbers.
_G1 = U64(0x9E3779B97F4A7C15)
_G2 = U64(0xD6E8FEB86659FD93)

# Largest prime below 2**32. With x < 2**32 and a, b < p, a*x + b < 2**64, so uint64 math is exact
# and every row wraps the modulus (the 2**61-1 prime with 32-bit keys does not).
PRIME = U64(4_294_967_291)
# 2**32 = PRIME + 5, so hi * 2**32 + lo = hi * 5 + lo (mod PRIME): no division in the hot loop.
_FIVE = U64(5)
# Marks "no minimum": above every value below PRIME, so it never equals a real row.
EMPTY = U32(0xFFFFFFFF)
# Seeds the band-key fold so that an all-zero band does not hash to fmix64(0) = 0.
_BAND_SEED = U64(0x243F6A8885A308D3)
