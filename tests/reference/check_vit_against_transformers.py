#!/usr/bin/env python3
"""tessera's ViT (models/vit.hpp) and its image data (data/image_batches.hpp) against Hugging Face transformers'
ViTForImageClassification and ViTImageProcessor, on a directory of PNG images and labels.jsonl written here.

The model directory is written by transformers' own save_pretrained (a small ViT, seeded) together with
ViTImageProcessor's preprocessor_config.json; the images are random RGB PNGs (PIL), with labels.jsonl naming them
and their classes.

--mode pixels (EXE is image_dump): tessera's prepared images (resized to image_size when their size differs,
  scaled by 1/255, normalized with the processor's mean and std) against ViTImageProcessor's pixel_values for every
  image, within --tol: transformers' default backend resizes with torchvision, whose CPU path is ATen's antialiased
  8-bit kernel, the one tessera calls, so resized images agree exactly too. (PIL's own resize, the processor's
  fallback without torchvision, differs by one 8-bit level on ~15% of the values.)
--mode train (EXE is a ViT example binary): --steps optimizer steps of tessera and of transformers + torch.optim.AdamW
  on the same rows in tessera's documented order (RowOrder: micro-batch c holds rows [p*G, (p+1)*G), p = c mod
  floor(N/G)), images of the model's size; per-step losses within --tol relative, and tessera's saved directory,
  loaded by from_pretrained, within --weight-tol of transformers' trained weights (max |difference| / max |weight|).
  The saved directory's image processor (preprocessor_config.json, copied from the model dir) must load and equal
  the original's. The key biases are the exception: their gradient is zero in exact arithmetic (adding one vector to every key adds
  a constant to each query's scores, which softmax ignores), so AdamW moves them by up to lr per step on rounding
  noise, differently on each side; they are checked to have moved at most lr * steps, not against each other.

usage: check_vit_against_transformers.py EXE --mode pixels|train [--images N] [--rows R] [--steps S] [--tol T]
                                         [--resize] [--expect-mismatch] [--tessera-extra key=value ...]
Exit 0 when every check passes, 1 when one fails, 2 when tessera or transformers did not run. With
--expect-mismatch (negative controls) exit 0 only when tessera ran and the comparison failed.
"""
import argparse
import json
import os
import subprocess
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
from PIL import Image  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import ViTConfig, ViTForImageClassification, ViTImageProcessor  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tessera_run  # noqa: E402

