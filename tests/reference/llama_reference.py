#!/usr/bin/env python3
"""An independent PyTorch implementation of what tessera trains, for cross-checks and benchmarks.

It re-implements, without sharing code with tessera:
  * Hugging Face LlamaForCausalLM's forward (RMSNorm in fp32, rotate-half rotary embeddings, SwiGLU,
    grouped-query attention, optional tied embeddings, mean next-token cross-entropy);
  * a safetensors reader/writer and the Hugging Face model directory layout;
  * the token file formats (nanoGPT raw uint16, llm.c headered) and tessera's documented batch order;
  * training with torch.optim.AdamW / torch.optim.SGD and gradient accumulation.

Only Debian's python3-torch (1.13) and the standard library are needed.
"""
import argparse
import json
import math
import os
import struct
import sys
import time

import torch
import torch.nn.functional as F

ST_DTYPES = {"F32": torch.float32, "BF16": torch.bfloat16, "F16": torch.float16, "F64": torch.float64}
ST_NAMES = {v: k for k, v in ST_DTYPES.items()}


# ---------------------------------------------------------------- safetensors
def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        dtype = ST_DTYPES[info["dtype"]]
        buf = bytearray(data[base + begin:base + end])
        t = torch.frombuffer(buf, dtype=dtype) if len(buf) else torch.empty(0, dtype=dtype)
        out[name] = t.reshape(info["shape"]).clone()
    return out


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.detach().contiguous().cpu()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        header[name] = {"dtype": ST_NAMES[t.dtype], "shape": list(t.shape), "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def read_model_dir(d):
    cfg = json.load(open(os.path.join(d, "config.json")))
    single = os.path.join(d, "model.safetensors")
    if os.path.exists(single):
        return cfg, read_safetensors(single)
    index = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    tensors = {}
    for shard in sorted(set(index["weight_map"].values())):
        tensors.update(read_safetensors(os.path.join(d, shard)))
    return cfg, tensors


# ---------------------------------------------------------------- model
class Llama:
    def __init__(self, cfg, weights, dtype=torch.float32):
        self.cfg = cfg
        self.h = cfg["hidden_size"]
        self.heads = cfg["num_attention_heads"]
        self.kv_heads = cfg.get("num_key_value_heads") or self.heads
        self.head_dim = cfg.get("head_dim") or self.h // self.heads
        self.layers = cfg["num_hidden_layers"]
        self.eps = cfg.get("rms_norm_eps", 1e-6)
        self.theta = cfg.get("rope_theta", 10000.0)
        self.tied = cfg.get("tie_word_embeddings", False)
        self.params = {k: v.to(dtype).clone().requires_grad_(True) for k, v in weights.items()
                       if not k.endswith("rotary_emb.inv_freq")}

    def parameters(self):
        return list(self.params.values())

    def rms_norm(self, x, w):
        dtype = x.dtype
        h = x.float()
        h = h * torch.rsqrt(h.pow(2).mean(-1, keepdim=True) + self.eps)
        return w * h.to(dtype)

    def rope(self, t, device, dtype):
        inv_freq = 1.0 / (self.theta ** (torch.arange(0, self.head_dim, 2, dtype=torch.int64).float() / self.head_dim))
        pos = torch.arange(t, dtype=torch.float32)
        freqs = (inv_freq[:, None] @ pos[None, :]).t()
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(device, dtype), emb.sin().to(device, dtype)

    @staticmethod
    def rotate_half(x):
        x1, x2 = x[..., : x.shape[-1] // 2], x[..., x.shape[-1] // 2:]
        return torch.cat((-x2, x1), dim=-1)

    def loss(self, tokens, targets):
        p = self.params
        b, t = tokens.shape
        x = F.embedding(tokens, p["model.embed_tokens.weight"])
        cos, sin = self.rope(t, x.device, x.dtype)
        mask = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        n_rep = self.heads // self.kv_heads
        for i in range(self.layers):
            pre = f"model.layers.{i}."
            h = self.rms_norm(x, p[pre + "input_layernorm.weight"])
            q = F.linear(h, p[pre + "self_attn.q_proj.weight"]).view(b, t, self.heads, self.head_dim).transpose(1, 2)
            k = F.linear(h, p[pre + "self_attn.k_proj.weight"]).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            v = F.linear(h, p[pre + "self_attn.v_proj.weight"]).view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k = k.repeat_interleave(n_rep, dim=1)
            v = v.repeat_interleave(n_rep, dim=1)
            scores = (q @ k.transpose(2, 3)) / math.sqrt(self.head_dim)
            scores = scores.masked_fill(mask, float("-inf"))
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            attn = (probs @ v).transpose(1, 2).reshape(b, t, self.heads * self.head_dim)
            x = x + F.linear(attn, p[pre + "self_attn.o_proj.weight"])
            h = self.rms_norm(x, p[pre + "post_attention_layernorm.weight"])
            gate = F.linear(h, p[pre + "mlp.gate_proj.weight"])
            up = F.linear(h, p[pre + "mlp.up_proj.weight"])
            x = x + F.linear(F.silu(gate) * up, p[pre + "mlp.down_proj.weight"])
        x = self.rms_norm(x, p["model.norm.weight"])
        head = p["model.embed_tokens.weight"] if self.tied else p["lm_head.weight"]
        logits = F.linear(x, head)
        return F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), targets.reshape(-1))


