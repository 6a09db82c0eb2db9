#!/usr/bin/env python3
"""The Lightning side of bench/step_vs_pytorch: the same LlamaForCausalLM as bench/hf_step.py, trained by a
lightning.pytorch Trainer as its users run it: a LightningModule whose training_step returns the loss,
configure_optimizers -> one torch.optim.AdamW, accelerator="cpu", devices=1, fp32 ("32-true"), automatic
optimization (Lightning's zero_grad is torch's default, set_to_none=True), no logger, no checkpoints, no progress bar.

usage: lightning_step.py bench --dir D --rows R --seq-len T --threads N --steps S [--warmup W]
D as made by `hf_step.py init`. Prints one JSON line {"step_ms": [...], "loss": [...], "threads": n}: for each step
after the warm-up steps, the wall time from the Trainer's on_train_batch_start to its on_train_batch_end (forward,
backward, optimizer step, zero_grad and Lightning's own hooks; the batch is fetched before, as hf_step.py slices it
before its clock starts); the loss of every step, read after the clock stops; torch.get_num_threads() seen inside
the training loop.
"""
import json
import logging
import os
import time
import warnings

import lightning.pytorch as pl
import torch

from hf_step import LR, WEIGHT_DECAY, batch, load_model, loss_of, parse, read_tokens


class Rows(torch.utils.data.Dataset):
    """Item s is step s's (inputs, targets), already batched: the DataLoader runs with batch_size=None."""

    def __init__(self, tokens, count, rows, seq_len):
        self.tokens, self.count, self.rows, self.seq_len = tokens, count, rows, seq_len

    def __len__(self):
        return self.count

    def __getitem__(self, s):
        return batch(self.tokens, s, self.rows, self.seq_len)


class CausalLm(pl.LightningModule):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def training_step(self, b, batch_idx):
        x, y = b
        return loss_of(self.model, x, y)

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=LR, weight_decay=WEIGHT_DECAY)


class StepTimer(pl.Callback):
    def __init__(self):
        self.ms, self.loss, self.threads, self.t0 = [], [], 0, 0.0

    def on_train_batch_start(self, trainer, module, b, batch_idx):
        self.threads = torch.get_num_threads()
        self.t0 = time.perf_counter()

    def on_train_batch_end(self, trainer, module, outputs, b, batch_idx):
        self.ms.append((time.perf_counter() - self.t0) * 1e3)
        self.loss.append(outputs["loss"].item())


def main():
    a = parse()
    if a.cmd != "bench":
        raise SystemExit("lightning_step.py runs `bench` only; make the dir with hf_step.py init")
    # Lightning's banner and its advice (workers, logger) go to stderr and would bury the bench's own lines.
    logging.getLogger("lightning.pytorch").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", module="lightning")
    count = a.warmup + a.steps
    loader = torch.utils.data.DataLoader(Rows(read_tokens(os.path.join(a.dir, "tokens.bin")), count, a.rows,
                                              a.seq_len), batch_size=None, shuffle=False)
    timer = StepTimer()
    trainer = pl.Trainer(accelerator="cpu", devices=1, precision="32-true", max_steps=count, max_epochs=1,
                         logger=False, enable_checkpointing=False, enable_progress_bar=False,
                         enable_model_summary=False, callbacks=[timer])
    trainer.fit(CausalLm(load_model(a.dir)), train_dataloaders=loader)
    if len(timer.ms) != count:
        raise SystemExit(f"Lightning ran {len(timer.ms)} steps, expected {count}")
    print(json.dumps({"step_ms": timer.ms[a.warmup:], "loss": timer.loss, "threads": timer.threads}))


if __name__ == "__main__":
    main()
