#!/usr/bin/env python3
"""tessera's BLIP-2 (models/blip2.hpp) and its caption data (data/caption_batches.hpp) trained against Hugging Face
transformers' Blip2ForConditionalGeneration, over OPT (--lm opt, EXE blip2-opt-fp32) or Flan-T5 (--lm t5, EXE
blip2-t5-fp32), on a captions.jsonl with PNG images written here.

The model directory is written by transformers' own save_pretrained: a small BLIP-2 (a 2-layer vision model on 32x32
images in 8x8 patches, a 2-layer Q-Former with cross-attention in layer 0, 4 query tokens; a 2-block OPT, or a Flan-T5
layout with 2 encoder and 3 decoder blocks and its own lm_head), every dropout 0, and every parameter drawn at random
(seeded), query_tokens and the key third of each qkv bias included, so that no part is at a trivial value. Its
image_token_index is the last id of the vocabulary. With --sharded in shards of 40KB (model.safetensors.index.json).

data/captions.jsonl holds --captions rows {"image": "images/NNNN.png", "input_ids": [...]} (32x32 RGB PNGs of
random bytes; captions of 2..9 random ids in [2, vocab - 1), seeded numpy). A batch is tessera's documented order
(RowOrder, one rank, no accumulation). transformers gets what its Blip2Processor would give for the same rows:
pixel_values = (pixels / 255 - mean) / std with BLIP-2's CLIP mean and std (tessera's defaults without a
preprocessor_config.json), input_ids = 4 image tokens followed by the caption, padded with the LM's pad id (OPT 1,
T5 0) to the batch's longest, attention_mask 1 over the image tokens and the caption, and labels=input_ids (the
processor's, pads included): tessera runs with caption_targets=processor (the caption-only loss, its default, is
check_lab_batches.py's). The reference loss is model(pixel_values, input_ids, attention_mask, labels).loss.

--mode train: --steps optimizer steps of tessera and of transformers + torch.optim.AdamW (lr 1e-3, weight_decay
  0.01) on the same batches; per-step losses within --tol relative. tessera's saved directory must load with
  from_pretrained without missing, unexpected or mismatched keys, every parameter within --weight-tol of
  transformers' trained one (max |difference| / max |weight|), the weights moved, and its logits and loss on batch 0
  within --weight-tol of transformers' trained model's. The key biases are the exception (OPT's k_proj.bias, the
  Q-Former's attention.key.bias, the key third of the vision model's qkv.bias): their gradient is zero in exact
  arithmetic (adding one vector to every key adds a constant to each query's scores, which softmax ignores), so
  AdamW moves them by up to lr per step on rounding noise, differently on each side; they are checked to have moved
  at most lr * steps, not against each other.
--freeze PARTS (train mode): tessera gets freeze=PARTS, and transformers trains with requires_grad_(False) on those
  sub-modules (and AdamW over the rest); the frozen tensors must come back exactly as they started.
--mode pixels (EXE is tests' image_dump): the captions' images made --image-size pixels square (default 45x37: resized
  to 32x32 with BLIP-2's bicubic, or the model's size with --image-size 32) as CaptionBatches prepares them (the
  model dir has no preprocessor_config.json: the family's defaults) against transformers' BlipImageProcessor with
  size 32x32 and its defaults (bicubic, antialiased by its torchvision backend, 1/255, CLIP mean and std), within
  --tol (default 1e-5) per value.
--mode lora (EXE is blip2-t5-lora-fp32 or another Lora binary): the adapter is made by
  peft.get_peft_model(model, LoraConfig(r 8, lora_alpha 16, target_modules --targets (q,v: the T5's self- and
  cross-attention, by PEFT's suffix rule; none of the vision model's or the Q-Former's linears), lora_dropout 0))
  with lora_B drawn N(0, 0.02^2) instead of zeros, and written by PEFT's save_pretrained. tessera gets
  adapter=ADAPTER lora_dropout=0 (the rest from its adapter_config.json); PEFT trains
  PeftModel.from_pretrained(model, ADAPTER, is_trainable=True) with AdamW (lr 3e-3) over its trainable tensors on
  the same batches. Per-step losses within --tol (1e-4 here); tessera's saved adapter dir read by PEFT (r,
  lora_alpha, target_modules), its tensors PEFT's by name and shape, with PEFT's trained values within --tol.

usage: check_blip2_against_transformers.py EXE --lm opt|t5 [--mode train|lora|pixels] [--image-size HxW] [--captions N] [--rows R] [--steps S]
                                          [--lr LR] [--tol T] [--weight-tol W] [--sharded] [--freeze PARTS]
                                          [--keep DIR] [--expect-mismatch] [--tessera-extra key=value ...]
Exit 0 when every check passes, 1 when one fails, 2 when tessera or transformers did not run. With
--expect-mismatch (negative controls) exit 0 only when tessera ran and the comparison failed.
"""
import argparse
import json
import os
import subprocess
import sys
import warnings
import zlib
import struct