def random_weights(cfg, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    h, inter, v = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    heads, kvh = cfg["num_attention_heads"], cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    d = cfg.get("head_dim") or h // heads
    std = cfg.get("initializer_range", 0.02)

    def normal(*shape):
        return (torch.randn(*shape, generator=g) * std).to(dtype)

    # Norm scales are perturbed away from 1 so that a loader mixing them up cannot pass.
    def norm():
        return (1.0 + 0.1 * torch.randn(h, generator=g)).to(dtype)

    w = {"model.embed_tokens.weight": normal(v, h)}
    for i in range(cfg["num_hidden_layers"]):
        pre = f"model.layers.{i}."
        w[pre + "input_layernorm.weight"] = norm()
        w[pre + "self_attn.q_proj.weight"] = normal(heads * d, h)
        w[pre + "self_attn.k_proj.weight"] = normal(kvh * d, h)
        w[pre + "self_attn.v_proj.weight"] = normal(kvh * d, h)
        w[pre + "self_attn.o_proj.weight"] = normal(h, heads * d)
        w[pre + "post_attention_layernorm.weight"] = norm()
        w[pre + "mlp.gate_proj.weight"] = normal(inter, h)
        w[pre + "mlp.up_proj.weight"] = normal(inter, h)
        w[pre + "mlp.down_proj.weight"] = normal(h, inter)
    w["model.norm.weight"] = norm()
    if not cfg.get("tie_word_embeddings", False):
        w["lm_head.weight"] = normal(v, h)
    return w


# ---------------------------------------------------------------- data
def read_tokens(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) >= 1024 and struct.unpack("<i", raw[:4])[0] == 20240520:
        n = struct.unpack("<i", raw[8:12])[0]
        raw = raw[1024:1024 + 2 * n]
    return torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.int64) & 0xFFFF


def batch(tokens, step, micro, accumulate, rows, seq_len):
    """Rows of chunk c = step*accumulate + micro; chunk starts wrap when fewer than rows*T+1 tokens remain."""
    chunk_tokens = rows * seq_len
    chunks = (tokens.numel() - 1) // chunk_tokens
    start = ((step * accumulate + micro) % chunks) * chunk_tokens
    span = tokens[start:start + chunk_tokens + 1]
    x = span[:-1].reshape(rows, seq_len)
    y = span[1:].reshape(rows, seq_len)
    return x, y


