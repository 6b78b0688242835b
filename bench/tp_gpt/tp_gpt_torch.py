#!/usr/bin/python3
"""The reference GPT (shared spec gpt.md) trained with Megatron-style tensor
parallelism written by hand in PyTorch + gloo: vocabulary-parallel embedding,
column-parallel wq/wk/wv (local heads) and w1, row-parallel wo and w2,
column-parallel output with a vocabulary-parallel cross entropy (the logits
are never gathered), SGD. The baseline for train_gpt --mesh tp=N (run.sh).
One process per rank, one compute thread each.

    /usr/bin/python3 tp_gpt_torch.py [--world 2] [--config small] [--batch 8] [--seq 256] [--steps 5]
"""
import argparse
import math
import os
import socket
import time
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_blas import limit_blas_threads  # noqa: E402


CONFIGS = {
    "tiny": dict(vocab=256, max_seq=64, dim=64, layers=2, heads=4, ffn=256),
    "small": dict(vocab=4096, max_seq=256, dim=512, layers=6, heads=8, ffn=2048),
}


def run(rank, args, port):
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    import torch
    import torch.distributed as dist
    import torch.nn.functional as F

    torch.set_num_threads(1)
    limit_blas_threads(1)
    dist.init_process_group("gloo", rank=rank, world_size=args.world)
    c, w = CONFIGS[args.config], args.world
    gen = torch.Generator().manual_seed(1234)

    def chunk(n):  # torch.chunk rows of this rank
        cs = (n + w - 1) // w
        return min(n, rank * cs), min(n, (rank + 1) * cs)

    params = []

    def param(t):
        t = t.clone().requires_grad_()
        params.append(t)
        return t

    def normal(*shape, std=0.02):
        return torch.randn(*shape, generator=gen) * std

    class F_(torch.autograd.Function):  # identity forward, all-reduce backward
        @staticmethod
        def forward(ctx, x):
            return x

        @staticmethod
        def backward(ctx, g):
            g = g.clone()
            dist.all_reduce(g)
            return g

    class G_(torch.autograd.Function):  # all-reduce forward, identity backward
        @staticmethod
        def forward(ctx, x):
            x = x.clone()
            dist.all_reduce(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    d, hd = c["dim"], c["dim"] // c["heads"]
    assert c["heads"] % w == 0
    v0, v1 = chunk(c["vocab"])
    f0, f1 = chunk(c["ffn"])
    h0, h1 = chunk(d)  # head-aligned: heads divide by w
    proj_std = 0.02 / math.sqrt(2 * c["layers"])
    tok = param(normal(c["vocab"], d)[v0:v1])
    pos = param(normal(c["max_seq"], d))
    layers = []
    for _ in range(c["layers"]):
        L = {}
        L["ln1"] = (param(torch.ones(d)), param(torch.zeros(d)))
        for n in ("wq", "wk", "wv"):
            L[n] = (param(normal(d, d)[h0:h1]), param(torch.zeros(h1 - h0)))
        L["wo"] = (param(normal(d, d, std=proj_std)[:, h0:h1]), param(torch.zeros(d)))
        L["ln2"] = (param(torch.ones(d)), param(torch.zeros(d)))
        L["w1"] = (param(normal(c["ffn"], d)[f0:f1]), param(torch.zeros(f1 - f0)))
        L["w2"] = (param(normal(d, c["ffn"], std=proj_std)[:, f0:f1]), param(torch.zeros(d)))
        layers.append(L)
    lnf = (param(torch.ones(d)), param(torch.zeros(d)))
    out_w = param(normal(c["vocab"], d)[v0:v1])

    def forward_loss(ids, tgt):
        b, t = ids.shape
        inside = (ids >= v0) & (ids < v1)
        e = F.embedding((ids - v0).clamp(0, v1 - v0 - 1), tok) * inside.unsqueeze(-1)
        h = G_.apply(e) + pos[:t]
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        for L in layers:
            a = F_.apply(F.layer_norm(h, (d,), *L["ln1"], eps=1e-5))
            q, k, v = (F.linear(a, *L[n]).view(b, t, -1, hd).transpose(1, 2) for n in ("wq", "wk", "wv"))
            s = (q @ k.transpose(-2, -1)) / math.sqrt(hd)
            o = torch.softmax(s.masked_fill(mask, float("-inf")), dim=-1) @ v
            o = o.transpose(1, 2).contiguous().view(b, t, -1)
            h = h + G_.apply(F.linear(o, L["wo"][0])) + L["wo"][1]
            m = F_.apply(F.layer_norm(h, (d,), *L["ln2"], eps=1e-5))
            g = F.gelu(F.linear(m, *L["w1"]), approximate="tanh")
            h = h + G_.apply(F.linear(g, L["w2"][0])) + L["w2"][1]
        x = F_.apply(F.layer_norm(h, (d,), *lnf, eps=1e-5))
        logits = F.linear(x, out_w).view(b * t, -1)  # [N, V/w]: never gathered
        mx = logits.detach().max(dim=-1).values
        dist.all_reduce(mx, op=dist.ReduceOp.MAX)
        z = logits - mx.unsqueeze(-1)
        sumexp = G_.apply(z.exp().sum(dim=-1))
        tg = tgt.reshape(-1)
        own = (tg >= v0) & (tg < v1)
        picked = z.gather(1, (tg - v0).clamp(0, v1 - v0 - 1).unsqueeze(1)).squeeze(1) * own
        return (sumexp.log() - G_.apply(picked)).mean()

    tokens = torch.tensor(list(open(args.data, "rb").read()), dtype=torch.uint8).view(torch.int16) \
        if args.data else None
    n_tok = tokens.numel() if tokens is not None else 1 << 16
    rnd = torch.Generator().manual_seed(5)
    data = tokens.long() if tokens is not None else torch.randint(0, c["vocab"], (n_tok,), generator=rnd)
    times, losses = [], []
    for s in range(args.steps):  # step 0 warms up: timed steps are 1..steps-1
        starts = [((s * args.batch + i) * args.seq) % (n_tok - args.seq - 1) for i in range(args.batch)]
        ids = torch.stack([data[p:p + args.seq] for p in starts])
        tgt = torch.stack([data[p + 1:p + 1 + args.seq] for p in starts])
        dist.barrier()
        t0 = time.perf_counter()
        for p in params:
            p.grad = None
        loss = forward_loss(ids, tgt)
        loss.backward()
        with torch.no_grad():
            for p in params:
                p.sub_(p.grad, alpha=args.lr)
        if s > 0:
            times.append(time.perf_counter() - t0)
        losses.append(loss.item())
    times.sort()
    st = torch.tensor([times[len(times) // 2], times[0]], dtype=torch.float64)
    dist.all_reduce(st, op=dist.ReduceOp.MAX)
    if rank == 0:
        print("pytorch  tp=%d gpt %s batch %d seq %d: step %.1f ms (median of %d), min %.1f ms; losses %s; torch %s gloo"
              % (w, args.config, args.batch, args.seq, 1e3 * st[0].item(), len(times), 1e3 * st[1].item(),
                 " ".join("%.4f" % x for x in losses), torch.__version__), flush=True)
    dist.barrier()
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--config", default="small", choices=sorted(CONFIGS))
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--data", default=None, help="uint16 token file (default: random tokens)")
    args = ap.parse_args()
    os.environ["OMP_NUM_THREADS"] = "1"
    os.environ["OPENBLAS_NUM_THREADS"] = "1"
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    import torch.multiprocessing as mp
    mp.spawn(run, args=(args, port), nprocs=args.world, join=True)


if __name__ == "__main__":
    main()
