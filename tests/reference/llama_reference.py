#!/usr/bin/env python3
"""An independent PyTorch implementation of what tessera trains, for cross-checks and benchmarks.

It re-implements, without sharing code with tessera:
  * Hugging Face LlamaForCausalLM's forward (RMSNorm in fp32, rotate-half rotary embeddings, SwiGLU,
    grouped-query attention, optional tied embeddings, mean next-token cross-entropy);
  * a safetensors reader/writer and the Hugging Face model directory layout;
  * the token file formats (nanoGPT raw uint16, llm.c headered) and tessera's documented batch order;
  * training with torch.optim.AdamW / torch.optim.SGD and gradient accumulation;
  * PEFT LoRA (LoraLlama): adapters read from / written to a PEFT dir (adapter_config.json +
    adapter_model.safetensors), y = x W^T + scaling * (dropout(x) A^T) B^T on the targeted linears, frozen base,
    only A and B trained, merging W + scaling * B @ A.

Commands: make-model, make-tokens, make-adapter (random PEFT dir with non-zero B), train (optionally --adapter DIR,
--save-adapter DIR, --save-merged DIR).

Only torch and the standard library are needed (the LoRA checks and the benchmarks still use it; the plain
Llama checks run Hugging Face transformers itself, check_against_transformers.py).
"""
import argparse
import json
import math
import os
import re
import struct
import sys

import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tessera_run  # noqa: E402  (tessera's batch order)

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

    def linear(self, x, module):
        """The decoder linear `module` (e.g. model.layers.0.self_attn.q_proj): y = x W^T (Llama has no biases)."""
        return F.linear(x, self.params[module + ".weight"])

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
            q = self.linear(h, pre + "self_attn.q_proj").view(b, t, self.heads, self.head_dim).transpose(1, 2)
            k = self.linear(h, pre + "self_attn.k_proj").view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            v = self.linear(h, pre + "self_attn.v_proj").view(b, t, self.kv_heads, self.head_dim).transpose(1, 2)
            q = q * cos + self.rotate_half(q) * sin
            k = k * cos + self.rotate_half(k) * sin
            k = k.repeat_interleave(n_rep, dim=1)
            v = v.repeat_interleave(n_rep, dim=1)
            scores = (q @ k.transpose(2, 3)) / math.sqrt(self.head_dim)
            scores = scores.masked_fill(mask, float("-inf"))
            probs = F.softmax(scores, dim=-1, dtype=torch.float32).to(q.dtype)
            attn = (probs @ v).transpose(1, 2).reshape(b, t, self.heads * self.head_dim)
            x = x + self.linear(attn, pre + "self_attn.o_proj")
            h = self.rms_norm(x, p[pre + "post_attention_layernorm.weight"])
            gate = self.linear(h, pre + "mlp.gate_proj")
            up = self.linear(h, pre + "mlp.up_proj")
            x = x + self.linear(F.silu(gate) * up, pre + "mlp.down_proj")
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


# ---------------------------------------------------------------- LoRA (PEFT adapter dirs)
# PEFT's LoRA, written from its documented semantics: every targeted linear y = x W^T becomes
#   y = x W^T + scaling * (dropout(x) A^T) B^T,   A: (r, in), B: (out, r),
# scaling = lora_alpha / r (lora_alpha / sqrt(r) with use_rslora). W stays frozen; only A and B train.
# A PEFT dir holds adapter_config.json and adapter_model.safetensors with the tensors
# base_model.model.<module>.lora_A.weight and base_model.model.<module>.lora_B.weight,
# <module> being e.g. model.layers.0.self_attn.q_proj.
PEFT_PREFIX = "base_model.model."
LLAMA_LINEARS = ["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj", "self_attn.o_proj",
                 "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj"]


def linear_modules(cfg):
    return [f"model.layers.{i}.{m}" for i in range(cfg["num_hidden_layers"]) for m in LLAMA_LINEARS]


def linear_shape(cfg, module):
    """(out_features, in_features) of a decoder linear."""
    h, inter = cfg["hidden_size"], cfg["intermediate_size"]
    heads = cfg["num_attention_heads"]
    kvh = cfg.get("num_key_value_heads") or heads
    d = cfg.get("head_dim") or h // heads
    leaf = module.rsplit(".", 1)[1]
    return {"q_proj": (heads * d, h), "k_proj": (kvh * d, h), "v_proj": (kvh * d, h), "o_proj": (h, heads * d),
            "gate_proj": (inter, h), "up_proj": (inter, h), "down_proj": (h, inter)}[leaf]


def peft_targeted(target_modules, module):
    """PEFT's matching: a string is a regex that must match the whole module name; a list matches a module whose
    name equals an entry or ends with '.' + entry."""
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, module) is not None
    return any(module == t or module.endswith("." + t) for t in target_modules)