SIZE, LABELS = 32, 5
CONFIG = dict(hidden_size=64, num_hidden_layers=2, num_attention_heads=4, intermediate_size=128, image_size=SIZE,
              patch_size=8, num_labels=LABELS, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def make_model_dir(path, resample):
    torch.manual_seed(11)
    ViTForImageClassification(ViTConfig(**CONFIG)).save_pretrained(path)
    ViTImageProcessor(size={"height": SIZE, "width": SIZE}, resample=resample).save_pretrained(path)


def make_images(data_dir, n, resize, seed=3):
    """n RGB PNGs (sizes other than SIZE when resize) and labels.jsonl; returns [(path, label)] in file order."""
    rng = np.random.default_rng(seed)
    os.makedirs(os.path.join(data_dir, "images"))
    rows = []
    for i in range(n):
        h, w = (int(rng.integers(20, 70)), int(rng.integers(20, 70))) if resize else (SIZE, SIZE)
        # Smooth content plus noise: resizing filters then matter, as on photographs.
        base = rng.integers(0, 256, size=(4, 4, 3)).astype(np.float64)
        smooth = np.array(Image.fromarray(base.astype(np.uint8)).resize((w, h), Image.BILINEAR), dtype=np.float64)
        pixels = np.clip(smooth + rng.normal(0, 20, size=(h, w, 3)), 0, 255).astype(np.uint8)
        name = f"images/{i:04d}.png"
        Image.fromarray(pixels).save(os.path.join(data_dir, name))
        rows.append((name, int(rng.integers(0, LABELS))))
    with open(os.path.join(data_dir, "labels.jsonl"), "w") as f:
        for name, label in rows:
            f.write(json.dumps({"image": name, "label": label}) + "\n")
    return [(os.path.join(data_dir, name), label) for name, label in rows]


def processed(processor, rows):
    images = [Image.open(p).convert("RGB") for p, _ in rows]
    return processor(images, return_tensors="pt")["pixel_values"], torch.tensor([lab for _, lab in rows])


def check_pixels(a, d, model_dir, rows):
    out = os.path.join(d, "pixels.safetensors")
    proc = subprocess.run([a.exe, model_dir, os.path.join(d, "data"), out], stderr=subprocess.PIPE, text=True,
                          timeout=120)
    if proc.returncode != 0:
        print(proc.stderr[-4000:])
        print("ERROR: image_dump failed")
        return None
    ours = load_file(out)
    theirs, labels = processed(ViTImageProcessor.from_pretrained(model_dir), rows)
    if ours["pixels"].shape != theirs.shape or not torch.equal(ours["labels"], labels):
        print(f"shapes or labels differ: tessera {tuple(ours['pixels'].shape)}, transformers {tuple(theirs.shape)}")
        return False
    diff = (ours["pixels"] - theirs).abs()
    off = (diff > a.tol).double().mean().item()
    print(f"{len(rows)} images ({'resized' if a.resize else 'of the model size'}): max |difference| "
          f"{diff.max().item():.3e}, mean {diff.mean().item():.3e}, {100 * off:.3f}% of values beyond {a.tol:g}")
    return diff.max().item() <= a.tol


def check_train(a, d, model_dir, rows):
    metrics, saved = os.path.join(d, "metrics.jsonl"), os.path.join(d, "saved")
    lr, wd = 1e-3, 0.01
    args = dict(model_dir=model_dir, data=os.path.join(d, "data"), batch_size=a.rows, max_steps=a.steps, lr=lr,
                weight_decay=wd, threads=1, device="cpu", metrics=metrics, save_dir=saved)
    ours = tessera_run.run(a.exe, args, a.tessera_extra)
    if ours is None:
        return None
    processor = ViTImageProcessor.from_pretrained(model_dir)
    model = ViTForImageClassification.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")
    model.train()  # dropout is 0: train mode computes what tessera does
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=wd)
    chunks = len(rows) // a.rows
    theirs = []
    for s in range(a.steps):
        p = s % chunks
        pixels, labels = processed(processor, rows[p * a.rows:(p + 1) * a.rows])
        loss = model(pixel_values=pixels, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        theirs.append(loss.item())
    worst = tessera_run.compare_losses(ours, theirs)
    trained = dict(ViTForImageClassification.from_pretrained(saved, dtype=torch.float32).named_parameters())
    # The saved dir carries the model dir's image processor: it prepares images as the original did.
    reloaded = ViTImageProcessor.from_pretrained(saved)
    same_processor = reloaded.to_dict() == processor.to_dict()
    if not same_processor:
        print("the saved directory's preprocessor_config.json differs from the model dir's")
    worst_w, worst_name, moved, noise_ok = 0.0, "", 0.0, True
    for name, t in model.named_parameters():
        mine = trained[name].detach().double()
        if name.endswith("k_proj.bias"):
            bound = lr * a.steps * 1.001
            drift = max((mine - start[name].double()).abs().max().item(),
                        (t.detach().double() - start[name].double()).abs().max().item())
            noise_ok = noise_ok and drift <= bound
            continue
        rel = ((mine - t.detach().double()).abs().max() / t.detach().abs().max()).item()
        worst_w, worst_name = max((worst_w, worst_name), (rel, name))
        moved = max(moved, (mine - start[name].double()).abs().max().item())
    print(f"losses: {len(ours)} steps, worst relative difference {worst:.2e} (tolerance {a.tol:g}); final weights: "
          f"worst relative difference {worst_w:.2e} ({worst_name}; tolerance {a.weight_tol:g})")
    if not noise_ok:
        print(f"a key bias moved more than lr * steps = {lr * a.steps:g}: its gradient is not rounding noise")
    return (len(ours) == a.steps and worst <= a.tol and worst_w <= a.weight_tol and moved > 0 and noise_ok
            and same_processor)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exe")
    ap.add_argument("--mode", required=True, choices=["pixels", "train"])
    ap.add_argument("--images", type=int, default=24)
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--tol", type=float, default=1e-5)
    ap.add_argument("--weight-tol", type=float, default=1e-4)
    ap.add_argument("--resize", action="store_true", help="images of other sizes than the model's")
    ap.add_argument("--resample", type=int, default=2, choices=[2, 3], help="PIL filter: 2 bilinear, 3 bicubic")
    ap.add_argument("--tessera-extra", action="append", default=[])
    ap.add_argument("--expect-mismatch", action="store_true")
    a = ap.parse_args()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)
    def run(d):
        model_dir = os.path.join(d, "model")
        make_model_dir(model_dir, a.resample)
        rows = make_images(os.path.join(d, "data"), a.images, a.resize)
        return check_pixels(a, d, model_dir, rows) if a.mode == "pixels" else check_train(a, d, model_dir, rows)

    return tessera_run.verdict(tessera_run.in_work_dir(None, run), a.expect_mismatch)


if __name__ == "__main__":
    sys.exit(main())