import numpy as np
import torch

warnings.filterwarnings("ignore")
from transformers import Blip2Config, Blip2ForConditionalGeneration, OPTConfig, T5Config  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tessera_run  # noqa: E402

VOCAB, QUERIES, SIZE, SEQ_LEN = 300, 4, 32, 16
MEAN = np.array([0.48145466, 0.4578275, 0.40821073])
STD = np.array([0.26862954, 0.26130258, 0.27577711])
VISION = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, image_size=SIZE,
              patch_size=8, attention_dropout=0.0)
QFORMER = dict(hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
               cross_attention_frequency=2, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def text_config(lm):
    if lm == "opt":
        return OPTConfig(vocab_size=VOCAB, hidden_size=32, ffn_dim=64, num_hidden_layers=2, num_attention_heads=4,
                         max_position_embeddings=64, word_embed_proj_dim=32, dropout=0.0, attention_dropout=0.0,
                         layerdrop=0.0, pad_token_id=1)
    cfg = T5Config(vocab_size=VOCAB, d_model=32, d_kv=8, d_ff=72, num_layers=2, num_decoder_layers=3, num_heads=4,
                   relative_attention_num_buckets=8, relative_attention_max_distance=20,
                   feed_forward_proj="gated-gelu", dropout_rate=0.0, decoder_start_token_id=0)
    cfg.tie_word_embeddings = False  # T5Config's __post_init__ forces True; Flan-T5 has its own lm_head
    return cfg


def pad_id(lm):
    return 1 if lm == "opt" else 0


def make_model_dir(path, lm, sharded):
    torch.manual_seed(11)
    cfg = Blip2Config(vision_config=VISION, qformer_config=QFORMER, text_config=text_config(lm).to_dict(),
                      num_query_tokens=QUERIES, image_token_index=VOCAB - 1)
    if lm == "t5":
        cfg.text_config.tie_word_embeddings = False
    model = Blip2ForConditionalGeneration(cfg)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "norm" in name.lower() and name.endswith("weight"):
                p.copy_(1.0 + 0.1 * torch.randn_like(p))
            elif lm == "t5" and name == "language_model.shared.weight":
                p.copy_(torch.randn_like(p))  # T5 draws shared N(0, 1)
            else:
                p.copy_(0.05 * torch.randn_like(p))
        if lm == "t5":  # a T5 checkpoint's copies equal shared, and from_pretrained ties them
            model.language_model.encoder.embed_tokens.weight.copy_(model.language_model.shared.weight)
            model.language_model.decoder.embed_tokens.weight.copy_(model.language_model.shared.weight)
    model.save_pretrained(path, max_shard_size="40KB") if sharded else model.save_pretrained(path)
    index = os.path.exists(os.path.join(path, "model.safetensors.index.json"))
    if index != sharded:
        raise RuntimeError(f"save_pretrained wrote {'a' if index else 'no'} model.safetensors.index.json")


def write_png(path, rgb):
    """A plain RGB PNG (no dependency on an image library)."""
    h, w, _ = rgb.shape
    raw = b"".join(b"\x00" + rgb[y].tobytes() for y in range(h))

    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    with open(path, "wb") as f:
        f.write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)) +
                chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