def read_adapter_dir(d):
    acfg = json.load(open(os.path.join(d, "adapter_config.json")))
    path = os.path.join(d, "adapter_model.safetensors")
    if not os.path.exists(path):
        raise FileNotFoundError(f"{path}: only safetensors adapters are supported")
    return acfg, read_safetensors(path)


def write_adapter_dir(d, acfg, tensors):
    os.makedirs(d, exist_ok=True)
    json.dump(acfg, open(os.path.join(d, "adapter_config.json"), "w"), indent=2)
    write_safetensors(os.path.join(d, "adapter_model.safetensors"), tensors)


def lora_scaling(acfg):
    r, alpha = acfg["r"], acfg["lora_alpha"]
    return alpha / math.sqrt(r) if acfg.get("use_rslora", False) else alpha / r


def check_adapter_config(acfg):
    if acfg.get("peft_type", "LORA") != "LORA":
        raise ValueError(f"peft_type {acfg['peft_type']!r} is not LORA")
    for key in ("rank_pattern", "alpha_pattern", "layers_to_transform", "modules_to_save", "fan_in_fan_out",
                "use_dora", "bias"):
        value = acfg.get(key)
        if (value not in (None, "none") if key == "bias" else bool(value)):
            raise ValueError(f"adapter_config.json: {key}={value!r} is not supported by the reference")


class LoraLlama(Llama):
    """Llama with frozen base weights and trainable LoRA adapters on the linears that adapter_config.json targets."""

    def __init__(self, cfg, weights, acfg, adapter_tensors, dtype=torch.float32, dropout=0.0):
        super().__init__(cfg, weights, dtype)
        check_adapter_config(acfg)
        for t in self.params.values():
            t.requires_grad_(False)
        self.acfg = acfg
        self.r = acfg["r"]
        self.scaling = lora_scaling(acfg)
        self.dropout = dropout
        self.lora = {}
        remaining = dict(adapter_tensors)
        for module in linear_modules(cfg):
            if not peft_targeted(acfg["target_modules"], module):
                continue
            out_f, in_f = linear_shape(cfg, module)
            a_name, b_name = PEFT_PREFIX + module + ".lora_A.weight", PEFT_PREFIX + module + ".lora_B.weight"
            if a_name not in remaining or b_name not in remaining:
                raise KeyError(f"adapter has no {a_name} / {b_name}")
            a, b = remaining.pop(a_name), remaining.pop(b_name)
            if tuple(a.shape) != (self.r, in_f) or tuple(b.shape) != (out_f, self.r):
                raise ValueError(f"{module}: lora_A {tuple(a.shape)} / lora_B {tuple(b.shape)}, expected "
                                 f"{(self.r, in_f)} / {(out_f, self.r)}")
            self.lora[module] = (a.to(dtype).clone().requires_grad_(True), b.to(dtype).clone().requires_grad_(True))
        if not self.lora:
            raise ValueError(f"target_modules {acfg['target_modules']!r} match no linear of the model")
        if remaining:
            raise KeyError(f"adapter tensors for untargeted modules: {sorted(remaining)[:4]}")

    def parameters(self):
        return [t for module in sorted(self.lora) for t in self.lora[module]]

    def linear(self, x, module):
        y = super().linear(x, module)
        if module not in self.lora:
            return y
        a, b = self.lora[module]
        xd = F.dropout(x, self.dropout, training=True) if self.dropout > 0 else x
        return y + self.scaling * F.linear(F.linear(xd, a), b)

    def adapter_tensors(self):
        out = {}
        for module in sorted(self.lora):
            a, b = self.lora[module]
            out[PEFT_PREFIX + module + ".lora_A.weight"] = a.detach().clone()
            out[PEFT_PREFIX + module + ".lora_B.weight"] = b.detach().clone()
        return out

    def merged_weights(self):
        """The base weights with W + scaling * B @ A for every adapted linear (computed in float64, then cast)."""
        out = {k: v.detach().clone() for k, v in self.params.items()}
        for module, (a, b) in self.lora.items():
            w = out[module + ".weight"]
            out[module + ".weight"] = (w.double() + self.scaling * (b.detach().double() @ a.detach().double())).to(w.dtype)
        return out


