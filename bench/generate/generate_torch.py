#!/usr/bin/python3
"""The reference GPT (shared spec gpt.md) generating text with a KV cache in
PyTorch, one process: the baseline of examples/generate (run.sh). Loads the
weights train_gpt --save wrote (safetensors, keyed by FQN), feeds the prompt
(byte-level tokens, as examples/data) and then one token at a time, greedy,
and prints the text and tokens/s the way generate does.

    /usr/bin/python3 generate_torch.py --weights W.safetensors --config-json DIR/config.json \
        --prompt TEXT --tokens K [--threads 1]
"""
import argparse
import json
import math
import os
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "common"))
from torch_blas import limit_blas_threads  # noqa: E402


def load_safetensors(path, torch):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base, out = 8 + n, {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", name
        b, e = info["data_offsets"]
        t = torch.frombuffer(bytearray(data[base + b:base + e]), dtype=torch.float32)
        out[name] = t.reshape(info["shape"])
    return out


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--weights", required=True)
    p.add_argument("--config-json", required=True)
    p.add_argument("--prompt", required=True)
    p.add_argument("--tokens", type=int, required=True)
    p.add_argument("--threads", type=int, default=1)
    a = p.parse_args()
    import torch
    import torch.nn.functional as F

    torch.set_num_threads(a.threads)
    limit_blas_threads(a.threads)  # torch.set_num_threads does not reach Debian's OpenBLAS
    c = json.load(open(a.config_json))
    w = load_safetensors(a.weights, torch)
    d, nh = c["dim"], c["n_heads"]
    hd = d // nh
    L = c["n_layers"]

    def lin(x, name, bias=True):
        return F.linear(x, w[name + ".weight"], w[name + ".bias"] if bias else None)

    def ln(x, name):
        return F.layer_norm(x, (d,), w[name + ".weight"], w[name + ".bias"], 1e-5)

    cache_k = [None] * L
    cache_v = [None] * L

    def attention(x, i, pos):  # x [1, T, d], positions pos..pos+T-1
        pre = "layers.%d.attention." % i
        t = x.shape[1]
        q, k, v = (lin(x, pre + n).view(1, t, nh, hd).transpose(1, 2) for n in ("wq", "wk", "wv"))
        cache_k[i] = k if cache_k[i] is None else torch.cat([cache_k[i], k], 2)
        cache_v[i] = v if cache_v[i] is None else torch.cat([cache_v[i], v], 2)
        s = q @ cache_k[i].transpose(2, 3) * (1.0 / math.sqrt(hd))  # [1, nh, t, pos + t]
        if t > 1:  # new query j sees keys 0..pos+j
            s = s.masked_fill(torch.ones(t, pos + t, dtype=torch.bool).triu(pos + 1), float("-inf"))
        o = torch.softmax(s, -1) @ cache_v[i]
        return lin(o.transpose(1, 2).reshape(1, t, d), pre + "wo")

    def forward(ids, pos):
        t = ids.shape[1]
        h = F.embedding(ids, w["tok_embeddings.weight"]) + \
            F.embedding(torch.arange(pos, pos + t), w["pos_embeddings.weight"])
        for i in range(L):
            pre = "layers.%d." % i
            h = h + attention(ln(h, pre + "attention_norm"), i, pos)
            f = lin(F.gelu(lin(ln(h, pre + "ffn_norm"), pre + "feed_forward.w1"), approximate="tanh"),
                    pre + "feed_forward.w2")
            h = h + f
        return lin(ln(h, "norm"), "output", bias=False)

    ids = torch.tensor([list(a.prompt.encode())], dtype=torch.long)
    out, pos = [], 0
    with torch.inference_mode():
        t0 = time.perf_counter()
        for _ in range(a.tokens):
            logits = forward(ids, pos)
            pos += ids.shape[1]
            nxt = int(torch.argmax(logits[0, -1]))
            out.append(nxt)
            ids = torch.tensor([[nxt]], dtype=torch.long)
        dt = time.perf_counter() - t0
    text = bytes(t if t < 256 else ord("?") for t in out).decode("latin-1")
    print(a.prompt + text)
    print("%d tokens in %.3f s: %.1f tokens/s (pytorch %s, %d thread%s, greedy)" % (
        a.tokens, dt, a.tokens / dt, torch.__version__, a.threads, "" if a.threads == 1 else "s"))


if __name__ == "__main__":
    main()