def make_captions(data_dir, n, seed=3, shape=(SIZE, SIZE)):
    """n rows written to data_dir/captions.jsonl and images/ (shape: height, width); returns [(RGB bytes (H, W, 3),
    ids)] in order."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(data_dir, "images"), exist_ok=True)
    rows = []
    with open(os.path.join(data_dir, "captions.jsonl"), "w") as f:
        for i in range(n):
            rgb = rng.integers(0, 256, size=(shape[0], shape[1], 3), dtype=np.uint8)
            name = f"images/{i:04d}.png"
            write_png(os.path.join(data_dir, name), rgb)
            ids = rng.integers(2, VOCAB - 1, size=int(rng.integers(2, 10))).tolist()
            f.write(json.dumps({"image": name, "input_ids": ids}) + "\n")
            rows.append((rgb, ids))
    return rows


def normalized(rgb):
    """An image of the model's size as Blip2Processor gives it: (3, S, S), (pixels / 255 - mean) / std."""
    return torch.tensor(((rgb.astype(np.float64) / 255.0 - MEAN) / STD).transpose(2, 0, 1), dtype=torch.float32)


def batch(rows, step, batch_size, lm):
    """Step `step`'s rows in RowOrder (one rank, no accumulation), as Blip2Processor gives them, with
    labels=input_ids."""
    chunks = len(rows) // batch_size
    p = step % chunks
    part = rows[p * batch_size:(p + 1) * batch_size]
    t = max(len(ids) for _, ids in part)
    pad = pad_id(lm)
    image = [VOCAB - 1] * QUERIES
    input_ids = torch.tensor([image + ids + [pad] * (t - len(ids)) for _, ids in part])
    mask = torch.tensor([[1] * (QUERIES + len(ids)) + [0] * (t - len(ids)) for _, ids in part])
    pixels = torch.stack([normalized(rgb) for rgb, _ in part])
    return dict(pixel_values=pixels, input_ids=input_ids, attention_mask=mask, labels=input_ids.clone())


def frozen_names(model, parts):
    return {n for n, _ in model.named_parameters() if any(n == p or n.startswith(p + ".") for p in parts)}


def train(model, rows, a, trainable=None):
    """AdamW over the trainable tensors (all but --freeze's, or `trainable`'s names), one batch per step."""
    frozen = frozen_names(model, a.freeze_parts)
    for n, p in model.named_parameters():
        p.requires_grad_(n in trainable if trainable is not None else n not in frozen)
    model.train()  # every dropout is 0: train mode computes what tessera does
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=a.lr, weight_decay=0.01)
    losses = []
    for s in range(a.steps):
        loss = model(**batch(rows, s, a.rows, a.lm)).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    model.eval()
    return losses


def compare_outputs(what, mine_model, their_model, rows, a, tol):
    b = batch(rows, 0, a.rows, a.lm)
    with torch.no_grad():
        mine, theirs = mine_model(**b), their_model(**b)
    rel = tessera_run.rel_diff(mine.logits, theirs.logits)
    loss_rel = abs(mine.loss.item() - theirs.loss.item()) / abs(theirs.loss.item())
    print(f"batch 0 after training, {what}: logits worst relative difference {rel:.2e}; loss "
          f"{mine.loss.item():.7f} against {theirs.loss.item():.7f}, rel {loss_rel:.2e} (tolerance {tol:g})")
    return rel <= tol and loss_rel <= tol


def key_bias(name, t):
    """The elements of tensor `name` whose gradient is zero in exact arithmetic (a boolean mask), or None."""
    if name.endswith("k_proj.bias") or name.endswith("attention.key.bias"):
        return torch.ones_like(t, dtype=torch.bool)
    if name.endswith("self_attn.qkv.bias"):
        mask = torch.zeros_like(t, dtype=torch.bool)
        third = t.numel() // 3
        mask[third:2 * third] = True
        return mask
    return None


