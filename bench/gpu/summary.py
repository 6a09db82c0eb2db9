#!/usr/bin/env python3
"""Tables of bench/gpu/run.sh (markdown on stdout).

usage: summary.py perf RUNS WARMUP BATCH...
                                     per batch B, tessera (RUNS/tessera-1b-bB.jsonl) against the peers
                                     (RUNS/{eager,lightning,fsdp2}-1b-bB.json):
                                     ms/step and tokens/s over the steps after WARMUP, the ratio to the eager loop, MFU
                                     over the GEMM rate measured in the same call (RUNS/gemm.json) and over 989 TFLOP/s
                                     (H100/H200 SXM bf16 dense spec), peak memory (the caching allocator's peak)
       summary.py run FILE TITLE     one tessera metrics file: its memory per phase, step times, predicted and
                                     measured peak
       summary.py pair TESSERA.jsonl PEER.json WARMUP TITLE
                                     one tessera run beside one peers.py run of the same shape and settings: ms/step
                                     and tokens/s over the steps after WARMUP, peak memory, tessera's prediction
       summary.py seed002 RUNS BINARY...
                                     per catalogue step, tessera (RUNS/BINARY.jsonl) beside the lab's Lightning
                                     script (RUNS/lab-BINARY.json, bench/gpu/lab_blip2.py): measured peak (the caching
                                     allocator's), tessera's prediction, ms per optimizer step over the steps after the
                                     first, the losses
"""
import json
import os
import sys

SPEC = 989.4e12
GIB = 2**30


def records(path):
    if not os.path.exists(path):
        return []
    out = []
    for line in open(path):
        try:
            out.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return out


def tessera_side(path, warmup):
    recs = records(path)
    steps = [r for r in recs if r.get("event") == "step"]
    done = next((r for r in recs if r.get("event") == "done"), None)
    run = next((r for r in recs if r.get("event") == "run"), None)
    if not steps or done is None or len(steps) <= warmup:
        return None
    timed = steps[warmup:]
    ms = sum(r["step_ms"] for r in timed) / len(timed)
    return {"side": "tessera", "batch": run["batch_size"], "step_ms": ms,
            "tokens_per_s": timed[0]["tokens"] / (ms / 1e3), "peak_bytes": done["peak"],
            "predicted_peak": done.get("predicted_peak"), "flops_per_token": done.get("flops_per_token"),
            "loss": [r["loss"] for r in steps]}


