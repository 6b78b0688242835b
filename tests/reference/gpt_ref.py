#!/usr/bin/python3
"""PyTorch implementation of the reference GPT (shared spec gpt.md) and the
golden-file generator for tests/nn/test_gpt_golden.c.

Run with Debian's python3-torch:  /usr/bin/python3 tests/reference/gpt_ref.py
It writes, next to this script, golden/gpt_golden.json and
golden/gpt_golden_weights.bin. The test suite only reads those committed files;
it never needs PyTorch.

The weights are made with PyTorch's own RNG (the C side cannot reproduce it);
they are written as one raw little-endian float32 blob, every parameter in the
stable FQN order of dtensor's modules (the order listed in the JSON), so the C
test loads the same numbers into its modules and compares:
  * step-0 forward + backward: the loss and, per parameter, the gradient's
    2-norm and a few gradient values;
  * 5 training steps (SGD, SGD with momentum and weight decay, AdamW, AdamW
    with gradient clipping): the loss at every step and sampled final weights.
Batches follow the spec's Data section over the token list in the JSON.

`gpt_ref.py compare TOKENS.bin OUT.safetensors tiny|small STEPS sgd|adamw LR`
writes fresh PyTorch weights to OUT and prints PyTorch's loss per step, to
compare with `train_gpt --config ... --init OUT --steps ... --optim ... --lr ...`
(batch 8, seq = max_seq_len, the trainer's defaults).
"""
import json
import math
import os
import struct
import sys

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))


class Attention(nn.Module):
    def __init__(self, dim, n_heads):
        super().__init__()
        self.n_heads = n_heads
        self.head_dim = dim // n_heads
        self.wq = nn.Linear(dim, dim)
        self.wk = nn.Linear(dim, dim)
        self.wv = nn.Linear(dim, dim)
        self.wo = nn.Linear(dim, dim)

    def forward(self, x):
        b, t, d = x.shape

        def heads(y):
            return y.view(b, t, self.n_heads, self.head_dim).transpose(1, 2)

        q, k, v = heads(self.wq(x)), heads(self.wk(x)), heads(self.wv(x))
        s = (q @ k.transpose(-2, -1)) / math.sqrt(self.head_dim)
        mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)
        s = s.masked_fill(mask, float("-inf"))
        o = torch.softmax(s, dim=-1) @ v
        return self.wo(o.transpose(1, 2).contiguous().view(b, t, d))


class FeedForward(nn.Module):
    def __init__(self, dim, hidden):
        super().__init__()
        self.w1 = nn.Linear(dim, hidden)
        self.w2 = nn.Linear(hidden, dim)

    def forward(self, x):
        return self.w2(F.gelu(self.w1(x), approximate="tanh"))