def random_adapter(cfg, r, alpha, targets, seed, b_std=0.02, use_rslora=False, dtype=torch.float32,
                   base_model=None, dropout=0.0):
    """A PEFT LoRA adapter (config, tensors). A is kaiming-uniform(a=sqrt(5)) like PEFT's init, i.e. uniform in
    +-1/sqrt(in); B is normal(0, b_std) rather than PEFT's zeros, so that the adapters change the loss from step 0."""
    g = torch.Generator().manual_seed(seed)
    alpha = int(alpha) if float(alpha).is_integer() else alpha  # PEFT writes an integer lora_alpha
    acfg = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "base_model_name_or_path": base_model, "r": r,
            "lora_alpha": alpha, "lora_dropout": dropout, "target_modules": list(targets), "bias": "none",
            "fan_in_fan_out": False, "use_rslora": use_rslora, "modules_to_save": None, "init_lora_weights": True,
            "layers_to_transform": None, "rank_pattern": {}, "alpha_pattern": {}, "inference_mode": True}
    tensors = {}
    for module in linear_modules(cfg):
        if not peft_targeted(acfg["target_modules"], module):
            continue
        out_f, in_f = linear_shape(cfg, module)
        bound = 1.0 / math.sqrt(in_f)
        tensors[PEFT_PREFIX + module + ".lora_A.weight"] = ((torch.rand(r, in_f, generator=g) * 2 - 1) * bound).to(dtype)
        tensors[PEFT_PREFIX + module + ".lora_B.weight"] = (torch.randn(out_f, r, generator=g) * b_std).to(dtype)
    if not tensors:
        raise ValueError(f"targets {targets!r} match no linear of the model")
    return acfg, tensors


# ---------------------------------------------------------------- data
def read_tokens(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) >= 1024 and struct.unpack("<i", raw[:4])[0] == 20240520:
        n = struct.unpack("<i", raw[8:12])[0]
        raw = raw[1024:1024 + 2 * n]
    return torch.frombuffer(bytearray(raw), dtype=torch.int16).to(torch.int64) & 0xFFFF


def train(model, tokens, steps, accumulate, rows, seq_len, lr, weight_decay, optimizer="adamw"):
    if optimizer == "adamw":
        opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=weight_decay)
    else:
        opt = torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay)
    return tessera_run.train_loop(model.loss, opt, tokens, steps, accumulate, rows, seq_len)


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
    tr.add_argument("--save", help="write the trained weights (F32) to this safetensors file (with --adapter: the "
                                   "frozen base)")
    tr.add_argument("--adapter", help="PEFT LoRA dir: train only its adapters on the frozen base")
    tr.add_argument("--lora-dropout", type=float, default=0.0, help="with --adapter: dropout on the adapter input "
                    "(default 0, whatever adapter_config.json says, so that runs are deterministic)")
    tr.add_argument("--save-adapter", help="with --adapter: write the trained adapters as a PEFT dir")
    tr.add_argument("--save-merged", help="with --adapter: write a Hugging Face dir with the adapters merged in")
    ma = sub.add_parser("make-adapter", help="write a random PEFT LoRA dir for a model dir (B non-zero)")
    ma.add_argument("dir")
    ma.add_argument("--model", required=True, help="Hugging Face Llama dir the adapter is for")
    ma.add_argument("--r", type=int, default=8)
    ma.add_argument("--alpha", type=float, default=16)
    ma.add_argument("--targets", default="q_proj,v_proj", help="comma-separated module names")
    ma.add_argument("--seed", type=int, default=0)
    ma.add_argument("--b-std", type=float, default=0.02, help="std of lora_B (PEFT itself initialises B to 0)")
    ma.add_argument("--rslora", action="store_true", help="use_rslora: scaling alpha / sqrt(r)")
    ma.add_argument("--dropout", type=float, default=0.0, help="lora_dropout written to adapter_config.json")
    ma.add_argument("--dtype", default="F32", choices=list(ST_DTYPES))
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
    elif a.cmd == "make-adapter":
        cfg, _ = read_model_dir(a.model)
        targets = [t for t in a.targets.split(",") if t]
        acfg, tensors = random_adapter(cfg, a.r, a.alpha, targets, a.seed, a.b_std, a.rslora, ST_DTYPES[a.dtype],
                                       os.path.abspath(a.model), a.dropout)
        write_adapter_dir(a.dir, acfg, tensors)
    elif a.cmd == "train":
        if a.threads:
            torch.set_num_threads(a.threads)
        cfg, weights = read_model_dir(a.dir)
        if a.adapter:
            acfg, adapter = read_adapter_dir(a.adapter)
            model = LoraLlama(cfg, weights, acfg, adapter, dropout=a.lora_dropout)
        elif a.save_adapter or a.save_merged:
            ap.error("--save-adapter / --save-merged need --adapter")
        else:
            model = Llama(cfg, weights)
        losses = train(model, read_tokens(a.tokens), a.steps, a.accumulate, a.rows, a.seq_len, a.lr,
                       a.weight_decay, a.optimizer)
        if a.save:
            write_safetensors(a.save, {k: v.detach() for k, v in model.params.items()})
        if a.save_adapter:
            write_adapter_dir(a.save_adapter, model.acfg, model.adapter_tensors())
        if a.save_merged:
            os.makedirs(a.save_merged, exist_ok=True)
            json.dump(cfg, open(os.path.join(a.save_merged, "config.json"), "w"), indent=2)
            write_safetensors(os.path.join(a.save_merged, "model.safetensors"), model.merged_weights())
        print(json.dumps({"losses": losses}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