def perf(runs, warmup, batch):
    gemm = records(os.path.join(runs, "gemm.json"))
    rate = gemm[-1]["bf16_gemm_tflops"] * 1e12 if gemm else None
    device = gemm[-1]["device"] if gemm else "?"
    sides = [tessera_side(os.path.join(runs, f"tessera-1b-b{batch}.jsonl"), warmup)]
    # run.sh's TESSERA_GPU_VARIANTS: the same run with other settings, RUNS/tessera-1b-bB-TAG.{jsonl,variant}
    for name in sorted(os.listdir(runs)):
        if name.startswith(f"tessera-1b-b{batch}-") and name.endswith(".variant"):
            v = tessera_side(os.path.join(runs, name[:-len(".variant")] + ".jsonl"), warmup)
            label = open(os.path.join(runs, name)).read().strip()
            sides.append(dict(v, side=f"tessera {label}") if v else {"side": f"tessera {label}", "batch": batch,
                                                                         "missing": True})
    for name in ("eager", "compiled", "lightning", "fsdp2"):
        r = records(os.path.join(runs, f"{name}-1b-b{batch}.json"))
        sides.append(r[-1] if r and "side" in r[-1] else {"side": name, "batch": batch, "missing": True})
    eager = next((s for s in sides if s and s.get("side") == "eager" and "tokens_per_s" in s), None)
    print(f"## llama-1b (TinyLlama-1.1B's shape), bf16, seq 2048, batch {batch}, AdamW, on {device}")
    print()
    if rate:
        print(f"Measured bf16 GEMM rate (8192^3, median of 20): {rate / 1e12:.0f} TFLOP/s; spec {SPEC / 1e12:.0f}.")
        print()
    print("| side | batch | ms/step | tokens/s | vs eager | MFU (measured GEMM) | MFU (spec) | peak GiB | vs eager | note |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for s in sides:
        if s is None:
            print(f"| tessera | {batch} | | | | | | | | no result (see log.txt) |")
            continue
        if s.get("missing") or s.get("oom") or "tokens_per_s" not in s:
            note = "out of memory" if s.get("oom") else "no result"
            peak = f"{s['peak_bytes'] / GIB:.2f}" if s.get("peak_bytes") else ""
            print(f"| {s['side']} | {s.get('batch', '')} | | | | | | {peak} | | {note} |")
            continue
        fpt = s.get("flops_per_token") or 0
        achieved = s["tokens_per_s"] * fpt
        ratio = f"{s['tokens_per_s'] / eager['tokens_per_s']:.3f}x" if eager else ""
        pratio = f"{s['peak_bytes'] / eager['peak_bytes']:.3f}" if eager and eager.get("peak_bytes") else ""
        note = ""
        if s.get("side") == "compiled" and s.get("warmup_s") is not None:
            note = f"mode {s.get('compile_mode', 'default')}; warm-up steps (compilation) {s['warmup_s']:.1f} s"
        if s.get("predicted_peak"):
            note = f"predicted peak {s['predicted_peak'] / GIB:.2f} GiB ({(s['predicted_peak'] / s['peak_bytes'] - 1) * 100:+.1f}%)"
        mfu_m = f"{achieved / rate * 100:.1f}%" if rate else ""
        peak = f"{s['peak_bytes'] / GIB:.2f}" if s.get("peak_bytes") else ""
        print(f"| {s['side']} | {s['batch']} | {s['step_ms']:.1f} | {s['tokens_per_s']:.0f} | {ratio} | {mfu_m} | "
              f"{achieved / SPEC * 100:.1f}% | {peak} | {pratio} | {note} |")
    print()


def pair(tessera_path, peer_path, warmup, title):
    t = tessera_side(tessera_path, warmup)
    p = records(peer_path)
    p = p[-1] if p and "side" in p[-1] else None
    print(f"## {title}")
    print()
    print("| side | ms/step | tokens/s | peak GiB | tessera / peer peak | peer / tessera time | note |")
    print("|---|---|---|---|---|---|---|")
    if t is None:
        print("| tessera | | | | | | no result (see log.txt) |")
    else:
        note = ""
        if t.get("predicted_peak"):
            note = f"predicted peak {t['predicted_peak'] / GIB:.2f} GiB ({(t['predicted_peak'] / t['peak_bytes'] - 1) * 100:+.1f}%)"
        ok = p is not None and "tokens_per_s" in p and p.get("peak_bytes")
        ratio = f"{t['peak_bytes'] / p['peak_bytes']:.3f}" if ok else ""
        speed = f"{p['step_ms'] / t['step_ms']:.2f}x" if ok else ""
        print(f"| tessera | {t['step_ms']:.1f} | {t['tokens_per_s']:.0f} | {t['peak_bytes'] / GIB:.2f} | {ratio} | {speed} | {note} |")
    if p is None or "tokens_per_s" not in p:
        print(f"| {p['side'] if p else 'peer'} | | | | | | {'out of memory' if p and p.get('oom') else 'no result'} |")
    else:
        peak = f"{p['peak_bytes'] / GIB:.2f}" if p.get("peak_bytes") else ""
        print(f"| {p['side']} | {p['step_ms']:.1f} | {p['tokens_per_s']:.0f} | {peak} | | | |")
    print()


def run(path, title):
    recs = records(path)
    print(f"## {title}")
    print()
    if not recs:
        print("no metrics (the run did not start or was cut off)")
        print()
        return
    mem = [r for r in recs if r.get("event") == "memory" and r.get("rank", 0) == 0]
    if mem:
        print("| step | phase | params | grads | optim | acts | allocated | peak | reserved |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in mem:
            g = lambda k: f"{r.get(k, 0) / GIB:.2f}"
            print(f"| {r['step']} | {r['phase']} | {g('params')} | {g('grads')} | {g('optim')} | {g('acts')} | "
                  f"{g('allocated')} | {g('peak')} | {g('reserved')} |")
        print()
    steps = [r for r in recs if r.get("event") == "step"]
    if steps:
        print("step ms: " + ", ".join(f"{r['step_ms']:.0f}" for r in steps) +
              "; loss: " + ", ".join(f"{r['loss']:.4f}" for r in steps))
    done = next((r for r in recs if r.get("event") == "done"), None)
    if done:
        pred = done.get("predicted_peak")
        line = f"peak {done['peak'] / GIB:.2f} GiB, {done['tokens_per_s']:.0f} tokens/s"
        if pred:
            line += f"; predicted peak {pred / GIB:.2f} GiB ({(pred / done['peak'] - 1) * 100:+.1f}%)"
        print(line)
    else:
        print("no done record: the run failed or was cut off (see log.txt)")
    print()


def seed002(runs, binaries):
    print("## Seed 002 at full size: tessera against the lab's Lightning script (bench/gpu/lab_blip2.py)")
    print()
    print("Random weights in the published shapes, synthetic images and captions; ms/step: the mean over the optimizer "
          "steps after the first.")
    print()
    print("| step | model | batch x accum | precision, optimizer | tessera peak GiB | predicted | lab peak GiB | "
          "tessera / lab | tessera ms/step | lab ms/step | lab / tessera time | losses tessera; lab |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for b in binaries:
        recs = records(os.path.join(runs, f"{b}.jsonl"))
        done = next((r for r in recs if r.get("event") == "done"), None)
        steps = [r for r in recs if r.get("event") == "step"]
        lab = records(os.path.join(runs, f"lab-{b}.json"))
        lab = lab[-1] if lab else {}

        def mean_after_first(ms):
            ms = ms[1:] if len(ms) > 1 else ms
            return sum(ms) / len(ms) if ms else None
        t_ms = mean_after_first([r["step_ms"] for r in steps])
        l_ms = mean_after_first(lab.get("step_ms", []))
        t_peak = done["peak"] / GIB if done else None
        pred = done.get("predicted_peak") if done else None
        l_peak = lab.get("peak_bytes", 0) / GIB if lab.get("step_ms") else None
        f = lambda x, fmt="{:.2f}": fmt.format(x) if x is not None else ("OOM" if lab.get("oom") else "-")
        ratio = f"{t_peak / l_peak:.3f}" if t_peak and l_peak else ""
        speed = f"{l_ms / t_ms:.2f}x" if t_ms and l_ms else ""
        pred_s = f"{pred / GIB:.2f} ({(pred / done['peak'] - 1) * 100:+.1f}%)" if pred and done else ""
        losses = (", ".join(f"{r['loss']:.3f}" for r in steps) + "; " +
                  ", ".join(f"{x:.3f}" for x in lab.get("loss", [])))
        settings = (f"{lab.get('batch', '')} x {lab.get('accum', '')}", f"{lab.get('precision', '')}, {lab.get('optim', '')}"
                    + (", LoRA" if lab.get("lora") else "") + (", ckpt" if lab.get("ckpt") else ""))
        print(f"| {b} | {lab.get('model', '')} | {settings[0]} | {settings[1]} | "
              f"{f(t_peak) if done else 'no result'} | {pred_s} | {f(l_peak)} | {ratio} | "
              f"{f(t_ms, '{:.0f}') if done else ''} | {f(l_ms, '{:.0f}')} | {speed} | {losses} |")
    print()
    for b in binaries:
        run(os.path.join(runs, f"{b}.jsonl"), f"tessera {b}: memory by phase")


def main():
    if sys.argv[1] == "seed002":
        seed002(sys.argv[2], sys.argv[3:])
        return 0
    if sys.argv[1] == "pair":
        pair(sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5])
        return 0
    if sys.argv[1] == "perf":
        for batch in sys.argv[4:]:
            perf(sys.argv[2], int(sys.argv[3]), batch)
            run(os.path.join(sys.argv[2], f"tessera-1b-b{batch}.jsonl"), f"tessera llama-1b, batch {batch}: memory by phase")
    else:
        run(sys.argv[2], sys.argv[3])
    return 0


if __name__ == "__main__":
    sys.exit(main())
