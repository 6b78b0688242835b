#!/usr/bin/env python3
"""Re-implements the RNG documented in include/dtensor/tensor.h (dt_tensor_fill_normal)
in plain Python and checks `core_rng --dump` against it, element by element."""
import math
import subprocess
import sys

M = 0xFFFFFFFF


def philox4x32_10(ctr, key):
    c0, c1, c2, c3 = ctr
    k0, k1 = key
    for _ in range(10):
        p0 = 0xD2511F53 * c0
        p1 = 0xCD9E8D57 * c2
        c0, c1, c2, c3 = ((p1 >> 32) ^ c1 ^ k0) & M, p1 & M, ((p0 >> 32) ^ c3 ^ k1) & M, p0 & M
        k0, k1 = (k0 + 0x9E3779B9) & M, (k1 + 0xBB67AE85) & M
    return c0, c1, c2, c3


def u01(a, b):
    return ((a << 21) | (b >> 11)) * 2.0 ** -53


def reference(seed, g):
    r = philox4x32_10((g & M, g >> 32, 0, 0), (seed & M, seed >> 32))
    normal = math.sqrt(-2.0 * math.log(1.0 - u01(r[0], r[1]))) * math.cos(2.0 * math.pi * u01(r[2], r[3]))
    return normal, u01(r[0], r[1])


def main():
    exe = sys.argv[1]
    assert philox4x32_10((0, 0, 0, 0), (0, 0)) == (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)
    for seed in (0, 42, 0x123456789ABCDEF0):
        n = 1000
        out = subprocess.run([exe, "--dump", str(seed), str(n)], check=True, capture_output=True,
                             text=True).stdout.split("\n")
        for g in range(n):
            got_n, got_u = (float(x) for x in out[g].split())
            want_n, want_u = reference(seed, g)
            if got_u != want_u or abs(got_n - want_n) > 1e-15 * max(1.0, abs(want_n)):
                print(f"seed {seed} element {g}: got {got_n!r} {got_u!r}, want {want_n!r} {want_u!r}")
                return 1
    print("RNG matches the documented Philox4x32-10 / Box-Muller formula")
    return 0


if __name__ == "__main__":
    sys.exit(main())
