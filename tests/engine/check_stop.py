#!/usr/bin/env python3
"""How a run ends when the machine, not the code, ends it: preemption, a dead or stuck rank, a full disk.

  check_stop.py preempt BIN RANKS SIGNAL   SIGNAL (TERM or USR1) to one rank in step 3: every rank checkpoints at
                                           the same step boundary and exits 0; resume=auto continues from there
  check_stop.py dead    BIN RANKS          kill -9 of the last rank in step 3: the job ends, non-zero, in seconds;
                                           the next run removes rank 0's metrics file left unfinished
  check_stop.py stuck   BIN RANKS          SIGSTOP of the last rank (it sleeps in the middle of a step): the others'
                                           collective watchdog ends the job after collective_timeout_s, naming the
                                           rank, the collective and the step, and removes rank 0's unfinished
                                           metrics file
  check_stop.py disk    BIN                writes past RLIMIT_FSIZE (the kernel refuses them, as a full disk does):
                                           a checkpoint and a save_dir fail with a clear error, the last good
                                           checkpoint stays intact and resumable, nothing partial is left

Each prints the time it measured. Environment: MPIEXEC (mpirun) for RANKS > 1.
"""
import atexit
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

from runs import command, enter_work_dir

BASE = ["model=tiny", "seq_len=32", "batch_size=2", "predict=false", "log_every=1"]


def run(binary, ranks, args, limit_bytes=None, expect_ok=True):
    def limit():
        if limit_bytes is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # write() then fails with EFBIG, as with ENOSPC
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, limit_bytes))
    cmd = command(binary, ranks, BASE, args)
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, timeout=300,
                       preexec_fn=limit)
    if expect_ok and p.returncode != 0:
        sys.exit(f"FAIL: {' '.join(cmd)} exited {p.returncode}:\n{p.stdout[-3000:]}")
    return p.returncode, p.stdout


def ranks_of(proc, ranks):
    """The rank processes: the launcher's children under mpirun, the process itself otherwise."""
    if ranks == 1:
        return [proc.pid]
    for _ in range(100):
        out = subprocess.run(["pgrep", "-P", str(proc.pid)], stdout=subprocess.PIPE, text=True).stdout.split()
        if len(out) >= ranks:
            return sorted(int(p) for p in out)
        time.sleep(0.1)
    sys.exit(f"FAIL: found {out} under mpirun, not {ranks} ranks")


def start_and_hit(binary, ranks, args, sig, at_step=3):
    """Starts a long run, sends `sig` to its last rank once step `at_step` is printed; returns (rc, output, seconds
    from the signal to the end of the job)."""
    proc = subprocess.Popen(command(binary, ranks, BASE, args), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True)
    atexit.register(lambda: proc.poll() is None and proc.kill())
    lines, sent = [], None
    for line in proc.stdout:
        lines.append(line)
        if sent is None and line.startswith(f"step {at_step}/"):
            victim = ranks_of(proc, ranks)[-1]
            os.kill(victim, sig)
            sent = time.monotonic()
    rc = proc.wait()
    if sent is None:
        sys.exit("FAIL: the run ended before step %d:\n%s" % (at_step, "".join(lines)[-3000:]))
    return rc, "".join(lines), time.monotonic() - sent


