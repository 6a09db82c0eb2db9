#!/usr/bin/env python3
"""tessera's training FLOPs per token (LlamaConfig / OptConfig::training_flops_per_token, report/mfu.hpp) against
what PyTorch's own FLOP counter (torch.utils.flop_counter.FlopCounterMode) counts for one forward and backward of
transformers' LlamaForCausalLM / OPTForCausalLM (eager attention, so its score and value matmuls are counted as the
formula counts them, the causal mask not discounted), divided by the tokens.

For each shape (a GQA Llama with untied head, a tied one, OPT with and without project_in/out) the script writes a
Hugging Face directory, runs the example binary one step on it (model_dir=, seq_len=T, metrics=) and reads
flops_per_token from its done record. The two must agree to 1e-6 relative: the formula counts the matmuls the model
runs, and FlopCounterMode counts exactly those (norms, activations and the loss are not matmuls), less the one
matmul of Llama's rotary table (inv_freq times the positions, no weight), which is taken out of the count.

usage: check_flops.py LLAMA_EXE OPT_EXE [--perturb --expect-mismatch]
--perturb scales the reference by 1.001: a negative control, which must then see a mismatch.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402
from transformers import LlamaConfig, LlamaForCausalLM, OPTConfig, OPTForCausalLM  # noqa: E402

SEQ, ROWS = 48, 2
SHAPES = [
    ("llama-gqa-untied", LlamaForCausalLM, LlamaConfig(vocab_size=512, hidden_size=64, intermediate_size=176,
                                                        num_hidden_layers=3, num_attention_heads=8,
                                                        num_key_value_heads=2, max_position_embeddings=128,
                                                        tie_word_embeddings=False)),
    ("llama-tied", LlamaForCausalLM, LlamaConfig(vocab_size=384, hidden_size=96, intermediate_size=256,
                                                  num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=6,
                                                  max_position_embeddings=128, tie_word_embeddings=True)),
    ("opt", OPTForCausalLM, OPTConfig(vocab_size=512, hidden_size=64, ffn_dim=256, num_hidden_layers=3,
                                      num_attention_heads=4, max_position_embeddings=128, word_embed_proj_dim=64)),
    ("opt-projections", OPTForCausalLM, OPTConfig(vocab_size=400, hidden_size=96, ffn_dim=192, num_hidden_layers=2,
                                                  num_attention_heads=4, max_position_embeddings=128,
                                                  word_embed_proj_dim=48)),
]


def reference_flops_per_token(cls, config):
    torch.manual_seed(0)
    config._attn_implementation = "eager"
    model = cls(config).float()
    ids = torch.randint(3, config.vocab_size, (ROWS, SEQ))
    with FlopCounterMode(display=False) as counter:
        out = model(input_ids=ids, labels=ids)
        out.loss.backward()
    total = counter.get_total_flops()
    if cls is LlamaForCausalLM:
        # The rotary table: transformers computes inv_freq (head_dim / 2) @ positions (1, T) once per forward, a
        # matmul of no weight: 2 * (head_dim / 2) * T FLOPs, which the formula rightly leaves out.
        head_dim = config.hidden_size // config.num_attention_heads
        total -= 2 * (head_dim // 2) * SEQ
    return total / (ROWS * SEQ), model


def tessera_flops_per_token(exe, model_dir, work):
    metrics = os.path.join(work, "m.jsonl")
    cmd = [exe, f"model_dir={model_dir}", f"seq_len={SEQ}", f"batch_size={ROWS}", "max_steps=1", "threads=1",
           f"metrics={metrics}", "num_train_samples=8"]
    run = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, timeout=240)
    if run.returncode != 0:
        print(run.stderr[-3000:])
        return None
    done = [json.loads(line) for line in open(metrics) if '"event":"done"' in line]
    return done[-1].get("flops_per_token") if done else None


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("llama_exe")
    parser.add_argument("opt_exe")
    parser.add_argument("--perturb", action="store_true")
    parser.add_argument("--expect-mismatch", action="store_true")
    args = parser.parse_args()
    worst = 0.0
    with tempfile.TemporaryDirectory() as tmp:
        for name, cls, config in SHAPES:
            want, model = reference_flops_per_token(cls, config)
            if args.perturb:
                want *= 1.001
            model_dir = os.path.join(tmp, name)
            model.save_pretrained(model_dir)
            exe = args.llama_exe if cls is LlamaForCausalLM else args.opt_exe
            got = tessera_flops_per_token(exe, model_dir, tmp)
            if got is None:
                print(f"{name}: tessera did not run or wrote no flops_per_token")
                return 2
            rel = abs(got - want) / want
            worst = max(worst, rel)
            print(f"{name:18s} tessera {got:14.1f}  FlopCounterMode {want:14.1f}  rel {rel:.2e}")
    ok = worst <= 1e-6
    print(f"worst relative difference {worst:.2e} (tolerance 1e-6)")
    if args.expect_mismatch:
        return 0 if not ok else 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
