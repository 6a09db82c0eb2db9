#!/usr/bin/env python3
"""One forward and backward of a tessera model family (models/llama.hpp, opt.hpp, t5.hpp, vit.hpp, blip2.hpp) against
Hugging Face transformers on the same weights and inputs: the loss and the gradient of every parameter.

family_dump (tests/models/family_dump.cpp) builds the family's parameters from a seed (norm weights and biases
perturbed away from 1 and 0 so that they are tested), saves them as a Hugging Face directory with the family's
write_config and ParamStore::save, draws tokens and next-token targets (2 rows of 16, token 1, OPT's padding_idx,
among them), runs the family's forward program on plain tensors (DirectRunner) and writes the loss and every
parameter's gradient. Here transformers' AutoModelForCausalLM.from_pretrained loads that directory (fp32,
attn_implementation "sdpa"; every tensor of the file used and none missing), computes the logits of the same
tokens, the mean cross-entropy of the logits against the given targets over all positions in fp32 (tessera's
convention; transformers' own labels= would shift them once more), and backward. For ViT (--family vit) the
inputs are N(0, 1) pixels and class ids, the model AutoModelForImageClassification, the loss the mean cross-entropy
of the logits against the class ids (what its labels= computes). For T5 (--family t5) the inputs are encoder token ids
with an attention mask (one row padded) and labels (one row ended by -100), the model AutoModelForSeq2SeqLM, and the
loss what its labels= computes (labels shifted right into the decoder, -100 ignored): tessera's convention too.
For BLIP-2 (--family blip2-opt or blip2-t5) the inputs are N(0, 1) pixels and captions (one row padded), the model
Blip2ForConditionalGeneration given what Blip2Processor gives (num_query_tokens image tokens, then the caption; the
mask 1 over the image tokens), and the loss what labels=input_ids computes, the labs' step: tessera's convention
when a batch has no labels of its own.

Checks: the loss within --tol relative; for every parameter, max |tessera - transformers| <= --tol * max
|transformers' gradient| of that tensor; the same parameter names on both sides. A gradient that is zero in exact
arithmetic holds only rounding noise, which no relative tolerance fits (attention's k_proj.bias: shifting every key
by the same vector adds one constant to each query's scores, which softmax ignores): a tensor whose max |gradient|
is below ZERO (1e-6) of the model's largest is checked to be below that on both sides instead.

usage: check_family_forward.py FAMILY_DUMP --family llama|opt|t5|vit|blip2-opt|blip2-t5 --config JSON [--seed S] [--tol 1e-5]
                               [--perturb --expect-mismatch]
JSON holds the config.json keys (model_type defaults to the family). --perturb makes family_dump compute with one
bias (Llama: one norm weight) scaled by 1.01 after saving: a negative control, which must see a mismatch. Exit 0
when every check passes, 1 when one fails, 2 when family_dump or transformers' loading fails. With
--expect-mismatch exit 0 only when family_dump ran and the comparison failed.
"""
import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import warnings

import torch
import torch.nn.functional as F

warnings.filterwarnings("ignore")
from safetensors.torch import load_file  # noqa: E402
from transformers import (AutoModelForCausalLM, AutoModelForImageClassification, AutoModelForSeq2SeqLM,  # noqa: E402
                          Blip2ForConditionalGeneration)
from transformers.utils import logging as hf_logging  # noqa: E402

META = ("tokens", "targets", "pixels", "labels", "input_ids", "attention_mask", "caption_ids", "caption_mask", "loss")
ZERO = 1e-6

# transformers 5 loads ViT checkpoints (whose tensor names tessera writes, as save_pretrained still does) into
# renamed modules; the same renames map tessera's names onto the loaded model's parameters.
RENAMES = [
    (re.compile(r"^vit\.encoder\.layer\.(\d+)\.attention\.attention\.(query|key|value)\."),
     lambda m: f"vit.layers.{m[1]}.attention.{m[2][0]}_proj."),
    (re.compile(r"^vit\.encoder\.layer\.(\d+)\.attention\.output\.dense\."), lambda m: f"vit.layers.{m[1]}.attention.o_proj."),
    (re.compile(r"^vit\.encoder\.layer\.(\d+)\.intermediate\.dense\."), lambda m: f"vit.layers.{m[1]}.mlp.fc1."),
    (re.compile(r"^vit\.encoder\.layer\.(\d+)\.output\.dense\."), lambda m: f"vit.layers.{m[1]}.mlp.fc2."),
    (re.compile(r"^vit\.encoder\.layer\.(\d+)\.layernorm_"), lambda m: f"vit.layers.{m[1]}.layernorm_"),
]


