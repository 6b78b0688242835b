#!/usr/bin/python3
"""The Megatron MLP block's training step in PyTorch with gloo, tensor-parallel
by hand (w1 column-parallel, w2 row-parallel, one all-reduce forward): the
baseline bench_tp_mlp is compared with. One process per rank, one compute
thread each (torch.set_num_threads(1) and OpenBLAS limited to one thread).

    /usr/bin/python3 tp_mlp_torch.py [--world 2] [--hidden 1024] [--ffn 4096] [--tokens 2048] [--steps 10]
"""
import argparse
import os
import socket
import time
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_blas import limit_blas_threads  # noqa: E402



def run(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    torch.set_num_threads(1)
    limit_blas_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    w, h, f, n = args.world, args.hidden, args.ffn, args.tokens
    fl = (f + w - 1) // w  # torch.chunk rows of this rank
    lo, hi = min(f, rank * fl), min(f, (rank + 1) * fl)
    g = torch.Generator().manual_seed(42)
    w1 = (torch.randn(f, h, generator=g) * 0.02)[lo:hi].clone().requires_grad_()
    b1 = torch.zeros(hi - lo, requires_grad=True)
    w2 = (torch.randn(h, f, generator=g) * 0.02)[:, lo:hi].clone().requires_grad_()
    b2 = torch.zeros(h, requires_grad=True)
    x = torch.randn(n, h, generator=torch.Generator().manual_seed(7))
    params = [w1, b1, w2, b2]

    class AllReduceFwd(torch.autograd.Function):  # Megatron's "g": all-reduce, identity backward
        @staticmethod
        def forward(ctx, t):
            t = t.clone()
            dist.all_reduce(t)
            return t

        @staticmethod
        def backward(ctx, gy):
            return gy

    times, fwd, bwd, upd = [], 0.0, 0.0, 0.0
    for s in range(-2, args.steps):
        dist.barrier()
        t0 = time.perf_counter()
        for p in params:
            p.grad = None
        hid = F.gelu(F.linear(x, w1, b1), approximate="tanh")
        y = AllReduceFwd.apply(F.linear(hid, w2)) + b2
        loss = y.sum()
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=1e-6)
        t3 = time.perf_counter()
        if s >= 0:
            times.append(t3 - t0)
            fwd, bwd, upd = fwd + t1 - t0, bwd + t2 - t1, upd + t3 - t2
    times.sort()
    stats = torch.tensor([times[len(times) // 2], fwd / args.steps, bwd / args.steps, upd / args.steps,
                          times[0]],
                         dtype=torch.float64)
    dist.all_reduce(stats, op=dist.ReduceOp.MAX)
    if rank == 0:
        print("pytorch  tp=%d mlp h=%d ffn=%d tokens=%d: step %.2f ms (median of %d; forward %.2f, "
              "backward %.2f, sgd %.2f ms), min %.2f ms; loss %.6g; torch %s gloo"
              % (w, h, f, n, 1e3 * stats[0], args.steps, 1e3 * stats[1], 1e3 * stats[2],
                 1e3 * stats[3], 1e3 * stats[4], loss.item(), torch.__version__), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--ffn", type=int, default=4096)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    with socket.socket() as s:  # a free loopback port for the rendezvous
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    import torch.multiprocessing as mp
    mp.spawn(run, args=(args, port), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