def train(model, tokens, steps, accumulate, rows, seq_len, lr, weight_decay, optimizer="adamw"):
    if optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)
    losses = []
    for s in range(steps):
        total = 0.0
        for m in range(accumulate):
            x, y = batch(tokens, s, m, accumulate, rows, seq_len)
            loss = model.loss(x, y)
            (loss / accumulate).backward()
            total += loss.item()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total / accumulate)
    return losses


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="cmd", required=True)
    mk = sub.add_parser("make-model", help="write a random Hugging Face Llama dir")
    mk.add_argument("dir")
    mk.add_argument("--config", required=True, help="JSON text of config.json fields")
    mk.add_argument("--seed", type=int, default=0)
    mk.add_argument("--dtype", default="F32", choices=list(ST_DTYPES))
    mt = sub.add_parser("make-tokens", help="write a token file")
    mt.add_argument("path")
    mt.add_argument("--count", type=int, required=True)
    mt.add_argument("--vocab", type=int, required=True)
    mt.add_argument("--seed", type=int, default=0)
    mt.add_argument("--llmc", action="store_true", help="llm.c headered format instead of raw uint16")
    tr = sub.add_parser("train", help="train and print one JSON line of per-step losses")
    tr.add_argument("dir")
    tr.add_argument("tokens")
    for k, t, d in [("--steps", int, 20), ("--accumulate", int, 1), ("--rows", int, 8), ("--seq-len", int, 64),
                    ("--lr", float, 1e-3), ("--weight-decay", float, 0.01), ("--threads", int, 0)]:
        tr.add_argument(k, type=t, default=d)
    tr.add_argument("--optimizer", default="adamw", choices=["adamw", "sgd"])
    tr.add_argument("--save", help="write the trained weights (F32) to this safetensors file")
    bn = sub.add_parser("bench", help="time training steps of a preset-shaped model with random weights")
    bn.add_argument("--config", required=True)
    for k, t, d in [("--rows", int, 8), ("--seq-len", int, 256), ("--steps", int, 5), ("--warmup", int, 1),
                    ("--threads", int, 0)]:
        bn.add_argument(k, type=t, default=d)
    a = ap.parse_args()

    if a.cmd == "make-model":
        cfg = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_act="silu", rope_scaling=None,
                   **json.loads(a.config))
        os.makedirs(a.dir, exist_ok=True)
        json.dump(cfg, open(os.path.join(a.dir, "config.json"), "w"), indent=2)
        write_safetensors(os.path.join(a.dir, "model.safetensors"), random_weights(cfg, a.seed, ST_DTYPES[a.dtype]))
    elif a.cmd == "make-tokens":
        g = torch.Generator().manual_seed(a.seed)
        toks = torch.randint(0, a.vocab, (a.count,), generator=g, dtype=torch.int32).to(torch.int16)
        with open(a.path, "wb") as f:
            if a.llmc:
                f.write(struct.pack("<256i", 20240520, 1, a.count, *([0] * 253)))
            f.write(toks.numpy().tobytes())
    elif a.cmd == "train":
        if a.threads:
            torch.set_num_threads(a.threads)
        cfg, weights = read_model_dir(a.dir)
        model = Llama(cfg, weights)
        losses = train(model, read_tokens(a.tokens), a.steps, a.accumulate, a.rows, a.seq_len, a.lr,
                       a.weight_decay, a.optimizer)
        if a.save:
            write_safetensors(a.save, {k: v.detach() for k, v in model.params.items()})
        print(json.dumps({"losses": losses}))
    elif a.cmd == "bench":
        torch.set_num_threads(a.threads or os.cpu_count())
        cfg = json.loads(a.config)
        model = Llama(cfg, random_weights(cfg, 0))
        tokens = torch.randint(0, cfg["vocab_size"], (a.rows * a.seq_len * (a.steps + a.warmup) + 1,))
        times = []
        for s in range(a.warmup + a.steps):
            t0 = time.perf_counter()
            train(model, tokens[s * a.rows * a.seq_len:], 1, 1, a.rows, a.seq_len, 1e-4, 0.01)
            times.append(time.perf_counter() - t0)
        print(json.dumps({"step_ms": [t * 1e3 for t in times[a.warmup:]]}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