def loaded_name(name, theirs):
    """tessera's (checkpoint) name as the loaded model calls the parameter."""
    if name in theirs:
        return name
    for pattern, repl in RENAMES:
        renamed = pattern.sub(repl, name, count=1)
        if renamed != name:
            return renamed
    return name


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump")
    ap.add_argument("--family", required=True, choices=["llama", "opt", "t5", "vit", "blip2-opt", "blip2-t5"])
    ap.add_argument("--config", required=True, help="config.json keys as one JSON object")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--expect-mismatch", action="store_true")
    a = ap.parse_args()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    cfg = json.loads(a.config)
    cfg.setdefault("model_type", "blip-2" if a.family.startswith("blip2") else a.family)
    with tempfile.TemporaryDirectory() as d:
        cfg_path, out = os.path.join(d, "config.json"), os.path.join(d, "out")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        cmd = [a.dump, a.family, cfg_path, out, str(a.seed)] + (["--perturb"] if a.perturb else [])
        proc = subprocess.run(cmd, stderr=subprocess.PIPE, text=True, timeout=240)
        if proc.returncode != 0:
            print(proc.stderr[-4000:])
            print(f"ERROR: {' '.join(cmd)} exited with {proc.returncode}")
            return 2
        ours = load_file(os.path.join(out, "grads.safetensors"))
        try:
            auto = {"vit": AutoModelForImageClassification, "t5": AutoModelForSeq2SeqLM,
                    "blip2-opt": Blip2ForConditionalGeneration,
                    "blip2-t5": Blip2ForConditionalGeneration}.get(a.family, AutoModelForCausalLM)
            model, info = auto.from_pretrained(
                os.path.join(out, "model"), dtype=torch.float32, attn_implementation="sdpa", output_loading_info=True)
        except Exception as e:  # noqa: BLE001: any loading failure is tessera's file at fault
            print(f"ERROR: transformers cannot load the directory family_dump saved: {e}")
            return 2
    unused = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if unused:
        print(f"ERROR: transformers loaded {type(model).__name__} with {unused}")
        return 2
    ok = compare(model, ours, a.tol)
    print("PASS" if ok else "FAIL")
    if a.expect_mismatch:
        print("negative control: " + ("mismatch seen, as expected" if not ok else "NO mismatch: the check is blind"))
        return 0 if not ok else 1
    return 0 if ok else 1


def compare(model, ours, tol):
    model.eval()  # no dropout; tessera computes none
    if "caption_ids" in ours:  # BLIP-2: Blip2Processor's input_ids (image tokens first), labels=input_ids
        n, q = ours["caption_ids"].shape[0], model.config.num_query_tokens
        ids = torch.cat([torch.full((n, q), model.config.image_token_index), ours["caption_ids"]], 1)
        mask = torch.cat([torch.ones(n, q, dtype=torch.long), ours["caption_mask"]], 1)
        loss = model(pixel_values=ours["pixels"], input_ids=ids, attention_mask=mask, labels=ids).loss
    elif "input_ids" in ours:
        loss = model(input_ids=ours["input_ids"], attention_mask=ours["attention_mask"], labels=ours["labels"]).loss
    elif "pixels" in ours:
        logits = model(pixel_values=ours["pixels"]).logits
        loss = F.cross_entropy(logits.float(), ours["labels"])
    else:
        logits = model(input_ids=ours["tokens"]).logits
        loss = F.cross_entropy(logits.float().reshape(-1, logits.shape[-1]), ours["targets"].reshape(-1))
    loss.backward()
    mine = float(ours["loss"][0])
    loss_rel = abs(mine - loss.item()) / abs(loss.item())
    ok = loss_rel <= tol
    print(f"{type(model).__name__}: loss tessera {mine:.8f}, transformers {loss.item():.8f}, "
          f"relative difference {loss_rel:.2e} (tolerance {tol:g})")
    loaded = dict(model.named_parameters())  # a tied lm_head appears once, as the embedding
    ours = {loaded_name(k, loaded) if k not in META else k: v for k, v in ours.items()}
    theirs = loaded
    names_ours = set(ours) - set(META)
    if names_ours != set(theirs):
        print(f"parameter names differ: only tessera {sorted(names_ours - set(theirs))}, "
              f"only transformers {sorted(set(theirs) - names_ours)}")
        ok = False
    worst = (0.0, "")
    common = sorted(set(theirs) & names_ours)
    largest = max((theirs[n].grad.abs().max().item() for n in common if theirs[n].grad is not None), default=0.0)
    for name in common:
        g = theirs[name].grad
        mine_g = ours[name]
        if g is None or mine_g.shape != g.shape:
            print(f"{name:55s} shape tessera {tuple(mine_g.shape)}, transformers "
                  f"{None if g is None else tuple(g.shape)}")
            ok = False
            continue
        scale = g.abs().max().item()
        diff = (mine_g - g).abs().max().item()
        if scale < ZERO * largest:  # zero in exact arithmetic: both sides must be rounding noise
            mine_scale = mine_g.abs().max().item()
            bad = not mine_scale < ZERO * largest
            ok = ok and not bad
            verdict = "not zero on tessera's side  MISMATCH" if bad else "zero up to rounding on both sides"
            print(f"{name:55s} max|g| {scale:.3e}  tessera {mine_scale:.3e}: {verdict}")
            continue
        rel = diff / scale
        worst = max(worst, (rel, name))
        bad = not rel <= tol
        ok = ok and not bad
        print(f"{name:55s} max|g| {scale:.3e}  max diff {diff:.3e}  relative {rel:.2e}" + ("  MISMATCH" if bad else ""))
    print(f"gradients: the largest relative difference is {worst[0]:.2e} ({worst[1]}), tolerance {tol:g} of each "
          f"tensor's max |gradient|")
    return ok


if __name__ == "__main__":
    sys.exit(main())
