#!/usr/bin/python3
"""PyTorch gloo collectives in comm_bench's format (nccl-tests columns).

    /usr/bin/python3 bench_gloo.py -n 2 [-b 8] [-e 64M] [-f 2] [-c allreduce,allgather,...]

Starts its own ranks (torch.multiprocessing), one thread each (torch and
OpenBLAS), float32, out of place; time = the slowest rank's mean. gloo has no
reduce-scatter, so that table is skipped.
"""
import argparse
import ctypes
import ctypes.util
import os
import socket
import sys
import time

COLLS = ["allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast"]


def parse_size(s):
    mult = {"k": 1024, "m": 1024 ** 2, "g": 1024 ** 3}
    return int(float(s[:-1]) * mult[s[-1].lower()]) if s[-1].lower() in mult else int(s)


def one_thread():
    for name in ("openblas", "openblas64", "openblasp-r0"):
        path = ctypes.util.find_library(name)
        if path:
            try:
                ctypes.CDLL(path).openblas_set_num_threads(1)
            except (OSError, AttributeError):
                pass
    import torch
    torch.set_num_threads(1)


def iters_for(nbytes):
    return max(5, min(1000, (256 << 20) // (nbytes + 1)))


def busbw_factor(coll, n):
    if coll == "allreduce":
        return 2.0 * (n - 1) / n
    if coll == "broadcast":
        return 1.0
    return (n - 1) / n


def worker(rank, world, port, args):
    one_thread()
    import torch
    import torch.distributed as dist
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    colls = [c for c in COLLS if c in args.c.split(",")] if args.c else COLLS
    for coll in colls:
        if coll == "reduce_scatter":
            if rank == 0:
                print("# gloo reduce_scatter: not supported by ProcessGroupGloo", flush=True)
            continue
        if rank == 0:
            print("# gloo %s, %d ranks" % (coll, world))
            print("#%12s %12s %8s %8s %10s %9s %9s" % ("size", "count", "type", "redop", "time",
                                                       "algbw", "busbw"), flush=True)
        nbytes = args.b
        while nbytes <= args.e:
            n = nbytes // 4
            per = n // world if coll in ("allgather", "alltoall") else n
            if per == 0:  # gloo fails on empty tensors; MPI and dtensor return at once
                nbytes *= args.f
                continue
            a = torch.ones(max(per, 1) if coll == "allgather" else max(n, 1))
            if coll == "allgather":
                a = torch.ones(per)
                outs = [torch.empty(per) for _ in range(world)]
                op = lambda: dist.all_gather(outs, a)
            elif coll == "allreduce":
                a = torch.ones(n)
                op = lambda: dist.all_reduce(a)
            elif coll == "alltoall":
                a = torch.ones(per * world)
                b = torch.empty(per * world)
                op = lambda: dist.all_to_all_single(b, a)
            else:
                a = torch.ones(n)
                op = lambda: dist.broadcast(a, 0)
            it = iters_for(nbytes)
            for _ in range(max(3, it // 10)):
                op()
            dist.barrier()
            t0 = time.perf_counter()
            for _ in range(it):
                op()
            sec = torch.tensor([(time.perf_counter() - t0) / it], dtype=torch.float64)
            dist.all_reduce(sec, op=dist.ReduceOp.MAX)
            sec = sec.item()
            if rank == 0:
                algbw = nbytes / sec / 1e9
                print(" %12d %12d %8s %8s %10.2f %9.3f %9.3f   %s" % (
                    nbytes, n, "float", "sum" if coll == "allreduce" else "none", sec * 1e6,
                    algbw, algbw * busbw_factor(coll, world), coll), flush=True)
            nbytes *= args.f
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-n", type=int, default=2)
    ap.add_argument("-b", type=parse_size, default=8)
    ap.add_argument("-e", type=parse_size, default=64 << 20)
    ap.add_argument("-f", type=int, default=2)
    ap.add_argument("-c", default="")
    args = ap.parse_args()
    try:
        import torch.multiprocessing as mp
    except ImportError:
        print("# gloo: python3-torch is not installed", flush=True)
        return 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    mp.start_processes(worker, args=(args.n, port, args), nprocs=args.n, start_method="fork")
    return 0


if __name__ == "__main__":
    sys.exit(main())