class Block(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.attention_norm = nn.LayerNorm(cfg["dim"], eps=1e-5)
        self.attention = Attention(cfg["dim"], cfg["n_heads"])
        self.ffn_norm = nn.LayerNorm(cfg["dim"], eps=1e-5)
        self.feed_forward = FeedForward(cfg["dim"], cfg["ffn_dim"])

    def forward(self, h):
        h = h + self.attention(self.attention_norm(h))
        return h + self.feed_forward(self.ffn_norm(h))


class GPT(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.tok_embeddings = nn.Embedding(cfg["vocab_size"], cfg["dim"])
        self.pos_embeddings = nn.Embedding(cfg["max_seq_len"], cfg["dim"])
        self.layers = nn.Sequential(*[Block(cfg) for _ in range(cfg["n_layers"])])
        self.norm = nn.LayerNorm(cfg["dim"], eps=1e-5)
        self.output = nn.Linear(cfg["dim"], cfg["vocab_size"], bias=False)
        self.init_weights()

    def init_weights(self):
        """The spec's init (with PyTorch's RNG)."""
        proj_std = 0.02 / math.sqrt(2 * self.cfg["n_layers"])
        with torch.no_grad():
            for name, p in self.named_parameters():
                owner = name.rsplit(".", 2)
                if ".attention_norm." in name or ".ffn_norm." in name or name.startswith("norm."):
                    p.fill_(1.0 if name.endswith("weight") else 0.0)
                elif name.endswith("bias"):
                    p.zero_()
                elif len(owner) >= 2 and owner[-2] in ("wo", "w2"):
                    p.normal_(0.0, proj_std)
                else:
                    p.normal_(0.0, 0.02)

    def forward(self, idx):
        t = idx.shape[1]
        h = self.tok_embeddings(idx) + self.pos_embeddings(torch.arange(t))
        return self.output(self.norm(self.layers(h)))


def batch(tokens, step, b, t):
    """The spec's Data section: row r starts at ((step*b + r)*t) mod (n - t - 1)."""
    span = len(tokens) - t - 1
    xs, ys = [], []
    for r in range(b):
        s = ((step * b + r) * t) % span
        xs.append(tokens[s:s + t])
        ys.append(tokens[s + 1:s + t + 1])
    return torch.tensor(xs, dtype=torch.long), torch.tensor(ys, dtype=torch.long)


def loss_of(model, x, y):
    logits = model(x)
    return F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


def sample_indices(numel, gen):
    """First, last and two pseudo-random flat indices (deterministic)."""
    idx = {0, numel - 1}
    for _ in range(2):
        idx.add(int(torch.randint(0, numel, (1,), generator=gen)))
    return sorted(idx)


def train(cfg, state, tokens, b, t, run, steps):
    model = GPT(cfg)
    model.load_state_dict(state)
    if run["optim"] == "sgd":
        opt = torch.optim.SGD(model.parameters(), lr=run["lr"], momentum=run["momentum"],
                              weight_decay=run["weight_decay"])
    else:
        opt = torch.optim.AdamW(model.parameters(), lr=run["lr"], betas=(0.9, 0.95), eps=1e-8,
                                weight_decay=run["weight_decay"])
    losses = []
    for s in range(steps):
        x, y = batch(tokens, s, b, t)
        opt.zero_grad(set_to_none=True)
        loss = loss_of(model, x, y)
        loss.backward()
        if run["clip"] > 0:
            torch.nn.utils.clip_grad_norm_(model.parameters(), run["clip"])
        opt.step()
        losses.append(loss.item())
    return model, losses


def main():
    torch.manual_seed(1234)
    torch.set_num_threads(1)
    # 12 heads divide by tp = 2, 3, 4; vocab 64 and ffn 80 shard unevenly over 3
    cfg = dict(vocab_size=64, max_seq_len=16, dim=48, n_layers=2, n_heads=12, ffn_dim=80)
    b, t, steps = 2, 16, 5
    model = GPT(cfg)
    gen = torch.Generator().manual_seed(99)
    # a random 37-token phrase repeated: learnable, so the trajectories fall
    phrase = [int(v) for v in torch.randint(0, cfg["vocab_size"], (37,), generator=gen)]
    tokens = [phrase[i % len(phrase)] for i in range(300)]
    state = {k: v.clone() for k, v in model.state_dict().items()}

    out_dir = os.path.join(HERE, "golden")
    os.makedirs(out_dir, exist_ok=True)
    params, offset, blob = [], 0, bytearray()
    for name, p in model.named_parameters():
        flat = p.detach().contiguous().view(-1).tolist()
        params.append(dict(name=name, shape=list(p.shape), offset=offset))
        blob += struct.pack("<%df" % len(flat), *flat)
        offset += len(flat)
    with open(os.path.join(out_dir, "gpt_golden_weights.bin"), "wb") as f:
        f.write(blob)

    # step 0: loss and gradients
    x, y = batch(tokens, 0, b, t)
    loss = loss_of(model, x, y)
    loss.backward()
    grads = []
    for name, p in model.named_parameters():
        g = p.grad.view(-1)
        idx = sample_indices(g.numel(), gen)
        idx.append(int(g.abs().argmax()))
        grads.append(dict(name=name, norm=float(g.double().norm()), idx=idx,
                          val=[float(g[i]) for i in idx]))

    runs = [
        dict(optim="sgd", lr=0.5, momentum=0.0, weight_decay=0.0, clip=0.0),
        dict(optim="sgd", lr=0.1, momentum=0.9, weight_decay=0.01, clip=0.0),
        dict(optim="adamw", lr=3e-3, momentum=0.0, weight_decay=0.1, clip=0.0),
        dict(optim="adamw", lr=3e-3, momentum=0.0, weight_decay=0.1, clip=0.5),
        dict(optim="sgd", lr=0.5, momentum=0.0, weight_decay=0.0, clip=0.3),
    ]
    for run in runs:
        trained, losses = train(cfg, state, tokens, b, t, run, steps)
        run["losses"] = losses
        final = []
        for name, p in trained.named_parameters():
            v = p.detach().view(-1)
            idx = sample_indices(v.numel(), gen)
            final.append(dict(name=name, idx=idx, val=[float(v[i]) for i in idx]))
        run["final"] = final

    total = math.sqrt(sum(g["norm"] ** 2 for g in grads))
    golden = dict(torch_version=torch.__version__, config=cfg, batch=b, seq=t, steps=steps,
                  params=params, tokens=tokens, loss=float(loss.item()), grad_norm=total, grads=grads, runs=runs)
    with open(os.path.join(out_dir, "gpt_golden.json"), "w") as f:
        json.dump(golden, f, separators=(",", ":"))
    print("loss %.6f; wrote %d parameters (%d floats) to %s" % (loss.item(), len(params), offset,
                                                                 out_dir), file=sys.stderr)


def write_safetensors(path, model):
    """The model's parameters as a safetensors file (by FQN, f32), written by hand."""
    header, blobs, off = {}, [], 0
    for name, p in model.named_parameters():
        data = p.detach().contiguous().numpy().astype("<f4").tobytes()
        header[name] = dict(dtype="F32", shape=list(p.shape), data_offsets=[off, off + len(data)])
        blobs.append(data)
        off += len(data)
    header["__metadata__"] = dict(format="pt")
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def compare_run(argv):
    """gpt_ref.py compare TOKENS.bin OUT.safetensors CONFIG STEPS OPTIM LR:
    write fresh PyTorch weights to OUT and print PyTorch's loss per step, for
    comparing with `train_gpt --init OUT` on the same token file."""
    tokens_path, out, config, steps, optim, lr = argv
    presets = dict(tiny=dict(vocab_size=256, max_seq_len=64, dim=64, n_layers=2, n_heads=4,
                             ffn_dim=256),
                   small=dict(vocab_size=4096, max_seq_len=256, dim=512, n_layers=6, n_heads=8,
                              ffn_dim=2048))
    cfg = presets[config]
    torch.manual_seed(5)
    model = GPT(cfg)
    write_safetensors(out, model)
    raw = open(tokens_path, "rb").read()
    tokens = list(struct.unpack("<%dH" % (len(raw) // 2), raw))
    run = dict(optim=optim, lr=float(lr), momentum=0.0, weight_decay=0.1 if optim == "adamw" else 0.0,
               clip=0.0)
    _, losses = train(cfg, model.state_dict(), tokens, 8, cfg["max_seq_len"], run, int(steps))
    for s, l in enumerate(losses):
        print("step %4d  loss %.6f" % (s, l))


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "compare":
        compare_run(sys.argv[2:])
    else:
        main()
