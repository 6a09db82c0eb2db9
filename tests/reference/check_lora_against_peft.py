#!/usr/bin/env python3
"""Trains LoRA adapters that PEFT made and saved, with a tessera LoRA example binary and with PEFT itself on
Hugging Face transformers' LlamaForCausalLM or OPTForCausalLM, then checks tessera's results with PEFT and
transformers.

Flow (all in a temporary dir):
  1. The base model dir is written by transformers' save_pretrained (check_against_transformers.make_model_dir:
     a random model of --config's family, "model_type" llama by default or opt, norm scales and biases
     perturbed; F32 or BF16). The adapter is made by peft.get_peft_model(base, LoraConfig(r, lora_alpha,
     target_modules, lora_dropout=0, use_rslora)); lora_B is then drawn N(0, 0.02^2) instead of PEFT's zeros, so
     the adapters change the loss from step 0, and PEFT's save_pretrained writes the adapter dir.
  2. EXE model_dir=MODEL data=TOKENS adapter=ADAPTER lora_dropout=0 batch_size seq_len accumulate_grad_batches
     max_steps lr weight_decay=0.01 threads=1 device=cpu metrics=M save_dir=SAVED [merge_adapter=true], each
     --tessera-extra key=value replacing that key's value. lora_r / lora_alpha / lora_targets are NOT passed:
     PEFT's adapter_config.json must be what sets them.
  3. PEFT trains the same model (PeftModel.from_pretrained(base, ADAPTER, is_trainable=True), base in fp32) with
     torch.optim.AdamW over its trainable parameters on the same batches. The loss is tessera's: mean
     cross-entropy over every position, computed from the logits (see check_against_transformers.hf_loss).
  4. Checks, each within --tol (relative):
     * per-step losses;
     * default mode: SAVED loads in PEFT (PeftConfig and PeftModel.from_pretrained on a fresh base): r,
       lora_alpha, target_modules, use_rslora as given; the saved tensors are exactly PEFT's trained adapter
       tensors by name and shape, with PEFT's trained values (max |diff| / max |PEFT|); the adapters moved; and
       the logits of PEFT with tessera's adapters on batch 0 equal those of PEFT's own trained model;
     * --merge: SAVED is a Hugging Face model dir. AutoModelForCausalLM.from_pretrained(SAVED) makes the family's
       class with the parameters of PEFT's merge_and_unload() of its trained model (every tensor; for the adapted
       weights also the merged-in delta, merged - W, which is the sensitive part), and its logits and loss on
       batch 0 equal the adapted PEFT model's.

usage: check_lora_against_peft.py EXE --config JSON [--dtype F32|BF16] [--r 8] [--alpha 16]
                                  [--targets q_proj,v_proj] [--rslora] [--merge] [--accumulate A] [--rows R]
                                  [--seq-len T] [--steps N] [--lr LR] [--tol 1e-4]
                                  [--tessera-extra key=value ...] [--expect-mismatch]
Exit 0 when every check passes, 1 when one fails, 2 when tessera itself exits non-zero (its stderr is shown).
With --expect-mismatch (negative controls) exit 0 only when tessera ran and the comparison failed, so that a
tessera that refuses the arguments or crashes cannot make a negative control pass.
"""
import argparse
import json
import os
import sys
import tempfile

import torch
import torch.nn.functional as F
from peft import PeftConfig, PeftModel
from safetensors.torch import load_file
from transformers import AutoModelForCausalLM
from transformers.utils import logging as hf_logging

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tessera_run  # noqa: E402
from peft_adapter import adapter_tensors  # noqa: E402
import peft_adapter  # noqa: E402
from check_against_transformers import hf_loss, load, make_model_dir, write_tokens  # noqa: E402


def rel_diff(mine, theirs):
    mine, theirs = mine.detach().double(), theirs.detach().double()
    return ((mine - theirs).abs().max() / theirs.abs().max()).item()


def load_base(model_dir):
    # fp32 whatever the dir's dtype: tessera's Fp32 experiment upcasts a bf16 dir the same way.
    return AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="sdpa")


