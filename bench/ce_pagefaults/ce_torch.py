#!/usr/bin/python3
"""The PyTorch twin of ce_bench: logits = x W^T (W [classes, hidden]), mean
cross entropy, backward to W and x, gradients set to None before every step,
on the CPU with one compute thread (torch.set_num_threads(1) and OpenBLAS's
own thread count set through the library torch loaded). Per step: wall time
and minor page faults (resource.getrusage). The last line is a RESULT summary
in ce_bench's format.

    /usr/bin/python3 ce_torch.py [--classes 1048576] [--hidden 512] [--batch 256] [--steps 4]
"""
import argparse
import os
import resource
import statistics
import time

import torch
import torch.nn.functional as F
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_blas import limit_blas_threads  # noqa: E402



def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def cpu_s():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--classes", type=int, default=1048576)
    ap.add_argument("--hidden", type=int, default=512)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--steps", type=int, default=4)
    args = ap.parse_args()
    if args.steps < 2:
        ap.error("--steps must be >= 2")
    torch.set_num_threads(1)
    torch.zeros(4, 4) @ torch.zeros(4, 4)  # make sure the BLAS is loaded before limiting it
    lib, core = limit_blas_threads(1)
    g = torch.Generator().manual_seed(42)
    w = (torch.randn(args.classes, args.hidden, generator=g) * 0.02).requires_grad_()
    x = torch.randn(args.batch, args.hidden, generator=g).requires_grad_()
    targets = (torch.arange(args.batch, dtype=torch.int64) * 2654435761) % args.classes
    print("pytorch ce: classes %d hidden %d batch %d, torch %s, blas %s kernel %s, %d thread(s)"
          % (args.classes, args.hidden, args.batch, torch.__version__, lib, core,
             torch.get_num_threads()), flush=True)
    step_s, cpu, fwd, bwd, faults = [], [], [], [], []
    for s in range(args.steps):
        f0 = minor_faults()
        c0 = cpu_s()
        t0 = time.perf_counter()
        w.grad = None
        x.grad = None
        loss = F.cross_entropy(F.linear(x, w), targets)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        cpu.append(cpu_s() - c0)
        faults.append(minor_faults() - f0)
        step_s.append(t2 - t0)
        fwd.append(t1 - t0)
        bwd.append(t2 - t1)
        print("step %d: %.1f ms (forward %.1f, backward %.1f), cpu %.1f ms, %d minor faults, loss %.6f"
              % (s + 1, 1e3 * step_s[-1], 1e3 * fwd[-1], 1e3 * bwd[-1], 1e3 * cpu[-1], faults[-1],
                 loss.item()),
              flush=True)
    rest = slice(1, None)
    print("RESULT alloc=pytorch kernel=%s threads=1 step_ms=%.1f cpu_ms=%.1f fwd_ms=%.1f bwd_ms=%.1f "
          "faults_first=%d faults_per_step=%.1f peak_mib=%.0f cache_hits=-"
          % (core, 1e3 * statistics.median(step_s[rest]), 1e3 * statistics.median(cpu[rest]),
             1e3 * statistics.mean(fwd[rest]),
             1e3 * statistics.mean(bwd[rest]), faults[0], statistics.mean(faults[rest]),
             resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0))


if __name__ == "__main__":
    main()