def main():
    mode, binary = sys.argv[1], sys.argv[2]
    enter_work_dir("stop-")
    if mode == "preempt":
        ranks, name = int(sys.argv[3]), sys.argv[4]
        sig = {"TERM": signal.SIGTERM, "USR1": signal.SIGUSR1}[name]
        rc, out, seconds = start_and_hit(binary, ranks, ["max_steps=3000", "checkpoint_dir=c"], sig)
        marker = "[checkpoint] stopped by a signal after step "
        if rc != 0 or marker not in out:
            sys.exit(f"FAIL: SIG{name} on one rank: exit {rc}, no stop line:\n{out[-3000:]}")
        step = int(out.split(marker)[1].split()[0])
        ckpt = Path("c") / f"step-{step:08d}"
        if not (ckpt / "manifest.json").is_file() or any(".partial-" in p.name for p in Path("c").iterdir()):
            sys.exit(f"FAIL: after the stop, c holds {sorted(p.name for p in Path('c').iterdir())}")
        _, resumed = run(binary, ranks, [f"max_steps={step + 2}", "checkpoint_dir=c", "resume=auto"])
        if f"resumed from {ckpt} at step {step}" not in resumed or f"step {step + 2}/{step + 2}" not in resumed:
            sys.exit("FAIL: resume=auto did not continue from the stop:\n" + resumed[-2000:])
        print(f"ok: SIG{name} to one of {ranks} rank(s) in step 3: all stopped after step {step} with a checkpoint, "
              f"exit 0, {seconds:.2f} s after the signal; resume=auto went on from step {step}")
    elif mode == "dead":
        ranks = int(sys.argv[3])
        # With checkpoint_dir, the launcher's SIGTERM to the survivors asks for a checkpoint (preemption), and its
        # SIGKILL a second later ends them in their collective: rank 0's metrics file is left unfinished. The next
        # run writing that file removes it.
        rc, out, seconds = start_and_hit(binary, ranks, ["max_steps=3000", "checkpoint_dir=c", "metrics=m.jsonl"],
                                         signal.SIGKILL)
        if rc == 0 or seconds > 30:
            sys.exit(f"FAIL: kill -9 of a rank: exit {rc} after {seconds:.1f} s:\n{out[-3000:]}")
        named = [line for line in out.splitlines() if "when the signal came" in line]
        left = sorted(p.name for p in Path(".").iterdir() if p.name.startswith("m.jsonl.partial-"))
        for name in left:  # the killed rank's process may take a moment to be gone after mpirun has returned
            pid = name.split("-")[1]
            for _ in range(100):
                if not Path(f"/proc/{pid}").exists():
                    break
                time.sleep(0.05)
        _, again = run(binary, ranks, ["max_steps=1", "metrics=m.jsonl"])
        now = sorted(p.name for p in Path(".").iterdir() if p.name.startswith("m.jsonl"))
        if now != ["m.jsonl"] or any(f"removed {name}" not in again for name in left):
            sys.exit(f"FAIL: after the killed run left {left}, the next run left {now}:\n{again[-2000:]}")
        print(f"ok: kill -9 of one of {ranks} ranks in step 3: the job ended (exit {rc}) {seconds:.2f} s later; "
              f"{len(named)} surviving rank(s) named their collective" + (f", e.g. {named[0]!r}" if named else "") +
              f"; the next run removed the unfinished {left}")
    elif mode == "stuck":
        ranks = int(sys.argv[3])
        timeout = 3
        rc, out, seconds = start_and_hit(binary, ranks, ["max_steps=3000", f"collective_timeout_s={timeout}",
                                                         "metrics=m.jsonl"], signal.SIGSTOP)
        lines = [line for line in out.splitlines() if "collective watchdog" in line]
        if rc == 0 or not lines or " in step " not in lines[0] or "[rank " not in lines[0] or seconds > timeout + 20:
            sys.exit(f"FAIL: a stopped rank: exit {rc} after {seconds:.1f} s, watchdog lines {lines}:\n{out[-3000:]}")
        # Rank 0 writes the metrics; its watchdog, or the signal of the launcher ending it after another rank's
        # watchdog, removes the unfinished file.
        left = sorted(p.name for p in Path(".").iterdir() if p.name.startswith("m.jsonl"))
        if left or "removed the unfinished output" not in out:
            sys.exit(f"FAIL: the watchdog's exit left {left}:\n{out[-3000:]}")
        print(f"ok: one of {ranks} ranks stopped in step 3: the watchdog (collective_timeout_s={timeout}) ended the job "
              f"(exit {rc}) {seconds:.2f} s later: {lines[0]!r}")
    elif mode == "disk":
        run(binary, 1, ["max_steps=2", "checkpoint_dir=c"])
        good = Path("c/step-00000002")
        before = {p.name: p.read_bytes() for p in good.iterdir()}
        limit = 4 << 20  # under one checkpoint file of the tiny model (tens of MB)
        rc, out = run(binary, 1, ["max_steps=4", "checkpoint_dir=c", "checkpoint_every=1", "resume=auto",
                                  "metrics=m.jsonl"], limit_bytes=limit, expect_ok=False)
        for want in ("File too large", "nothing of step 3 was kept", "c/step-00000002, is intact"):
            if rc == 0 or want not in out:
                sys.exit(f"FAIL: checkpoint on a full disk: exit {rc}, no {want!r} in:\n{out[-3000:]}")
        left = sorted(p.name for p in Path("c").iterdir())
        if left != ["step-00000002"] or {p.name: p.read_bytes() for p in good.iterdir()} != before:
            sys.exit(f"FAIL: after the failed checkpoint c holds {left} (or step 2 changed)")
        if any(p.name.startswith("m.jsonl") for p in Path(".").iterdir()):
            sys.exit("FAIL: the failed run left its metrics file")
        rc, out = run(binary, 1, ["max_steps=1", "save_dir=out"], limit_bytes=limit, expect_ok=False)
        if rc == 0 or "File too large" not in out or any(p.name.startswith("out") for p in Path(".").iterdir()):
            sys.exit(f"FAIL: save_dir on a full disk: exit {rc}, left {sorted(os.listdir('.'))}:\n{out[-2000:]}")
        _, out = run(binary, 1, ["max_steps=4", "checkpoint_dir=c", "resume=auto"])
        if "resumed from c/step-00000002 at step 2" not in out:
            sys.exit("FAIL: the intact checkpoint did not resume:\n" + out[-2000:])
        print("ok: a write refused by the kernel (EFBIG) failed the checkpoint of step 3 and the save_dir cleanly; "
              "step 2 stayed intact and resumed")
    else:
        sys.exit(f"unknown mode {mode}")


if __name__ == "__main__":
    main()