def check_train(a, d, model_dir, rows):
    args = dict(model_dir=model_dir, data=os.path.join(d, "data"), batch_size=a.rows, max_steps=a.steps, lr=a.lr,
                weight_decay=0.01, threads=1, device="cpu", metrics=os.path.join(d, "metrics.jsonl"),
                save_dir=os.path.join(d, "saved"), seq_len=SEQ_LEN,
                caption_targets="processor")
    if a.freeze_parts:
        args["freeze"] = ",".join(a.freeze_parts)
    ours = tessera_run.run(a.exe, args, a.tessera_extra)
    if ours is None:
        return None
    model = Blip2ForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32)
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    theirs = train(model, rows, a)
    worst = tessera_run.compare_losses(ours, theirs)
    mine, ok = tessera_run.load_saved_dir(Blip2ForConditionalGeneration, args["save_dir"])
    if mine is None:
        return False
    trained = dict(mine.named_parameters())
    if set(trained) != set(start):
        print(f"parameter names differ: only tessera {sorted(set(trained) - set(start))[:4]}, "
              f"only transformers {sorted(set(start) - set(trained))[:4]}")
        ok = False
    frozen = frozen_names(model, a.freeze_parts)
    worst_w, worst_name, moved = 0.0, "", 0.0
    bound = a.lr * a.steps * 1.001
    for name, t in model.named_parameters():
        if name not in trained:
            continue
        if name in frozen:
            if not torch.equal(trained[name], start[name]):
                print(f"{name} is frozen (freeze={','.join(a.freeze_parts)}) but tessera changed it")
                ok = False
            continue
        got, want, begin = trained[name].detach().double(), t.detach().double(), start[name].double()
        noise = key_bias(name, t)
        if noise is not None:
            drift = max((got - begin)[noise].abs().max().item(), (want - begin)[noise].abs().max().item())
            if drift > bound:
                print(f"{name}: the key bias moved by {drift:.2e}, more than lr * steps = {bound:g}: its gradient "
                      f"is not rounding noise")
                ok = False
            keep = ~noise
            if not keep.any():
                continue
            got, want = got[keep], want[keep]
        rel = tessera_run.rel_diff(got, want)
        worst_w, worst_name = max((worst_w, worst_name), (rel, name))
        moved = max(moved, (trained[name].detach().double() - start[name].double()).abs().max().item())
    print(f"losses: {len(ours)} of {a.steps} steps, worst relative difference {worst:.2e} (tolerance {a.tol:g}); "
          f"final weights: {len(trained)} tensors ({len(frozen)} frozen), worst relative difference {worst_w:.2e} "
          f"({worst_name}; tolerance {a.weight_tol:g}), moved from the initial ones by up to {moved:.2e}")
    ok = compare_outputs("tessera's saved dir vs transformers' trained model", mine, model, rows, a,
                         a.weight_tol) and ok
    return ok and len(ours) == a.steps and worst <= a.tol and worst_w <= a.weight_tol and moved > 0


def check_lora(a, d, model_dir, rows):
    from peft import PeftConfig, PeftModel
    from safetensors.torch import load_file
    import peft_adapter
    targets = [t for t in a.targets.split(",") if t]
    adapter = os.path.join(d, "adapter")
    peft_adapter.make_adapter_dir(adapter, Blip2ForConditionalGeneration.from_pretrained(model_dir), 8, 16, targets,
                                  None, 11)
    args = dict(model_dir=model_dir, data=os.path.join(d, "data"), batch_size=a.rows, max_steps=a.steps, lr=a.lr,
                weight_decay=0.01, threads=1, device="cpu", metrics=os.path.join(d, "metrics.jsonl"),
                save_dir=os.path.join(d, "saved"), seq_len=SEQ_LEN, adapter=adapter, lora_dropout=0,
                caption_targets="processor")
    ours = tessera_run.run(a.exe, args, a.tessera_extra)
    if ours is None:
        return None
    peft_model = PeftModel.from_pretrained(Blip2ForConditionalGeneration.from_pretrained(model_dir), adapter,
                                           is_trainable=True)
    initial = peft_adapter.adapter_tensors(peft_model)
    theirs = train(peft_model, rows, a, [n for n, p in peft_model.named_parameters() if p.requires_grad])
    worst = tessera_run.compare_losses(ours, theirs)
    ok = len(ours) == a.steps and worst <= a.tol
    print(f"losses: {len(ours)} of {a.steps} steps, worst relative difference {worst:.2e} (tolerance {a.tol:g})")
    saved = args["save_dir"]
    try:
        scfg = PeftConfig.from_pretrained(saved)
    except Exception as e:  # noqa: BLE001 - any refusal by PEFT is a failed check
        print(f"  PEFT cannot read tessera's adapter_config.json: {e}")
        return False
    ok = peft_adapter.saved_config_ok(scfg, {"r": 8, "lora_alpha": 16, "peft_type": "LORA"}, targets) and ok
    got = load_file(os.path.join(saved, "adapter_model.safetensors"))
    want = peft_adapter.adapter_tensors(peft_model)
    if set(got) != set(want):
        print(f"  saved tensor names differ: only tessera {sorted(set(got) - set(want))[:4]}, "
              f"only PEFT {sorted(set(want) - set(got))[:4]}")
        return False
    worst_w = max(tessera_run.rel_diff(got[k], want[k]) for k in want)
    moved = max((got[k].double() - initial[k].double()).abs().max().item() for k in want)
    print(f"saved adapters: {len(got)} tensors, worst relative difference to PEFT's trained ones {worst_w:.2e}; "
          f"moved from the initial adapters by up to {moved:.2e}")
    return ok and worst_w <= a.tol and moved > 0


