#!/usr/bin/env python3
"""tessera's T5 (models/t5.hpp) and its sequence-to-sequence data (data/seq2seq_batches.hpp) trained against Hugging
Face transformers' T5ForConditionalGeneration, and with LoRA against PEFT, on a pairs.jsonl written here.

The model directory is written by transformers' own save_pretrained (a small Flan-T5 layout, seeded: gated-gelu,
lm_head its own tensor, no decoder output scaling, 2 encoder and 3 decoder blocks, 8 buckets up to distance 20);
with --sharded in shards of 20KB, so that tessera reads model.safetensors.index.json. transformers 5.17's T5Config
sets tie_word_embeddings back to True whatever it is given: the script sets it to False before building the model,
which then unties the encoder's and decoder's embed_tokens from shared as well; they are given shared's values
before saving, as in Hugging Face's T5 checkpoints, and from_pretrained ties them again. data/pairs.jsonl holds
--pairs rows {"input_ids": [...], "labels": [...]} of random lengths (inputs 4..16 tokens, labels 2..10, ids in
[2, 300) followed by eos 1, seeded numpy); every fifth row's labels end with two -100 (labels padded ahead of time,
as some datasets are), so that -100 inside a row is ignored by the loss and turned into the pad id on the decoder's
input. A batch is tessera's documented order (RowOrder: micro-batch c holds rows [p*G, (p+1)*G), p = c mod
floor(N/G); one rank, no accumulation), padded to the batch's longest row: inputs with pad_token_id 0 and an
attention mask of 1/0, labels with -100. The reference loss is transformers' own: model(input_ids, attention_mask,
labels).loss (labels shifted right behind the decoder start token, -100 ignored).

--mode train (EXE is t5-fp32): --steps optimizer steps of tessera and of transformers + torch.optim.AdamW (lr 1e-3,
  weight_decay 0.01, train mode: dropout is 0) on the same batches; per-step losses within --tol relative.
  tessera's saved directory must load with from_pretrained without missing, unexpected or mismatched keys, with
  the model dir's architecture (config fields, scale_decoder_outputs, lm_head its own tensor), every parameter
  within --weight-tol of transformers' trained one (max |difference| / max |weight|), the weights moved from the
  initial ones, and its logits and loss on batch 0 within --weight-tol of transformers' trained model's.
--mode lora (EXE is t5-lora-fp32): the adapter is made by peft.get_peft_model(base, LoraConfig(r, lora_alpha,
  target_modules, lora_dropout=0, task_type SEQ_2_SEQ_LM)) with lora_B drawn N(0, 0.02^2) instead of PEFT's zeros,
  so that the adapters change the loss from step 0, and written by PEFT's save_pretrained. tessera gets
  adapter=ADAPTER lora_dropout=0 (lora_r / lora_alpha / lora_targets NOT passed: the adapter_config.json must set
  them; targets q, v match SelfAttention.q/v and EncDecAttention.q/v by PEFT's suffix rule); PEFT trains
  PeftModel.from_pretrained(base, ADAPTER, is_trainable=True) with torch.optim.AdamW (lr 3e-3, weight_decay 0.01)
  over its trainable parameters on the same batches. Checks, each within --tol (1e-4, check_lora_against_peft.py's)
  relative: per-step losses; the saved dir (save_dir) read by PEFT: adapter_config.json's r, lora_alpha,
  use_rslora, target_modules and task_type as the adapter it started from; its tensors exactly PEFT's trained
  adapter tensors by name and shape, with PEFT's trained values (max |diff| / max |PEFT|); the adapters moved; and
  PEFT with tessera's adapters gives PEFT's trained model's logits and loss on batch 0.

usage: check_t5_against_transformers.py EXE --mode train|lora [--pairs N] [--rows R] [--steps S] [--lr LR]
                                        [--tol T] [--weight-tol W] [--sharded] [--r 8] [--alpha 16]
                                        [--targets q,v] [--keep DIR] [--expect-mismatch]
                                        [--tessera-extra key=value ...]
Exit 0 when every check passes, 1 when one fails, 2 when tessera or transformers did not run. With
--expect-mismatch (negative controls) exit 0 only when tessera ran and the comparison failed.
"""
import argparse
import json
import os
import sys
import warnings

import numpy as np
import torch

warnings.filterwarnings("ignore")
from safetensors.torch import load_file  # noqa: E402
from transformers import T5Config, T5ForConditionalGeneration  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import tessera_run  # noqa: E402
from peft_adapter import adapter_tensors  # noqa: E402
import peft_adapter  # noqa: E402

