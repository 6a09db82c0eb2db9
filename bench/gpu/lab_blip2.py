#!/usr/bin/env python3
"""Seed 002's fine-tune-blip.py run the lab's way on one GPU, on synthetic data: the peer of bench/gpu/run.sh's seed002
section, beside the catalogue binary of the same step.

usage: lab_blip2.py BINARY --build BUILD [--steps N] [--device cuda|cpu] [--tiny]
  BINARY  a catalogue step of seed 002 (seed002-bf16-true, seed002-sgd, ...). Its model, batch size, gradient
          accumulation, precision, optimizer, lr, LoRA settings and checkpointing are those of tessera-catalogue's row
          (BUILD/catalogue/tessera-catalogue), read by bench/memory_vs_hf.py's catalogue() and settle(): one owner of
          what each step means.
  --tiny  two layers in each tower and small widths (a check of this script on the CPU; no parameter count check)

The lab's LightningModule: Blip2ForConditionalGeneration built from the published config (memory_vs_hf.CONFIGS) with
random weights, directly on the device in the dtype Lightning's precision gives it (the lab loads fp32 weights and
Lightning converts them; that transient is not part of training and is left out of the peak); model.train();
training_step returns model(input_ids, attention_mask, pixel_values, labels).loss; configure_optimizers is the lab's:
torch.optim.AdamW(params, lr) or torch.optim.SGD(params, lr) (torch's defaults, foreach on CUDA), bitsandbytes'
Adam8bit for adam_8bit. LoRA steps wrap the model with PEFT (LoraConfig of the row, target modules q and v of the
language model); checkpointing steps call gradient_checkpointing_enable(). Trainer(accelerator, devices=1,
precision=row, accumulate_grad_batches=row, max_steps=N, logger=False, enable_checkpointing=False,
enable_progress_bar=False).

Data: each micro-batch is B random 224x224 pixel tensors (the processor's output: normalized fp32) and B captions of
50 random token ids; input_ids are the 32 image tokens then the caption (the positions tessera's language model
sees; the lab's own input_ids lack the image tokens under transformers 5, see docs/seeds/002-blip2-single-gpu.md),
attention_mask all ones, labels the caption ids. The processor's CPU work is not part of either side's step.

Timing: a callback reads each micro-batch's loss (synchronizing the device, as the lab's per-step logging does) and
closes an optimizer step when Lightning's global_step moves: step_ms is each optimizer step's wall time. peak_bytes:
torch.cuda.max_memory_allocated from on_train_start (after the model is on the device) to the end.
The last line printed is one JSON object: {"side": "lab", "binary", "model", "batch", "accum", "precision", "optim",
"params", "step_ms": [...], "loss": [...], "peak_bytes", "reserved_bytes", "build_s", "oom", "error"}.
"""
import argparse
import json
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
import torch  # noqa: E402

import memory_vs_hf as mh  # noqa: E402

SEQ = 50


def tiny(cfg):
    """Two layers per tower and small widths, for a check of this script on the CPU."""
    v, q, t = cfg.vision_config, cfg.qformer_config, cfg.text_config
    v.hidden_size, v.intermediate_size, v.num_hidden_layers, v.num_attention_heads = 64, 128, 2, 4
    q.hidden_size, q.intermediate_size, q.num_hidden_layers, q.num_attention_heads = 64, 128, 2, 4
    q.encoder_hidden_size = 64
    if t.model_type == "t5":
        t.d_model, t.d_ff, t.num_layers, t.num_decoder_layers, t.num_heads, t.d_kv = 64, 128, 2, 2, 4, 16
    else:
        t.hidden_size, t.ffn_dim, t.num_hidden_layers, t.num_attention_heads, t.word_embed_proj_dim = 64, 128, 2, 4, 64
    return cfg


