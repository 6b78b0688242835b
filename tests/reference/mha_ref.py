#!/usr/bin/python3
"""Golden numbers for dtensor's MultiheadAttention (tests/nn/test_mha_golden.c).

Run with Debian's python3-torch: /usr/bin/python3 tests/reference/mha_ref.py
Writes tests/reference/golden/:
  mha_golden_weights.safetensors  nn.MultiheadAttention(16, 4, batch_first=True)'s
                                  state_dict() as PyTorch holds it (in_proj_weight,
                                  in_proj_bias, out_proj.weight, out_proj.bias)
  mha_golden_io.safetensors       the input x [2, 5, 16]; for attn_mask None ("full")
                                  and the causal mask ("causal"): the output y and the
                                  gradients of sum(y * y) w.r.t. x and every parameter
The safetensors files are written here (no safetensors package needed).
"""
import json
import os
import struct

import torch

E, H, B, S = 16, 4, 2, 5


def save_safetensors(path, tensors):
    """The safetensors layout: u64 header length, JSON header, raw f32 data."""
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def main():
    torch.manual_seed(1234)
    mha = torch.nn.MultiheadAttention(E, H, batch_first=True)
    # nonzero biases, so that they are checked too (PyTorch starts them at 0)
    with torch.no_grad():
        mha.in_proj_bias.uniform_(-0.5, 0.5)
        mha.out_proj.bias.uniform_(-0.5, 0.5)
    x0 = torch.randn(B, S, E)
    io = {"x": x0}
    mask = torch.nn.Transformer.generate_square_subsequent_mask(S)
    for name, m in (("full", None), ("causal", mask)):
        mha.zero_grad()
        x = x0.clone().requires_grad_(True)
        y, _ = mha(x, x, x, attn_mask=m, need_weights=False)
        (y * y).sum().backward()
        io[name + ".y"] = y.detach().clone()
        io[name + ".grad.x"] = x.grad.clone()
        for pname, p in mha.named_parameters():
            io[name + ".grad." + pname] = p.grad.clone()  # zero_grad reuses it
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "golden")
    os.makedirs(here, exist_ok=True)
    save_safetensors(os.path.join(here, "mha_golden_weights.safetensors"), mha.state_dict())
    save_safetensors(os.path.join(here, "mha_golden_io.safetensors"), io)
    print("wrote", here, "torch", torch.__version__)


if __name__ == "__main__":
    main()
