#!/usr/bin/python3
"""The PyTorch twin of gpt_step on one process: the reference GPT of
tests/reference/gpt_ref.py (shared spec gpt.md), the spec's batches from the
same token file, SGD with zero_grad(set_to_none=True), CPU, one compute
thread (torch.set_num_threads(1) and OpenBLAS's own pool limited through the
library torch loaded). Per step: wall time and minor page faults
(resource.getrusage). The last line is a RESULT summary in gpt_step's format.

    /usr/bin/python3 gpt_step_torch.py --data TOKENS.bin [--config small] [--batch 8] [--seq 256]
                                       [--steps 5] [--lr 0.01] [--precision f32|bf16]

--precision bf16 runs forward and loss under torch.autocast("cpu",
dtype=torch.bfloat16) (mm/linear in bf16 through oneDNN), as gpt_step's
--precision bf16 does with dt_autocast_set.
"""
import contextlib
import argparse
import os
import resource
import statistics
import sys
import time

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "reference"))
import gpt_ref  # noqa: E402  (the repository's PyTorch GPT)
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_blas import limit_blas_threads  # noqa: E402


CONFIGS = {
    "tiny": dict(vocab_size=256, max_seq_len=64, dim=64, n_layers=2, n_heads=4, ffn_dim=256),
    "small": dict(vocab_size=4096, max_seq_len=256, dim=512, n_layers=6, n_heads=8, ffn_dim=2048),
}


def minor_faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def cpu_s():
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--data", required=True)
    ap.add_argument("--config", default="small", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=0)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--precision", default="f32", choices=["f32", "bf16"])
    args = ap.parse_args()
    if args.steps < 2:
        ap.error("--steps must be >= 2")
    torch.set_num_threads(1)
    _, core = limit_blas_threads(1)
    cfg = CONFIGS[args.config]
    seq = args.seq or cfg["max_seq_len"]
    raw = open(args.data, "rb").read()
    tokens = torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.int64) & 0xFFFF
    tokens = tokens.tolist()
    torch.manual_seed(1234)
    model = gpt_ref.GPT(cfg)
    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
    print("pytorch gpt %s: tp=1, batch %d x seq %d, sgd lr %g, precision %s, torch %s, kernel %s, "
          "1 thread" % (args.config, args.batch, seq, args.lr, args.precision, torch.__version__,
                        core), flush=True)
    def autocast():
        if args.precision == "bf16":
            return torch.autocast("cpu", dtype=torch.bfloat16)
        return contextlib.nullcontext()
    times, cpus, faults = [], [], []
    for s in range(args.steps):
        f0 = minor_faults()
        c0 = cpu_s()
        t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        x, y = gpt_ref.batch(tokens, s, args.batch, seq)
        with autocast():
            logits = model(x)
            loss = F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))
        value = loss.item()
        del logits
        loss.backward()
        opt.step()
        times.append(time.perf_counter() - t0)
        cpus.append(cpu_s() - c0)
        faults.append(minor_faults() - f0)
        print("step %d: %.1f ms, cpu %.1f ms, %d minor faults, loss %.6f"
              % (s + 1, 1e3 * times[-1], 1e3 * cpus[-1], faults[-1], value), flush=True)
    print("RESULT impl=pytorch alloc=pytorch precision=%s world=1 step_ms=%.1f cpu_ms=%.1f faults_first=%d "
          "faults_per_step=%.1f peak_mib=%.1f loss=%.6f"
          % (args.precision, 1e3 * statistics.median(times[1:]), 1e3 * statistics.median(cpus[1:]), faults[0],
             statistics.mean(faults[1:]),
             resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0, value))


if __name__ == "__main__":
    main()