def check_pixels(a, d, model_dir):
    from transformers import BlipImageProcessor
    height, width = (int(x) for x in a.image_size.split("x"))
    rows = make_captions(os.path.join(d, "data"), a.captions, shape=(height, width))
    out = os.path.join(d, "pixels.safetensors")
    proc = subprocess.run([a.exe, model_dir, os.path.join(d, "data"), out, "--blip2"], stderr=subprocess.PIPE,
                          text=True, timeout=120)
    if proc.returncode != 0:
        print(proc.stderr[-4000:])
        print("ERROR: image_dump failed")
        return None
    from safetensors.torch import load_file
    ours = load_file(out)["pixels"]
    processor = BlipImageProcessor(size={"height": SIZE, "width": SIZE})
    theirs = processor([rgb for rgb, _ in rows], return_tensors="pt")["pixel_values"]
    if ours.shape != theirs.shape:
        print(f"shapes differ: tessera {tuple(ours.shape)}, transformers {tuple(theirs.shape)}")
        return False
    diff = (ours - theirs).abs()
    print(f"{len(rows)} images {height}x{width} -> {SIZE}x{SIZE}: max |difference| {diff.max().item():.3e}, mean "
          f"{diff.mean().item():.3e} (tolerance {a.tol:g})")
    return diff.max().item() <= a.tol


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exe")
    ap.add_argument("--lm", required=True, choices=["opt", "t5"])
    ap.add_argument("--mode", default="train", choices=["train", "lora", "pixels"])
    ap.add_argument("--image-size", default="45x37", help="pixels: the images' height x width")
    ap.add_argument("--targets", default="q,v", help="lora: PEFT's target_modules")
    ap.add_argument("--captions", type=int, default=24)
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=None, help="default 1e-3 (train), 3e-3 (lora)")
    ap.add_argument("--tol", type=float, default=None, help="default 1e-5 (train), 1e-4 (lora)")
    ap.add_argument("--weight-tol", type=float, default=1e-4, help="the saved weights and logits")
    ap.add_argument("--sharded", action="store_true", help="the model dir in 40KB shards (index.json)")
    ap.add_argument("--freeze", default="", help="comma-separated sub-modules both sides freeze")
    ap.add_argument("--keep", help="work in this dir instead of a temporary one, and keep it (debugging)")
    ap.add_argument("--tessera-extra", action="append", default=[],
                    help="key=value for tessera only, replacing the script's own value of that key")
    ap.add_argument("--expect-mismatch", action="store_true",
                    help="negative control: exit 0 only when tessera ran fine and the comparison FAILED")
    a = ap.parse_args()
    a.freeze_parts = [p for p in a.freeze.split(",") if p]
    lora = a.mode == "lora"
    a.lr = a.lr if a.lr is not None else (3e-3 if lora else 1e-3)
    a.tol = a.tol if a.tol is not None else (1e-4 if lora else 1e-5)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)

    def run(d):
        model_dir = os.path.join(d, "model")
        make_model_dir(model_dir, a.lm, a.sharded)
        if a.mode == "pixels":
            return check_pixels(a, d, model_dir)
        rows = make_captions(os.path.join(d, "data"), a.captions)
        return (check_lora if lora else check_train)(a, d, model_dir, rows)

    return tessera_run.verdict(tessera_run.in_work_dir(a.keep, run), a.expect_mismatch)


if __name__ == "__main__":
    sys.exit(main())