def build(s, args, dtype, device):
    import transformers
    cfg = mh.hf_config(s.model)
    if args.tiny:
        cfg = tiny(cfg)
    cfg._attn_implementation = "sdpa"
    torch.manual_seed(0)
    default = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        with torch.device(device):
            model = transformers.Blip2ForConditionalGeneration(cfg)
            lm = model.language_model
            if hasattr(lm, "shared") and lm.lm_head.weight is lm.shared.weight:
                # Flan-T5's checkpoints hold their own lm_head (tie_word_embeddings false); transformers 5 ties it
                lm.lm_head.weight = torch.nn.Parameter(torch.empty_like(lm.shared.weight).normal_(0.0, 1.0))
    finally:
        torch.set_default_dtype(default)
    n = sum(p.numel() for p in model.parameters())
    if not args.tiny and s.model in mh.PUBLISHED_PARAMS and n != mh.PUBLISHED_PARAMS[s.model]:
        raise SystemExit(f"{s.model}: {n:,} parameters built, the published checkpoint has "
                         f"{mh.PUBLISHED_PARAMS[s.model]:,}")
    model.train()
    if s.lora:
        import peft
        target = ["q", "v"] if "T5" in s.family else ["q_proj", "v_proj"]
        model = peft.get_peft_model(model, peft.LoraConfig(r=s.lora_r, lora_alpha=s.lora_alpha,
                                                           lora_dropout=s.lora_dropout, target_modules=target))
    if s.ckpt:
        model.gradient_checkpointing_enable()
        if s.lora:
            model.enable_input_require_grads()
    return cfg, model, n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("--build", default="build")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--tiny", action="store_true")
    args = ap.parse_args()
    rows = [r for r in mh.catalogue(args.build) if r.binary == args.binary]
    if not rows:
        raise SystemExit(f"{args.binary}: not a catalogue step of {args.build}/catalogue/tessera-catalogue")
    s = mh.settle(rows[0])
    if s.sharding or s.offload or s.qlora:
        raise SystemExit(f"{args.binary}: lab_blip2.py runs the one-GPU steps without DeepSpeed or 4-bit weights")
    lr = float(s.defaults.get("lr", 5e-6))
    result = {"side": "lab", "binary": args.binary, "model": s.model, "batch": s.batch, "accum": s.accum,
              "precision": s.precision, "optim": s.optim, "lora": s.lora, "ckpt": s.ckpt, "oom": False}
    import lightning as L

    cuda = args.device.startswith("cuda")
    dtype = torch.bfloat16 if s.precision == "bf16-true" else torch.float32
    t0 = time.perf_counter()
    cfg, model, n = build(s, args, dtype, args.device)
    result["params"] = n
    result["build_s"] = time.perf_counter() - t0
    vocab = cfg.text_config.vocab_size
    q = cfg.num_query_tokens
    image_token = cfg.image_token_index

    class Lab(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.model = model
            self.last = None

        def training_step(self, batch, _):
            loss = self.model(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"],
                              pixel_values=batch["pixel_values"], labels=batch["labels"]).loss
            self.last = loss.detach()
            return loss

        def configure_optimizers(self):
            params = [p for p in self.model.parameters() if p.requires_grad]
            if s.optim == "sgd":
                return torch.optim.SGD(params, lr=lr)
            if s.optim == "adam8bit":
                import bitsandbytes as bnb
                return bnb.optim.Adam8bit(params, lr=lr)
            return torch.optim.AdamW(params, lr=lr)

    class Data(torch.utils.data.Dataset):
        """A few fixed micro-batches' worth of rows, cycled: random pixels and captions."""
        def __init__(self, rows):
            g = torch.Generator().manual_seed(0)
            self.rows = rows
            self.pixels = torch.randn(min(rows, 64), 3, 224, 224, generator=g)
            self.captions = torch.randint(2, vocab if image_token >= vocab else image_token, (min(rows, 64), SEQ),
                                          generator=g)

        def __len__(self):
            return self.rows

        def __getitem__(self, i):
            c = self.captions[i % len(self.captions)]
            ids = torch.cat([torch.full((q,), image_token, dtype=torch.long), c])
            return {"pixel_values": self.pixels[i % len(self.pixels)], "input_ids": ids,
                    "attention_mask": torch.ones_like(ids), "labels": c}

    class Clock(L.Callback):
        def __init__(self):
            self.step_ms, self.loss, self.micro = [], [], []

        def on_train_start(self, trainer, module):
            if cuda:
                torch.cuda.synchronize()
                torch.cuda.reset_peak_memory_stats()
            self.t, self.step = time.perf_counter(), trainer.global_step

        def on_train_batch_end(self, trainer, module, outputs, batch, batch_idx):
            self.micro.append(module.last.float().item())
            if trainer.global_step != self.step:
                now = time.perf_counter()
                self.step_ms.append((now - self.t) * 1e3)
                self.loss.append(sum(self.micro) / len(self.micro))
                self.t, self.step, self.micro = now, trainer.global_step, []
                print(f"step {self.step}: {self.step_ms[-1]:.0f} ms, loss {self.loss[-1]:.4f}", flush=True)

    clock = Clock()
    loader = torch.utils.data.DataLoader(Data(s.batch * s.accum * (args.steps + 1)), batch_size=s.batch,
                                         num_workers=2, pin_memory=cuda)
    trainer = L.Trainer(accelerator="gpu" if cuda else "cpu", devices=1, precision=s.precision,
                        accumulate_grad_batches=s.accum, max_steps=args.steps, logger=False,
                        enable_checkpointing=False, enable_progress_bar=False, enable_model_summary=False,
                        callbacks=[clock])
    try:
        trainer.fit(Lab(), loader)
    except torch.OutOfMemoryError as e:
        result["oom"] = True
        result["error"] = str(e).splitlines()[0][:300]
    result["step_ms"], result["loss"] = clock.step_ms, clock.loss
    if cuda:
        result["peak_bytes"] = torch.cuda.max_memory_allocated()
        result["reserved_bytes"] = torch.cuda.max_memory_reserved()
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