SEQ_LEN, PAD, EOS = 16, 0, 1
CONFIG = dict(vocab_size=300, d_model=32, d_kv=8, d_ff=72, num_layers=2, num_decoder_layers=3, num_heads=4,
              relative_attention_num_buckets=8, relative_attention_max_distance=20, feed_forward_proj="gated-gelu",
              dropout_rate=0.0, tie_word_embeddings=False, decoder_start_token_id=0)  # Flan-T5's config.json's
# The config attributes the saved directory must carry over (scale_decoder_outputs: False for Flan-T5's layout).
ARCH = ["vocab_size", "d_model", "d_kv", "d_ff", "num_layers", "num_decoder_layers", "num_heads",
        "relative_attention_num_buckets", "relative_attention_max_distance", "feed_forward_proj", "is_gated_act",
        "dense_act_fn", "layer_norm_epsilon", "pad_token_id", "eos_token_id", "decoder_start_token_id",
        "scale_decoder_outputs"]


def make_model_dir(path, sharded):
    torch.manual_seed(11)
    cfg = T5Config(**CONFIG)
    cfg.tie_word_embeddings = False  # T5Config's __post_init__ forces True: lm_head is then shared itself
    model = T5ForConditionalGeneration(cfg)
    with torch.no_grad():  # untied above too; a T5 checkpoint's copies equal shared, and from_pretrained ties them
        model.encoder.embed_tokens.weight.copy_(model.shared.weight)
        model.decoder.embed_tokens.weight.copy_(model.shared.weight)
    model.save_pretrained(path, max_shard_size="20KB") if sharded else model.save_pretrained(path)
    index = os.path.exists(os.path.join(path, "model.safetensors.index.json"))
    if index != sharded:
        raise RuntimeError(f"save_pretrained wrote {'a' if index else 'no'} model.safetensors.index.json")


def make_pairs(data_dir, n, seed=3):
    """n rows of random lengths, written to data_dir/pairs.jsonl; returns [(input_ids, labels)] in file order."""
    rng = np.random.default_rng(seed)
    vocab = CONFIG["vocab_size"]
    rows = []
    for i in range(n):
        inputs = rng.integers(2, vocab, size=int(rng.integers(3, SEQ_LEN))).tolist() + [EOS]
        labels = rng.integers(2, vocab, size=int(rng.integers(1, 10))).tolist() + [EOS]
        if i % 5 == 4:
            labels = labels + [-100, -100]
        rows.append((inputs, labels))
    os.makedirs(data_dir, exist_ok=True)
    with open(os.path.join(data_dir, "pairs.jsonl"), "w") as f:
        for inputs, labels in rows:
            f.write(json.dumps({"input_ids": inputs, "labels": labels}) + "\n")
    return rows


def batch(rows, step, batch_size):
    """Step `step`'s rows in RowOrder (one rank, no accumulation), padded to their longest: input_ids,
    attention_mask, labels."""
    chunks = len(rows) // batch_size
    p = step % chunks
    part = rows[p * batch_size:(p + 1) * batch_size]
    s, length = max(len(x) for x, _ in part), max(len(y) for _, y in part)
    ids = torch.tensor([x + [PAD] * (s - len(x)) for x, _ in part])
    mask = torch.tensor([[1] * len(x) + [0] * (s - len(x)) for x, _ in part])
    labels = torch.tensor([y + [-100] * (length - len(y)) for _, y in part])
    return ids, mask, labels


def train(model, params, rows, a, lr, wd):
    """transformers' side: AdamW over params, one batch per step; returns the per-step losses."""
    model.train()  # dropout is 0: train mode computes what tessera does
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=wd)
    losses = []
    for s in range(a.steps):
        ids, mask, labels = batch(rows, s, a.rows)
        loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(loss.item())
    model.eval()
    return losses


def compare_outputs(what, mine_model, their_model, rows, a, tol):
    """Logits and loss of two models on batch 0, within tol relative."""
    ids, mask, labels = batch(rows, 0, a.rows)
    with torch.no_grad():
        mine = mine_model(input_ids=ids, attention_mask=mask, labels=labels)
        theirs = their_model(input_ids=ids, attention_mask=mask, labels=labels)
    rel = tessera_run.rel_diff(mine.logits, theirs.logits)
    loss_rel = abs(mine.loss.item() - theirs.loss.item()) / abs(theirs.loss.item())
    print(f"batch 0 after training, {what}: logits worst relative difference {rel:.2e}; loss "
          f"{mine.loss.item():.7f} against {theirs.loss.item():.7f}, rel {loss_rel:.2e} (tolerance {tol:g})")
    return rel <= tol and loss_rel <= tol


