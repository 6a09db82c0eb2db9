"""The tessera side of the reference checks: run an example binary with key=value arguments and read its
per-step losses; compare them with the reference's; the rows tessera reads at each micro-step, and the
reference side's training loop over them; the work directory of a check and its exit code. Shared by the
reference checks."""
import json
import os
import socket
import subprocess
import sys
import tempfile


def run(exe, args, extra, launcher=(), env=None, timeout_s=240):
    """Runs EXE with args (a dict) where each "key=value" of extra replaces that key (tessera refuses a key given
    twice), behind launcher (e.g. ["mpiexec", "-n", "4"]) in environment env. Returns the losses of the metrics file
    args["metrics"], or None after printing why tessera failed or that it ran past timeout_s (every check's runs
    take seconds: a longer one is a hang, to be reported before the test's own TIMEOUT ends it silently)."""
    args = dict(args)
    for kv in extra:
        key, _, value = kv.partition("=")
        args[key] = value
    cmd = list(launcher) + [exe] + [f"{k}={v}" for k, v in args.items()]
    try:
        proc = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, env=env,
                              timeout=timeout_s)
    except subprocess.TimeoutExpired as e:
        print((e.stderr or "")[-4000:] if isinstance(e.stderr, str) else "", file=sys.stderr)
        print(f"ERROR: tessera ran past {timeout_s} s and was stopped: {' '.join(cmd)}", flush=True)
        return None
    if proc.returncode != 0:
        print(proc.stderr[-4000:], file=sys.stderr)
        print(f"ERROR: tessera exited with {proc.returncode}: {' '.join(cmd)}")
        return None
    return [json.loads(line)["loss"] for line in open(args["metrics"]) if '"event":"step"' in line]


def compare_losses(ours, theirs):
    """Prints the per-step table; returns the worst relative difference."""
    worst = 0.0
    for s, (x, y) in enumerate(zip(ours, theirs)):
        rel = abs(x - y) / abs(y)
        worst = max(worst, rel)
        print(f"step {s:3d}  tessera {x:.7f}  reference {y:.7f}  rel {rel:.2e}")
    return worst


def batch(tokens, step, micro, accumulate, rows, seq_len):
    """tessera's documented order (docs/architecture.md, data order): chunk c = step*A + micro of rows*T+1 tokens,
    wrapping when fewer remain; row r is inputs [start + r*T, +T) and the targets one token later."""
    chunk_tokens = rows * seq_len
    chunks = (tokens.numel() - 1) // chunk_tokens
    start = ((step * accumulate + micro) % chunks) * chunk_tokens
    span = tokens[start:start + chunk_tokens + 1]
    return span[:-1].reshape(rows, seq_len), span[1:].reshape(rows, seq_len)


def train_loop(loss_fn, opt, tokens, steps, accumulate, rows, seq_len):
    """Steps of the reference side over tessera's batch order: loss_fn(inputs, targets) per micro-step, gradients
    averaged over the micro-steps, one opt.step() per step. Returns the mean loss of each step."""
    losses = []
    for s in range(steps):
        total = 0.0
        for m in range(accumulate):
            x, y = batch(tokens, s, m, accumulate, rows, seq_len)
            loss = loss_fn(x, y)
            (loss / accumulate).backward()
            total += loss.item()
        opt.step()
        opt.zero_grad(set_to_none=True)
        losses.append(total / accumulate)
    return losses


def local_init_method(directory):
    """A torch.distributed rendezvous for ranks that all run on this host: a FileStore file in directory, which must
    be this job's own (a TCP port picked in advance can be taken by a job running beside this one, whose ranks then
    meet this job's and both hang), with gloo kept on the loopback device rather than whatever the hostname resolves
    to."""
    if "GLOO_SOCKET_IFNAME" not in os.environ and any(n == "lo" for _, n in socket.if_nameindex()):
        os.environ["GLOO_SOCKET_IFNAME"] = "lo"
    return "file://" + os.path.join(os.path.abspath(directory), "rendezvous")


def in_work_dir(keep, work):
    """work(d) in the directory --keep names (made, and kept afterwards) or in a temporary one; its result."""
    if keep:
        os.makedirs(keep, exist_ok=True)
        return work(keep)
    with tempfile.TemporaryDirectory() as d:
        return work(d)


def verdict(ok, expect_mismatch):
    """The exit code of a check whose comparison gave ok (None: a side did not run, 2), printing PASS or FAIL; a
    negative control (expect_mismatch) passes only when the comparison failed."""
    if ok is None:
        return 2
    print("PASS" if ok else "FAIL")
    if expect_mismatch:
        print("negative control: " + ("mismatch seen, as expected" if not ok else "NO mismatch: the check is blind"))
        return 0 if not ok else 1
    return 0 if ok else 1


def load_saved_dir(cls, path):
    """cls.from_pretrained(path) (a transformers class) in fp32 and eval mode, with whether it loaded cleanly: (model,
    True), or (model, False) printing its missing, unexpected or mismatched keys, or (None, False) printing why it
    refused the directory."""
    import torch
    try:
        model, info = cls.from_pretrained(path, dtype=torch.float32, output_loading_info=True)
    except Exception as e:  # noqa: BLE001 - any refusal is tessera's directory at fault
        print(f"transformers cannot load tessera's saved directory: {e}")
        return None, False
    model.eval()
    unused = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if unused:
        print(f"from_pretrained of tessera's saved directory reports {unused}")
    return model, not unused


def rel_diff(mine, theirs):
    """max |mine - theirs| / max |theirs| of two tensors, in float64."""
    mine, theirs = mine.detach().double(), theirs.detach().double()
    return ((mine - theirs).abs().max() / theirs.abs().max().clamp_min(1e-30)).item()
