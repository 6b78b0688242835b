#!/usr/bin/python3
"""safetensors files between dtensor and PyTorch, without the `safetensors`
package (the format is 8 bytes + JSON + raw data: json, struct and
torch.frombuffer read and write it).

  torch_check.py golden
      Write golden/tiny.safetensors next to this script exactly as the
      reference writer (safetensors.torch.save_file) lays it out: every dtype
      dtensor has, a scalar, an empty tensor, a non-ASCII name, metadata.
      tests/checkpoint/test_format.c writes the same tensors with
      dt_safetensors_save and compares the bytes.

  torch_check.py check DIR
      DIR holds gpt_tiny.safetensors (written by dt_save_full in the C test
      checkpoint_torch) and gpt_tiny.loss.json (config, tokens, dtensor's loss).
      Load the weights into tests/reference/gpt_ref.py's GPT, compute the loss
      on the same tokens, compare (1e-5 relative) and write
      golden/gpt_tiny_torch.json (PyTorch's loss and the FNV-1a 64 hash of the
      weights file), which the C test checks on every run without PyTorch.
"""
import json
import os
import struct
import sys

import torch
import torch.nn.functional as F

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "reference"))

# name -> (torch dtype, element size, rank in the reference writer's order)
DTYPES = {
    "U8": (torch.uint8, 1, 1), "I16": (torch.int16, 2, 5), "F16": (torch.float16, 2, 7),
    "BF16": (torch.bfloat16, 2, 8), "I32": (torch.int32, 4, 9), "F32": (torch.float32, 4, 11),
    "F64": (torch.float64, 8, 12), "I64": (torch.int64, 8, 13), "I8": (torch.int8, 1, 2),
    "BOOL": (torch.bool, 1, 0),
}
U16 = ("U16", 2, 6)  # torch 1.13 has no uint16: carried as int16 bits
NAME_OF = {v[0]: k for k, v in DTYPES.items()}


def write_safetensors(path, tensors, metadata=None):
    """tensors: name -> (dtype name, shape, raw little-endian bytes)."""
    rank = {k: v[2] for k, v in DTYPES.items()}
    rank["U16"] = U16[2]
    items = sorted(tensors.items(), key=lambda kv: (-rank[kv[1][0]], kv[0].encode()))
    header, blob, at = {}, bytearray(), 0
    if metadata:
        header["__metadata__"] = metadata
    for name, (dt, shape, raw) in items:
        header[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [at, at + len(raw)]}
        blob += raw
        at += len(raw)
    text = json.dumps(header, separators=(",", ":"), ensure_ascii=False).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + bytes(blob))


def read_safetensors(path):
    """name -> torch tensor (U16 as int16 bits), plus the metadata dict."""
    with open(path, "rb") as f:
        buf = f.read()
    (n,) = struct.unpack("<Q", buf[:8])
    header = json.loads(buf[8:8 + n].decode("utf-8"))
    data = buf[8 + n:]
    meta = header.pop("__metadata__", {})
    out = {}
    for name, info in header.items():
        b, e = info["data_offsets"]
        dt = torch.int16 if info["dtype"] == "U16" else DTYPES[info["dtype"]][0]
        raw = bytearray(data[b:e])
        t = torch.frombuffer(raw, dtype=dt) if raw else torch.empty(0, dtype=dt)
        out[name] = t.reshape(info["shape"]).clone()
    return out, meta


def golden_tensors():
    """The tensors of golden/tiny.safetensors; tests/checkpoint/test_format.c
    builds the same values (element i of each: the formula below)."""
    def raw(dt, shape, fn):
        n = 1
        for s in shape:
            n *= s
        vals = [fn(i) for i in range(n)]
        if dt == "U16":
            return (dt, shape, struct.pack("<%dH" % n, *vals))
        t = torch.tensor(vals, dtype=DTYPES[dt][0])
        return (dt, shape, t.numpy().tobytes() if dt != "BF16" else t.view(torch.int16).numpy().tobytes())

    flt = lambda i: (i - 3) * 0.375
    return {
        "w.f32": raw("F32", [2, 3], flt),
        "w.f64": raw("F64", [3], flt),
        "w.f16": raw("F16", [2, 2], flt),
        "w.bf16": raw("BF16", [5], flt),
        "ids.i64": raw("I64", [2, 2], lambda i: i * 1000000007 - 5),
        "ids.i32": raw("I32", [3], lambda i: i * 7 - 9),
        "tok.u16": raw("U16", [4], lambda i: i * 20000 + 1),
        "mask.u8": raw("U8", [3], lambda i: (i * 100 + 7) % 256),
        "scalar": raw("F32", [], lambda i: 2.5),
        "empty": raw("F32", [0, 4], flt),
        "caf\u00e9.w": raw("F32", [1], lambda i: -1.0),
    }


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h


def check(d):
    from gpt_ref import GPT
    with open(os.path.join(d, "gpt_tiny.loss.json")) as f:
        info = json.load(f)
    wpath = os.path.join(d, "gpt_tiny.safetensors")
    state, meta = read_safetensors(wpath)
    model = GPT(info["config"])
    missing = set(dict(model.named_parameters())) ^ set(state)
    if missing:
        raise SystemExit("keys differ: %s" % sorted(missing))
    model.load_state_dict(state)
    x = torch.tensor(info["x"], dtype=torch.long)
    y = torch.tensor(info["y"], dtype=torch.long)
    with torch.no_grad():
        logits = model(x)
        loss = float(F.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1)))
    rel = abs(loss - info["loss"]) / abs(info["loss"])
    print("metadata %s; torch loss %.8f, dtensor loss %.8f, relative difference %.3g"
          % (meta, loss, info["loss"], rel))
    with open(wpath, "rb") as f:
        h = fnv1a64(f.read())
    golden = dict(torch_version=torch.__version__, torch_loss=loss, dtensor_loss=info["loss"],
                  weights_fnv1a64="%016x" % h, config=info["config"], seed=info["seed"])
    with open(os.path.join(HERE, "golden", "gpt_tiny_torch.json"), "w") as f:
        json.dump(golden, f, indent=1)
    if rel > 1e-5:
        raise SystemExit("FAIL: losses differ by %.3g relative" % rel)
    print("OK")


def main():
    torch.set_num_threads(1)
    if len(sys.argv) >= 2 and sys.argv[1] == "golden":
        os.makedirs(os.path.join(HERE, "golden"), exist_ok=True)
        path = os.path.join(HERE, "golden", "tiny.safetensors")
        write_safetensors(path, golden_tensors(), {"format": "pt"})
        back, meta = read_safetensors(path)
        assert meta == {"format": "pt"} and len(back) == len(golden_tensors())
        print("wrote", path, os.path.getsize(path), "bytes")
    elif len(sys.argv) >= 3 and sys.argv[1] == "check":
        check(sys.argv[2])
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main()
