"""run_cases.py --case NAME SCRIPT [ARGS...] [--case NAME SCRIPT [ARGS...]]...

Runs several reference checks in one Python process: each case is SCRIPT run as `python SCRIPT ARGS...` would run
it (runpy, as __main__, with its own sys.argv), one after the other, so torch, transformers and the other judges are
imported once per group instead of once per check (about 3.6 s of a 2-core machine's time each). Every case runs,
whatever the ones before it did; each prints its name, its exit status and its time, and the run exits 1 naming
every case that exited non-zero (a negative control exits 0 only when its check saw the planted difference, so it
is one case like the others). tests/TesseraTestReferenceCases.cmake makes the ctest groups.
"""
import os
import runpy
import sys
import time
import traceback


def parse(argv):
    cases = []
    for arg in argv:
        if arg == "--case":
            cases.append([])
        elif not cases:
            raise SystemExit(f"run_cases.py: '{arg}' comes before the first --case NAME SCRIPT; see the usage at the "
                             "top of this file")
        else:
            cases[-1].append(arg)
    if not cases:
        raise SystemExit("run_cases.py: no case given; say --case NAME SCRIPT [ARGS...]")
    for case in cases:
        if len(case) < 2:
            raise SystemExit(f"run_cases.py: the case {case} names no script; say --case NAME SCRIPT [ARGS...]")
        if not os.path.isfile(case[1]):
            raise SystemExit(f"run_cases.py: case {case[0]}: no script {case[1]}")
    return cases


def exit_status(code):
    """The status `python SCRIPT` would have exited with for sys.exit(code)."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def run(name, script, args):
    saved_argv, saved_path = sys.argv, list(sys.path)
    sys.argv = [script] + args
    sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
    try:
        runpy.run_path(script, run_name="__main__")
        return 0
    except SystemExit as stop:
        return exit_status(stop.code)
    except BaseException:  # a crash of one case is that case's failure, and the next case still runs
        traceback.print_exc()
        return 1
    finally:
        sys.argv, sys.path[:] = saved_argv, saved_path
        sys.stdout.flush()
        sys.stderr.flush()


def main():
    cases = parse(sys.argv[1:])
    failed = []
    for i, (name, script, *args) in enumerate(cases, 1):
        print(f"=== case {i}/{len(cases)} {name}: {os.path.basename(script)} {' '.join(args)}", flush=True)
        start = time.monotonic()
        status = run(name, script, args)
        print(f"=== case {i}/{len(cases)} {name}: {'passed' if status == 0 else f'FAILED (exit {status})'} in "
              f"{time.monotonic() - start:.1f} s", flush=True)
        if status != 0:
            failed.append(name)
    if failed:
        print(f"run_cases.py: {len(failed)} of {len(cases)} cases failed: {', '.join(failed)}", flush=True)
        return 1
    print(f"run_cases.py: all {len(cases)} cases passed", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
