#!/usr/bin/env python3
"""Trains LoRA adapters started from the same PEFT adapter dir with a tessera LoRA example binary and with
llama_reference.py's LoraLlama (independent PyTorch code), then compares per-step losses and what tessera saved.

Flow (all in a temporary dir):
  1. llama_reference.py make-model (random Hugging Face Llama dir from --config), make-tokens (about 2.5 epochs of
     data, so the run crosses the data wrap-around), make-adapter (a PEFT dir: r, lora_alpha, target_modules;
     lora_A kaiming-uniform-like, lora_B small non-zero normal so the adapters matter from step 0).
  2. EXE model_dir=MODEL data=TOKENS adapter=ADAPTER lora_dropout=0 batch_size seq_len accumulate_grad_batches
     max_steps lr weight_decay=0.01 threads=1 device=cpu metrics=M save_dir=SAVED [merge_adapter=true], each
     --tessera-extra key=value replacing that key's value. lora_r / lora_alpha / lora_targets are NOT passed:
     the adapter dir's adapter_config.json must be what sets them.
  3. The reference trains LoraLlama from the same adapter dir (frozen base, torch.optim.AdamW over the adapter
     tensors only, dropout off) with the same batches.
  4. Checks, each within --tol (relative):
     * per-step losses (the "loss" of the metrics JSONL lines with "event":"step");
     * default mode: SAVED is a PEFT dir whose adapter_config.json has r, lora_alpha and target_modules as given and
       whose adapter_model.safetensors holds exactly the reference's tensor names
       (base_model.model.<module>.lora_A.weight (r, in) / .lora_B.weight (out, r)) with the reference's trained
       values (max |diff| / max |reference|), and the adapters moved away from the initial ones;
     * --merge: tessera trains the same way but saves with merge_adapter=true, so SAVED is a Hugging Face model dir.
       Every untargeted tensor must equal the base; every targeted weight must equal the reference's merged
       W + scaling * B @ A (checked both on the whole weight and on the merged-in delta, merged - W, which is
       the sensitive part); and the plain reference Llama loaded from tessera's merged dir must give, on batch 0,
       the loss that the reference's trained LoraLlama gives.

usage: check_lora_against_reference.py EXE --config JSON [--r 8] [--alpha 16] [--targets q_proj,v_proj] [--rslora]
                                       [--merge] [--accumulate A] [--rows R] [--seq-len T] [--steps N] [--lr LR]
                                       [--tol 1e-4] [--tessera-extra key=value ...] [--expect-mismatch]
Exit 0 when every check passes, 1 when one fails, 2 when tessera itself exits non-zero (its stderr is shown).
With --expect-mismatch (negative controls) exit 0 only when tessera ran and the comparison failed, so that a
tessera that refuses the arguments or crashes cannot make a negative control pass.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import llama_reference as ref  # noqa: E402
import tessera_run  # noqa: E402


def rel_diff(mine, theirs):
    mine, theirs = mine.detach().double(), theirs.detach().double()
    return ((mine - theirs).abs().max() / theirs.abs().max()).item()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exe")
    ap.add_argument("--config", required=True)
    ap.add_argument("--dtype", default="F32", help="dtype of the base model's safetensors")
    ap.add_argument("--r", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    ap.add_argument("--targets", default="q_proj,v_proj")
    ap.add_argument("--rslora", action="store_true", help="adapter_config.json use_rslora: scaling alpha / sqrt(r)")
    ap.add_argument("--merge", action="store_true", help="save with merge_adapter=true and check the merged dir")
    ap.add_argument("--accumulate", type=int, default=1)
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--seq-len", type=int, default=32)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--weight-decay", type=float, default=0.01)
    ap.add_argument("--tol", type=float, default=1e-4)
    ap.add_argument("--keep", help="work in this dir instead of a temporary one, and keep it (debugging)")
    ap.add_argument("--tessera-extra", action="append", default=[],
                    help="key=value for tessera only, replacing the script's own value of that key (negative "
                         "controls: the check must then fail)")
    ap.add_argument("--expect-mismatch", action="store_true",
                    help="negative control: exit 0 only when tessera ran fine and the comparison FAILED")
    a = ap.parse_args()
    cfg = json.loads(a.config)
    targets = [t for t in a.targets.split(",") if t]
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        return run(a, cfg, targets, a.keep)
    with tempfile.TemporaryDirectory() as d:
        return run(a, cfg, targets, d)


def run(a, cfg, targets, d):
    model, tokens, adapter = os.path.join(d, "model"), os.path.join(d, "tokens.bin"), os.path.join(d, "adapter")
    py = [sys.executable, os.path.join(HERE, "llama_reference.py")]
    subprocess.run(py + ["make-model", model, "--config", a.config, "--dtype", a.dtype, "--seed", "7"], check=True)
    # About 2.5 epochs of data, so that the run also crosses the wrap-around (at least one micro-step of tokens).
    count = max(int(a.rows * a.seq_len * a.accumulate * a.steps / 2.5), a.rows * a.seq_len) + 1
    subprocess.run(py + ["make-tokens", tokens, "--count", str(count), "--vocab", str(cfg["vocab_size"])], check=True)
    subprocess.run(py + ["make-adapter", adapter, "--model", model, "--r", str(a.r), "--alpha", str(a.alpha),
                         "--targets", ",".join(targets), "--seed", "11"] + (["--rslora"] if a.rslora else []),
                   check=True)
    metrics, saved = os.path.join(d, "metrics.jsonl"), os.path.join(d, "saved")
    args = dict(model_dir=model, data=tokens, adapter=adapter, lora_dropout=0, batch_size=a.rows, seq_len=a.seq_len,
                accumulate_grad_batches=a.accumulate, max_steps=a.steps, lr=a.lr, weight_decay=a.weight_decay,
                threads=1, device="cpu", metrics=metrics, save_dir=saved)
    if a.merge:
        args["merge_adapter"] = "true"
    ours = tessera_run.run(a.exe, args, a.tessera_extra)
    if ours is None:
        return 2

    torch.set_num_threads(1)
    cfg_ref, weights = ref.read_model_dir(model)
    acfg, initial = ref.read_adapter_dir(adapter)
    reference = ref.LoraLlama(cfg_ref, weights, acfg, initial)
    data = ref.read_tokens(tokens)
    theirs = ref.train(reference, data, a.steps, a.accumulate, a.rows, a.seq_len, a.lr, a.weight_decay)

    worst = tessera_run.compare_losses(ours, theirs)
    ok = len(ours) == a.steps and worst <= a.tol
    print(f"losses: {len(ours)} of {a.steps} steps, worst relative difference {worst:.2e} (tolerance {a.tol:g})")
    if len(ours) != a.steps:
        print(f"  tessera logged {len(ours)} step lines, expected {a.steps}")
    ok = (check_merged if a.merge else check_adapter)(a, targets, saved, reference, weights, initial, data) and ok
    print("PASS" if ok else "FAIL")
    if a.expect_mismatch:
        print("negative control: " + ("the check failed, as expected" if not ok else "the check did NOT fail"))
        return 0 if not ok else 1
    return 0 if ok else 1


def check_adapter(a, targets, saved, reference, weights, initial, data):
    ok = True
    scfg, trained = ref.read_adapter_dir(saved)
    expect = {"r": a.r, "lora_alpha": a.alpha}
    for key, want in expect.items():
        if scfg.get(key) != want:
            print(f"  saved adapter_config.json: {key}={scfg.get(key)!r}, expected {want!r}")
            ok = False
    got_targets = scfg.get("target_modules")
    if not isinstance(got_targets, list) or set(got_targets) != set(targets):
        print(f"  saved adapter_config.json: target_modules={got_targets!r}, expected {targets!r}")
        ok = False
    if bool(scfg.get("use_rslora", False)) != a.rslora:
        print(f"  saved adapter_config.json: use_rslora={scfg.get('use_rslora')!r}, expected {a.rslora}")
        ok = False
    want = reference.adapter_tensors()
    if set(trained) != set(want):
        print(f"  saved tensor names differ: only tessera {sorted(set(trained) - set(want))[:4]}, "
              f"only reference {sorted(set(want) - set(trained))[:4]}")
        ok = False
    worst_w, worst_name, moved = 0.0, None, 0.0
    for name, t in want.items():
        if name not in trained:
            continue
        if tuple(trained[name].shape) != tuple(t.shape):
            print(f"  {name}: shape {tuple(trained[name].shape)}, expected {tuple(t.shape)}")
            ok = False
            continue
        rel = rel_diff(trained[name], t)
        if rel > worst_w:
            worst_w, worst_name = rel, name
        moved = max(moved, (trained[name].double() - initial[name].double()).abs().max().item())
    print(f"saved adapters: {len(trained)} tensors, worst relative difference {worst_w:.2e}"
          + (f" ({worst_name})" if worst_name else "") + f"; moved from the initial adapters by up to {moved:.2e}")
    if worst_w > a.tol:
        for name, t in want.items():
            if name in trained and tuple(trained[name].shape) == tuple(t.shape):
                rel = rel_diff(trained[name], t)
                if rel > a.tol:
                    print(f"  differs: {name}  rel {rel:.2e}")
    return ok and worst_w <= a.tol and moved > 0


def check_merged(a, targets, saved, reference, weights, initial, data):
    ok = True
    mcfg, merged = ref.read_model_dir(saved)
    for key, value in reference.cfg.items():
        if key in ("hidden_size", "intermediate_size", "num_hidden_layers", "num_attention_heads",
                   "num_key_value_heads", "vocab_size", "rms_norm_eps", "rope_theta", "tie_word_embeddings") \
                and mcfg.get(key, value) != value:
            print(f"  merged config.json: {key}={mcfg.get(key)!r}, expected {value!r}")
            ok = False
    want = reference.merged_weights()
    if set(merged) - {k for k in merged if k.endswith("rotary_emb.inv_freq")} != set(want):
        print(f"  merged tensor names differ: only tessera {sorted(set(merged) - set(want))[:4]}, "
              f"only reference {sorted(set(want) - set(merged))[:4]}")
        ok = False
    adapted = {m + ".weight" for m in reference.lora}
    worst_base = worst_w = worst_delta = 0.0
    worst_name = None
    for name, t in want.items():
        if name not in merged:
            continue
        if tuple(merged[name].shape) != tuple(t.shape):
            print(f"  {name}: shape {tuple(merged[name].shape)}, expected {tuple(t.shape)}")
            ok = False
            continue
        if name not in adapted:
            worst_base = max(worst_base, rel_diff(merged[name], weights[name]))
            continue
        base = weights[name].double()
        rel = rel_diff(merged[name], t)
        delta = rel_diff(merged[name].double() - base, t.double() - base)
        if delta > a.tol:
            print(f"  differs: {name}  weight rel {rel:.2e}  merged-in delta rel {delta:.2e}")
        worst_w = max(worst_w, rel)
        if delta > worst_delta:
            worst_delta, worst_name = delta, name
    print(f"merged dir: {len(adapted)} adapted weights, worst relative difference {worst_w:.2e}, of the merged-in "
          f"delta {worst_delta:.2e}" + (f" ({worst_name})" if worst_name else "")
          + f"; untargeted tensors vs the base {worst_base:.2e}")
    x, y = tessera_run.batch(data, 0, 0, 1, a.rows, a.seq_len)
    with torch.no_grad():
        lora_loss = reference.loss(x, y).item()
        plain = ref.Llama(reference.cfg, {k: merged[k] for k in want if k in merged})
        plain_loss = plain.loss(x, y).item() if set(want) <= set(merged) else float("nan")
    rel = abs(plain_loss - lora_loss) / abs(lora_loss)
    print(f"batch 0 after training: reference LoRA {lora_loss:.7f}, plain reference on tessera's merged dir "
          f"{plain_loss:.7f}, rel {rel:.2e}")
    return ok and worst_w <= a.tol and worst_delta <= a.tol and worst_base <= a.tol and rel <= a.tol


if __name__ == "__main__":
    sys.exit(main())
