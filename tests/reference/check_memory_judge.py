#!/usr/bin/env python3
"""bench/memory_vs_hf.py's live-storage counter (LiveBytes), against hand counts and against torch's MemTracker.

The judge's figures are LiveBytes' sums over a training step that runs on the meta device; this checks that the
counter counts what an allocator would, on tiny models of the three layouts the judge builds (Llama: GQA, untied
lm_head; OPT: learned positions, tied lm_head, dropout 0.1; ViT: a patch convolution and a classifier), each in fp32,
two optimizer steps of two micro-batches each unless said otherwise (the judge's own loop, memory_vs_hf.run, with
zero_grad after the step as seed 003's loop does it):

  hand        on meta, bytes exact (no block rounding), against formulas from the config alone:
                parameters  the sum of the layers' shapes (embeddings, attention, MLP, norms, head), times 4;
                            the buffers (rotary inv_freq) are enumerated and must be all the rest of what is live
                gradients   after each backward: equal to the parameters
                AdamW       after step 0: state = 2 x parameters (exp_avg, exp_avg_sq; foreach's step counters
                            live in host memory and are not counted); the peak of the optimizer step = parameters
                            + gradients + state + one temporary of the parameters' size (foreach's
                            sqrt(exp_avg_sq)); fused: no temporary, plus one 4-byte fp32 step per tensor on the device
                SGD         no state; the step's peak = parameters + gradients
                8-bit Adam  (bitsandbytes, Llama only, when it imports) per tensor of >= 4,096 elements:
                            2 x numel uint8 + 2 fp32 absmax per 256-element block; below: 2 x numel fp32; plus the
                            two 256-entry fp32 maps
  memtracker  the same steps on real CPU tensors: torch.distributed._tools.mem_tracker.MemTracker and the counter
              watch the same run (both TorchDispatchModes), and the counter's peak and MemTracker's peak must be
              equal to the byte; then the run on meta (counting meta and host tensors) must equal the CPU run: the
              peak and every phase's live bytes and peak, to the byte, with eager attention and with sdpa (on
              meta through the kernel the CPU picks, its flash attention operator, as the judge calls the CUDA
              kernels' operators on meta). MemTracker needs no CUDA: on a CPU tensor it counts storage bytes unrounded.
  autocast    bf16-mixed (fp32 weights, the forward under autocast): the meta run under the judge's CudaAutocast
              against the CPU run under torch.autocast("cpu", torch.bfloat16), eager attention: peak and phases to
              the byte. CUDA's and the CPU's autocast lists differ (softmax, layer_norm, sum, pow are fp32 ops on
              CUDA only), but these models call those on fp32 tensors or with an explicit dtype, so here both lists
              give the same casts, and the comparison checks the mechanism: the casts recorded above autograd, the
              bf16 copies autograd saves, the weight-cast cache's lifetime.
  ddp         the judge's DdpBuckets on meta against torch's DistributedDataParallel(gradient_as_bucket_view=True)
              on the CPU (gloo, a one-rank group: the reducer, its buckets, the rebuild after the first iteration
              and the copies into bucket views all run), Lightning's loop with three micro-batches (no_sync for the
              first two) and the plain loop, at bucket_cap_mb 0.05 (several buckets) and (Llama) the default 25:
              peak and phases to the byte. gloo runs the all-reduce on its own thread, beside the main one; about
              one CPU run in twenty has shown one phase's bytes apart, not repeated in the next run, so a CPU run
              that differs is run once more (and said so) before it is judged.

usage: check_memory_judge.py [--perturb --expect-mismatch]
--perturb runs the counter under test with the wrong key, the tensor instead of its storage (every view, .grad
alias and saved transpose counted again): a negative control, which must then see a mismatch. Exit 0 when every
check passes, 1 when one fails, 2 when a run could not be made. With --expect-mismatch exit 0 only when the runs
were made and a comparison failed; the sections after the first that saw a mismatch are not run.
"""
import argparse
import contextlib
import os
import sys
import time
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
import torch  # noqa: E402
import transformers  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "bench"))
import memory_vs_hf as judge  # noqa: E402

try:
    import bitsandbytes  # noqa: F401
    HAVE_BNB = True
except Exception:  # noqa: BLE001
    HAVE_BNB = False

V, H, I, LAYERS, HEADS, KV, SEQ, BATCH = 512, 64, 128, 2, 4, 2, 32, 4
LLAMA = transformers.LlamaConfig(vocab_size=V, hidden_size=H, intermediate_size=I, num_hidden_layers=LAYERS,
                                 num_attention_heads=HEADS, num_key_value_heads=KV, max_position_embeddings=128,
                                 tie_word_embeddings=False)
OPT = transformers.OPTConfig(vocab_size=V, hidden_size=H, ffn_dim=I, num_hidden_layers=LAYERS,
                             num_attention_heads=HEADS, max_position_embeddings=128, word_embed_proj_dim=H,
                             dropout=0.1, do_layer_norm_before=True)
IMAGE, PATCH, CLASSES = 32, 8, 10
VIT = transformers.ViTConfig(hidden_size=H, num_hidden_layers=LAYERS, num_attention_heads=HEADS,
                             intermediate_size=I, image_size=IMAGE, patch_size=PATCH, num_labels=CLASSES)