def make_adapter_dir(path, model_dir, a, targets, seed):
    peft_adapter.make_adapter_dir(path, load_base(model_dir), a.r, a.alpha, targets, "CAUSAL_LM", seed, a.rslora)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exe")
    ap.add_argument("--config", required=True,
                    help='JSON text of config.json fields; "model_type": "llama" (default) or "opt" picks the family')
    ap.add_argument("--dtype", default="F32", choices=["F32", "BF16"], help="dtype save_pretrained writes the base in")
    ap.add_argument("--r", type=int, default=8)
    ap.add_argument("--alpha", type=float, default=16)
    ap.add_argument("--targets", default="q_proj,v_proj")
    ap.add_argument("--rslora", action="store_true", help="LoraConfig(use_rslora=True): scaling alpha / sqrt(r)")
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
    targets = [t for t in a.targets.split(",") if t]
    torch.set_num_threads(1)
    hf_logging.disable_progress_bar()
    if a.keep:
        os.makedirs(a.keep, exist_ok=True)
        return run(a, targets, a.keep)
    with tempfile.TemporaryDirectory() as d:
        return run(a, targets, d)


def run(a, targets, d):
    cfg = json.loads(a.config)
    model_dir, token_file, adapter = os.path.join(d, "model"), os.path.join(d, "tokens.bin"), os.path.join(d, "adapter")
    make_model_dir(model_dir, cfg, torch.bfloat16 if a.dtype == "BF16" else torch.float32, 7, None)
    make_adapter_dir(adapter, model_dir, a, targets, 11)
    # About 2.5 epochs of data, so that the run also crosses the wrap-around (at least one micro-step of tokens).
    count = max(int(a.rows * a.seq_len * a.accumulate * a.steps / 2.5), a.rows * a.seq_len) + 1
    tokens = write_tokens(token_file, count, cfg["vocab_size"], False)
    metrics, saved = os.path.join(d, "metrics.jsonl"), os.path.join(d, "saved")
    args = dict(model_dir=model_dir, data=token_file, adapter=adapter, lora_dropout=0, batch_size=a.rows,
                seq_len=a.seq_len, accumulate_grad_batches=a.accumulate, max_steps=a.steps, lr=a.lr,
                weight_decay=a.weight_decay, threads=1, device="cpu", metrics=metrics, save_dir=saved)
    if a.merge:
        args["merge_adapter"] = "true"
    ours = tessera_run.run(a.exe, args, a.tessera_extra)
    if ours is None:
        return 2

    peft_model = PeftModel.from_pretrained(load_base(model_dir), adapter, is_trainable=True)
    initial = adapter_tensors(peft_model)
    params = [p for p in peft_model.parameters() if p.requires_grad]
    if len(params) != len(initial):
        print(f"ERROR: PEFT trains {len(params)} tensors but saved {len(initial)} adapter tensors")
        return 1
    opt = torch.optim.AdamW(params, lr=a.lr, weight_decay=a.weight_decay)
    theirs = tessera_run.train_loop(lambda x, y: hf_loss(peft_model, x, y), opt, tokens, a.steps, a.accumulate,
                                    a.rows, a.seq_len)
    peft_model.eval()

    worst = tessera_run.compare_losses(ours, theirs)
    ok = len(ours) == a.steps and worst <= a.tol
    print(f"losses: {len(ours)} of {a.steps} steps, worst relative difference {worst:.2e} (tolerance {a.tol:g})")
    if len(ours) != a.steps:
        print(f"  tessera logged {len(ours)} step lines, expected {a.steps}")
    x, y = tessera_run.batch(tokens, 0, 0, 1, a.rows, a.seq_len)
    check = check_merged if a.merge else check_adapter
    ok = check(a, targets, model_dir, saved, peft_model, initial, x, y) and ok
    print("PASS" if ok else "FAIL")
    if a.expect_mismatch:
        print("negative control: " + ("the check failed, as expected" if not ok else "the check did NOT fail"))
        return 0 if not ok else 1
    return 0 if ok else 1


def compare_logits(what, mine_model, their_model, x, y, tol):
    with torch.no_grad():
        mine, theirs = mine_model(input_ids=x).logits, their_model(input_ids=x).logits
        rel = rel_diff(mine, theirs)
        loss_mine = F.cross_entropy(mine.float().reshape(-1, mine.shape[-1]), y.reshape(-1)).item()
        loss_theirs = F.cross_entropy(theirs.float().reshape(-1, theirs.shape[-1]), y.reshape(-1)).item()
    loss_rel = abs(loss_mine - loss_theirs) / abs(loss_theirs)
    print(f"batch 0 after training, {what}: logits worst relative difference {rel:.2e}; loss {loss_mine:.7f} "
          f"against {loss_theirs:.7f}, rel {loss_rel:.2e}")
    return rel <= tol and loss_rel <= tol


