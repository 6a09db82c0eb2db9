"""The group runner's own check (reference.run_cases_runner): run_cases.py runs every case whatever the others did,
gives each its own sys.argv and fresh globals, and fails the group when any case exits non-zero or raises."""
import os
import subprocess
import sys
import tempfile

RUNNER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_cases.py")
SCRIPTS = {
    "ok.py": "import sys\nsys.exit(0)\n",
    "fail.py": "import sys\nsys.exit(3)\n",
    "crash.py": "raise ValueError('planted')\n",
    # its arguments are its own, and a global set by an earlier run of the same script is gone
    "argv.py": "import sys\nassert 'seen' not in globals()\nseen = True\n"
               "assert sys.argv[1:] == ['--x', '1'], sys.argv\nprint('argv ok')\n",
}


def run(*args):
    return subprocess.run([sys.executable, RUNNER, *args], capture_output=True, text=True)


def main():
    with tempfile.TemporaryDirectory() as d:
        for name, text in SCRIPTS.items():
            with open(os.path.join(d, name), "w") as f:
                f.write(text)
        s = {n: os.path.join(d, n) for n in SCRIPTS}
        checks = []
        good = run("--case", "a", s["ok.py"], "--case", "b", s["argv.py"], "--x", "1",
                   "--case", "c", s["argv.py"], "--x", "1")
        checks.append(("passing cases pass", good.returncode == 0 and good.stdout.count("argv ok") == 2 and
                       "all 3 cases passed" in good.stdout))
        bad = run("--case", "a", s["fail.py"], "--case", "b", s["crash.py"], "--case", "c", s["ok.py"])
        checks.append(("a failing and a crashing case fail the group, and the case after them still runs",
                       bad.returncode == 1 and "2 of 3 cases failed: a, b" in bad.stdout and
                       "c: passed" in bad.stdout and "ValueError: planted" in bad.stderr))
        checks.append(("arguments before the first --case are refused", run(s["ok.py"]).returncode != 0))
        checks.append(("a case without a script is refused", run("--case", "a").returncode != 0))
        for what, ok in checks:
            print(("PASS " if ok else "FAIL ") + what)
        if not all(ok for _, ok in checks):
            print(good.stdout, good.stderr, bad.stdout, bad.stderr, sep="\n")
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