def tessera_args(a, d, model_dir, lr, wd):
    return dict(model_dir=model_dir, data=os.path.join(d, "data"), batch_size=a.rows, max_steps=a.steps, lr=lr,
                weight_decay=wd, threads=1, device="cpu", metrics=os.path.join(d, "metrics.jsonl"),
                save_dir=os.path.join(d, "saved"), seq_len=SEQ_LEN)


def load_model(path):
    return T5ForConditionalGeneration.from_pretrained(path, dtype=torch.float32)


def check_train(a, d, model_dir, rows):
    lr, wd = a.lr or 1e-3, 0.01
    args = tessera_args(a, d, model_dir, lr, wd)
    ours = tessera_run.run(a.exe, args, a.tessera_extra)
    if ours is None:
        return None
    model = load_model(model_dir)
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    theirs = train(model, model.parameters(), rows, a, lr, wd)
    worst = tessera_run.compare_losses(ours, theirs)
    mine, ok = tessera_run.load_saved_dir(T5ForConditionalGeneration, args["save_dir"])
    if mine is None:
        return False
    for key in ARCH:
        if getattr(mine.config, key, None) != getattr(model.config, key, None):
            print(f"saved config: {key}={getattr(mine.config, key, None)!r}, the model dir's "
                  f"{getattr(model.config, key, None)!r}")
            ok = False
    if mine.lm_head.weight is mine.shared.weight:
        print("the saved directory's lm_head is tied to shared: the model dir's is its own tensor")
        ok = False
    trained = dict(mine.named_parameters())
    if set(trained) != set(start):
        print(f"parameter names differ: only tessera {sorted(set(trained) - set(start))[:4]}, "
              f"only transformers {sorted(set(start) - set(trained))[:4]}")
        ok = False
    worst_w, worst_name, moved = 0.0, "", 0.0
    for name, t in model.named_parameters():
        if name not in trained:
            continue
        rel = tessera_run.rel_diff(trained[name], t)
        worst_w, worst_name = max((worst_w, worst_name), (rel, name))
        moved = max(moved, (trained[name].detach().double() - start[name].double()).abs().max().item())
    print(f"losses: {len(ours)} of {a.steps} steps, worst relative difference {worst:.2e} (tolerance {a.tol:g}); "
          f"final weights: {len(trained)} tensors, worst relative difference {worst_w:.2e} ({worst_name}; "
          f"tolerance {a.weight_tol:g}), moved from the initial ones by up to {moved:.2e}")
    ok = compare_outputs("tessera's saved dir vs transformers' trained model", mine, model, rows, a,
                         a.weight_tol) and ok
    return ok and len(ours) == a.steps and worst <= a.tol and worst_w <= a.weight_tol and moved > 0


def make_adapter_dir(path, model_dir, a, targets, seed):
    peft_adapter.make_adapter_dir(path, load_model(model_dir), a.r, a.alpha, targets, "SEQ_2_SEQ_LM", seed)