def check_adapter(a, targets, model_dir, saved, peft_model, initial, x, y):
    ok = True
    try:
        scfg = PeftConfig.from_pretrained(saved)
    except Exception as e:  # noqa: BLE001 - any refusal by PEFT is a failed check
        print(f"  PEFT cannot read tessera's adapter_config.json: {e}")
        return False
    want = {"r": a.r, "lora_alpha": a.alpha, "use_rslora": a.rslora, "peft_type": "LORA", "task_type": "CAUSAL_LM"}
    ok = peft_adapter.saved_config_ok(scfg, want, targets) and ok

    trained = load_file(os.path.join(saved, "adapter_model.safetensors"))
    pairs, same = paired("saved tensor", trained, adapter_tensors(peft_model))
    ok = ok and same
    worst_w, worst_name, moved = 0.0, None, 0.0
    for name, rel in pairs:
        if rel > a.tol:
            print(f"  differs: {name}  rel {rel:.2e}")
        if rel > worst_w:
            worst_w, worst_name = rel, name
        moved = max(moved, (trained[name].double() - initial[name].double()).abs().max().item())
    print(f"saved adapters: {len(trained)} tensors, worst relative difference to PEFT's trained ones {worst_w:.2e}"
          + (f" ({worst_name})" if worst_name else "") + f"; moved from the initial adapters by up to {moved:.2e}")
    ok = ok and worst_w <= a.tol and moved > 0

    try:
        loaded = PeftModel.from_pretrained(load_base(model_dir), saved).eval()
    except Exception as e:  # noqa: BLE001
        print(f"  PeftModel.from_pretrained refuses tessera's adapter dir: {e}")
        return False
    return compare_logits("PEFT with tessera's adapters vs PEFT's trained model", loaded, peft_model, x, y,
                          a.tol) and ok


def paired(what, got, want):
    """([(name, relative difference)] over the names both hold with equal shapes, whether the names and shapes all
    agree); differences are printed."""
    same = set(got) == set(want)
    if not same:
        print(f"  {what} names differ: only tessera {sorted(set(got) - set(want))[:4]}, "
              f"only PEFT {sorted(set(want) - set(got))[:4]}")
    pairs = []
    for name, t in want.items():
        if name not in got:
            continue
        if tuple(got[name].shape) != tuple(t.shape):
            print(f"  {name}: shape {tuple(got[name].shape)}, expected {tuple(t.shape)}")
            same = False
            continue
        pairs.append((name, rel_diff(got[name], t)))
    return pairs, same


def check_merged(a, targets, model_dir, saved, peft_model, initial, x, y):
    ok = True
    try:
        mine = load(json.loads(a.config), saved).eval()
    except Exception as e:  # noqa: BLE001
        print(f"  AutoModelForCausalLM.from_pretrained refuses tessera's merged dir: {e}")
        return False
    ok = compare_logits("tessera's merged dir vs the adapted PEFT model", mine, peft_model, x, y, a.tol)
    base = dict(load_base(model_dir).named_parameters())
    merged = peft_model.merge_and_unload().eval()
    want = dict(merged.named_parameters())
    got = dict(mine.named_parameters())
    pairs, same = paired("merged parameter", got, want)
    ok = ok and same
    adapted = {n[len("base_model.model."):].replace(".lora_A.weight", ".weight")
               for n in initial if n.endswith(".lora_A.weight")}
    worst_base = worst_w = worst_delta = 0.0
    worst_name = None
    for name, rel in pairs:
        t = want[name]
        if name not in adapted:
            worst_base = max(worst_base, rel)
            continue
        w = base[name].detach().double()
        delta = rel_diff(got[name].double() - w, t.double() - w)
        if delta > a.tol:
            print(f"  differs: {name}  weight rel {rel:.2e}  merged-in delta rel {delta:.2e}")
        worst_w = max(worst_w, rel)
        if delta > worst_delta:
            worst_delta, worst_name = delta, name
    print(f"merged dir against PEFT's merge_and_unload(): {len(adapted)} adapted weights, worst relative difference "
          f"{worst_w:.2e}, of the merged-in delta {worst_delta:.2e}" + (f" ({worst_name})" if worst_name else "")
          + f"; the other tensors {worst_base:.2e}")
    if not adapted or not adapted <= set(want):
        print(f"  adapted weights {sorted(adapted)[:4]} are not all parameters of the merged model")
        ok = False
    ok = compare_logits("tessera's merged dir vs PEFT's merge_and_unload()", mine, merged, x, y, a.tol) and ok
    return ok and worst_w <= a.tol and worst_delta <= a.tol and worst_base <= a.tol


if __name__ == "__main__":
    sys.exit(main())