def hand_params(family):
    """Parameter count from the config's shapes alone."""
    if family == "Llama":
        hd = H // HEADS
        layer = H * H + 2 * H * KV * hd + H * H + 3 * H * I + 2 * H
        return V * H + LAYERS * layer + H + V * H
    if family == "Opt":
        layer = 4 * (H * H + H) + 2 * H + (H * I + I) + (I * H + H) + 2 * H
        return V * H + (128 + 2) * H + LAYERS * layer + 2 * H  # OPT's learned positions have 2 extra rows
    n = (IMAGE // PATCH) ** 2
    layer = 2 * 2 * H + 3 * (H * H + H) + (H * H + H) + (H * I + I) + (I * H + H)
    return H + (n + 1) * H + (H * 3 * PATCH * PATCH + H) + LAYERS * layer + 2 * H + (H * CLASSES + CLASSES)


def adam8bit_state(model):
    n = 0
    for p in model.parameters():
        k = p.numel()
        n += 2 * k + 2 * 4 * (-(-k // 256)) if k >= 4096 else 2 * 4 * k
    return n + 2 * 256 * 4


def make(family, device, attn="eager"):
    cfg = {"Llama": LLAMA, "Opt": OPT, "Vit": VIT}[family]
    cfg._attn_implementation = attn
    cls = {"Llama": transformers.LlamaForCausalLM, "Opt": transformers.OPTForCausalLM,
           "Vit": transformers.ViTForImageClassification}[family]
    torch.manual_seed(0)
    with torch.device("meta" if device == "meta" else "cpu"):
        return cls(cfg).train()


def step(family):
    s = judge.Step()
    s.__dict__.update(family=family, seed="003", strategy="single", precision="32-true", batch=BATCH, seq=SEQ,
                      accum=2, ranks=1, lora=False, qlora=False, ckpt=False, model=family)
    return s


class Checks:
    def __init__(self):
        self.failed = []
        self.count = 0

    def eq(self, what, got, want, why=""):
        self.count += 1
        ok = got == want
        print(f"  {'ok  ' if ok else 'FAIL'} {what}: {got:,}" + ("" if ok else f" (expected {want:,}){why}"),
              flush=True)
        if not ok:
            self.failed.append(what)

    def same_phases(self, what, a, b):
        """Every phase's live bytes and the peak since the previous phase, run a against run b."""
        diff = [f"{p['label']}: live {p['total']:,} / {q['total']:,}, peak {p['peak']:,} / {q['peak']:,}"
                for p, q in zip(a.phases, b.phases) if (p["total"], p["peak"]) != (q["total"], q["peak"])]
        self.eq(what, len(diff), 0, "".join("\n         " + d for d in diff))


def phase(counter, label):
    return next(p for p in counter.phases if p["label"] == label)


def hand(checks, key):
    for family in ("Llama", "Opt", "Vit"):
        model = make(family, "meta")
        P = hand_params(family) * 4
        buffers = sum(b.numel() * b.element_size() for b in {id(b.untyped_storage()): b for b in model.buffers()}
                      .values())
        kinds = ["adamw", "adamw-fused", "sgd"] + (["adam8bit"] if family == "Llama" and HAVE_BNB else [])
        for kind in kinds:
            m = make(family, "meta")
            c = judge.run(step(family), kind, block=1, model=m, cuda=False, key=key)
            tag = f"{family} {kind}"
            first = phase(c, "step 0 micro 0 after backward")
            checks.eq(f"{tag}: parameters counted", first["params"], P)
            checks.eq(f"{tag}: gradients after backward = parameters", first["grads"], P)
            checks.eq(f"{tag}: nothing else live after backward but the buffers", first["other"], buffers)
            after = phase(c, "step 0 after the optimizer step")
            ntensors = len(list(m.parameters()))
            state = {"adamw": 2 * P, "adamw-fused": 2 * P + 4 * ntensors, "sgd": 0,
                     "adam8bit": adam8bit_state(m)}[kind]
            checks.eq(f"{tag}: optimizer state after step 0", after["optim"], state)
            temp = P if kind == "adamw" else 0
            checks.eq(f"{tag}: peak of the optimizer step = params + grads + state + temporaries", after["peak"],
                      P + buffers + P + state + temp)
            checks.eq(f"{tag}: live after step 1 = params + state (+ buffers)",
                      phase(c, "step 1 after the optimizer step")["total"], P + buffers + state)


_SDPA = torch.nn.functional.scaled_dot_product_attention


def cpu_flash_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """The CPU's choice for these unmasked calls (its flash attention kernel, which takes grouped keys and values as
    they are), as the aten operator on meta: the judge's CUDA stand-in does the same with the CUDA kernels."""
    return torch.ops.aten._scaled_dot_product_flash_attention_for_cpu(query, key, value, dropout_p, is_causal,
                                                                      attn_mask=attn_mask, scale=scale)[0]


@contextlib.contextmanager
def attention(impl):
    if impl == "sdpa-cpu-kernel":
        torch.nn.functional.scaled_dot_product_attention = cpu_flash_sdpa
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = _SDPA


def against_memtracker(checks, key):
    from torch.distributed._tools.mem_tracker import MemTracker
    for family in ("Llama", "Opt", "Vit"):
        for kind, impl in (("adamw", "eager"), ("adamw-fused", "eager"), ("adamw", "sdpa")):
            tracker = MemTracker()

            @contextlib.contextmanager
            def around(model, opt):
                tracker.track_external(model, opt)
                with tracker:
                    yield

            cpu = judge.run(step(family), kind, block=1, model=make(family, "cpu", impl), device="cpu",
                            cuda=False, around=around, key=key, before_forward=tracker.reset_mod_stats)
            mt_peak = tracker.get_tracker_snapshot("peak")[torch.device("cpu")]["Total"]
            tag = f"{family} {kind} {impl}"
            checks.eq(f"{tag}: CPU run, counter peak = MemTracker peak", cpu.peak, mt_peak)
            with attention("sdpa-cpu-kernel" if impl == "sdpa" else impl):
                meta = judge.run(step(family), kind, block=1, model=make(family, "meta", impl), device="meta",
                                 cuda=False, count=("meta", "cpu"))
            checks.eq(f"{tag}: meta run peak = CPU run peak", meta.peak, cpu.peak)
            checks.same_phases(f"{tag}: phases whose live bytes or peak differ between meta and CPU", meta, cpu)


def autocast(checks, key):
    for family in ("Llama", "Opt", "Vit"):
        s = step(family)
        s.precision = "bf16-mixed"
        cpu = judge.run(s, "adamw", block=1, model=make(family, "cpu"), device="cpu", cuda=False, key=key)
        meta = judge.run(s, "adamw", block=1, model=make(family, "meta"), device="meta", cuda=False,
                         count=("meta", "cpu"))
        tag = f"{family} bf16-mixed"
        checks.eq(f"{tag}: meta run under CudaAutocast, peak = CPU run under torch.autocast", meta.peak, cpu.peak)
        checks.same_phases(f"{tag}: phases whose live bytes or peak differ", meta, cpu)


def against_torch_ddp(checks, key):
    import tempfile
    import torch.distributed as dist
    cases = (("Llama", "002", 3, 0.05), ("Llama", "003", 1, 0.05), ("Llama", "002", 1, None),
             ("Opt", "002", 3, 0.05), ("Vit", "002", 3, 0.05))
    with tempfile.TemporaryDirectory() as tmp:
        dist.init_process_group("gloo", init_method=f"file://{tmp}/store", rank=0, world_size=1)
        try:
            for family, seed, accum, cap in cases:
                s = step(family)
                s.seed, s.accum, s.strategy = seed, accum, "ddp"
                meta = judge.run(s, "adamw", block=1, model=make(family, "meta"), device="meta", cuda=False,
                                 count=("meta", "cpu"), ddp_cap_mb=cap)
                tag = f"{family} {judge.LOOP[seed]} x{accum} bucket_cap_mb={cap or 25}"
                for attempt in (1, 2):
                    cpu = judge.run(s, "adamw", block=1, model=make(family, "cpu"), device="cpu", cuda=False,
                                    key=key, ddp_cap_mb=cap)
                    if [(p["total"], p["peak"]) for p in cpu.phases] == \
                            [(p["total"], p["peak"]) for p in meta.phases]:
                        break
                    if attempt == 1:  # gloo runs the all-reduce on its own thread: one more run before judging
                        print(f"  (the CPU run of {tag} differs from the meta run; running it once more)")
                checks.eq(f"{tag}: DdpBuckets on meta, peak = torch DDP on the CPU", meta.peak, cpu.peak)
                checks.same_phases(f"{tag}: phases whose live bytes or peak differ", meta, cpu)
        finally:
            dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--expect-mismatch", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    key = "tensor" if a.perturb else "storage"
    checks = Checks()
    t0 = time.time()
    sections = (
        ("hand counts (meta, bytes exact):" + ("" if HAVE_BNB else " (no bitsandbytes: 8-bit Adam skipped)"), hand),
        ("MemTracker (CPU) and meta against CPU:", against_memtracker),
        ("bf16-mixed: the autocast stand-in on meta against torch.autocast on the CPU:", autocast),
        ("DDP: the bucket emulation on meta against torch DDP on the CPU (gloo, one rank):", against_torch_ddp))
    try:
        for title, section in sections:
            print(title)
            section(checks, key)
            if a.expect_mismatch and checks.failed:  # the negative control has what it needs: the rest is not run
                break
    except Exception as e:  # noqa: BLE001
        print(f"a run could not be made: {type(e).__name__}: {e}")
        return 2
    print(f"{checks.count - len(checks.failed)} of {checks.count} checks passed in {time.time() - t0:.1f} s")
    if a.expect_mismatch:
        print("negative control: " + ("the mismatch was seen" if checks.failed else "NO mismatch was seen"))
        return 0 if checks.failed else 1
    return 1 if checks.failed else 0


if __name__ == "__main__":
    sys.exit(main())