def check_lora(a, d, model_dir, rows):
    from peft import PeftConfig, PeftModel
    targets = [t for t in a.targets.split(",") if t]
    adapter = os.path.join(d, "adapter")
    make_adapter_dir(adapter, model_dir, a, targets, 11)
    lr, wd = a.lr or 3e-3, 0.01
    args = tessera_args(a, d, model_dir, lr, wd)
    args.update(adapter=adapter, lora_dropout=0)
    ours = tessera_run.run(a.exe, args, a.tessera_extra)
    if ours is None:
        return None
    peft_model = PeftModel.from_pretrained(load_model(model_dir), adapter, is_trainable=True)
    initial = adapter_tensors(peft_model)
    params = [p for p in peft_model.parameters() if p.requires_grad]
    if len(params) != len(initial):
        print(f"ERROR: PEFT trains {len(params)} tensors but saved {len(initial)} adapter tensors")
        return None
    theirs = train(peft_model, params, rows, a, lr, wd)
    worst = tessera_run.compare_losses(ours, theirs)
    ok = len(ours) == a.steps and worst <= a.tol
    print(f"losses: {len(ours)} of {a.steps} steps, worst relative difference {worst:.2e} (tolerance {a.tol:g})")

    saved = args["save_dir"]
    try:
        scfg = PeftConfig.from_pretrained(saved)
    except Exception as e:  # noqa: BLE001 - any refusal by PEFT is a failed check
        print(f"  PEFT cannot read tessera's adapter_config.json: {e}")
        return False
    # task_type too: PEFT picks the model class by it (AutoPeftModelForSeq2SeqLM refuses a CAUSAL_LM dir).
    want = {"r": a.r, "lora_alpha": a.alpha, "use_rslora": False, "peft_type": "LORA",
            "task_type": peft_model.peft_config["default"].task_type}
    ok = peft_adapter.saved_config_ok(scfg, want, targets) and ok

    trained = load_file(os.path.join(saved, "adapter_model.safetensors"))
    want_tensors = adapter_tensors(peft_model)
    if set(trained) != set(want_tensors):
        print(f"  saved tensor names differ: only tessera {sorted(set(trained) - set(want_tensors))[:4]}, "
              f"only PEFT {sorted(set(want_tensors) - set(trained))[:4]}")
        ok = False
    worst_w, worst_name, moved = 0.0, None, 0.0
    for name, t in want_tensors.items():
        if name not in trained:
            continue
        if tuple(trained[name].shape) != tuple(t.shape):
            print(f"  {name}: shape {tuple(trained[name].shape)}, expected {tuple(t.shape)}")
            ok = False
            continue
        rel = tessera_run.rel_diff(trained[name], t)
        if rel > a.tol:
            print(f"  differs: {name}  rel {rel:.2e}")
        if rel > worst_w:
            worst_w, worst_name = rel, name
        moved = max(moved, (trained[name].double() - initial[name].double()).abs().max().item())
    print(f"saved adapters: {len(trained)} tensors ({len(want_tensors)} in PEFT's), worst relative difference to "
          f"PEFT's trained ones {worst_w:.2e}" + (f" ({worst_name})" if worst_name else "")
          + f"; moved from the initial adapters by up to {moved:.2e}")
    ok = ok and worst_w <= a.tol and moved > 0

    try:
        loaded = PeftModel.from_pretrained(load_model(model_dir), saved).eval()
    except Exception as e:  # noqa: BLE001
        print(f"  PeftModel.from_pretrained refuses tessera's adapter dir: {e}")
        return False
    return compare_outputs("PEFT with tessera's adapters vs PEFT's trained model", loaded, peft_model, rows, a,
                           a.tol) and ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("exe")
    ap.add_argument("--mode", required=True, choices=["train", "lora"])
    ap.add_argument("--pairs", type=int, default=24)
    ap.add_argument("--rows", type=int, default=4)
    ap.add_argument("--steps", type=int, default=None, help="default 20 (train), 10 (lora)")
    ap.add_argument("--lr", type=float, default=None, help="default 1e-3 (train), 3e-3 (lora)")
    ap.add_argument("--tol", type=float, default=None, help="default 1e-5 (train), 1e-4 (lora)")
    ap.add_argument("--weight-tol", type=float, default=1e-4, help="train: the saved weights and logits")
    ap.add_argument("--sharded", action="store_true", help="the model dir in 20KB shards (index.json)")
    ap.add_argument("--r", type=int, default=8)
    ap.add_argument("--alpha", type=int, default=16)
    ap.add_argument("--targets", default="q,v")
    ap.add_argument("--keep", help="work in this dir instead of a temporary one, and keep it (debugging)")
    ap.add_argument("--tessera-extra", action="append", default=[],
                    help="key=value for tessera only, replacing the script's own value of that key")
    ap.add_argument("--expect-mismatch", action="store_true",
                    help="negative control: exit 0 only when tessera ran fine and the comparison FAILED")
    a = ap.parse_args()
    lora = a.mode == "lora"
    a.steps = a.steps if a.steps is not None else (10 if lora else 20)
    a.tol = a.tol if a.tol is not None else (1e-4 if lora else 1e-5)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    torch.set_num_threads(1)

    def run(d):
        model_dir = os.path.join(d, "model")
        make_model_dir(model_dir, a.sharded)
        rows = make_pairs(os.path.join(d, "data"), a.pairs)
        return (check_lora if lora else check_train)(a, d, model_dir, rows)

    return tessera_run.verdict(tessera_run.in_work_dir(a.keep, run), a.expect_mismatch)


if __name__ == "__main__":
    sys.exit(main())
