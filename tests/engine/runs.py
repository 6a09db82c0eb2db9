"""What check_resume.py and check_stop.py share: the command line of an example binary's run on RANKS ranks
(mpirun, or the MPIEXEC of the environment, past one), and a private working directory for the checkpoints and
metrics a check writes, removed at exit."""
import atexit
import os
import shutil
import tempfile
from pathlib import Path


def command(binary, ranks, base, args):
    cmd = [binary] + base + args
    if ranks > 1:
        cmd = [os.environ.get("MPIEXEC", "mpirun"), "-np", str(ranks), "--oversubscribe"] + cmd
    return cmd


def enter_work_dir(prefix):
    work = Path(tempfile.mkdtemp(prefix=prefix))
    atexit.register(shutil.rmtree, work, True)
    os.chdir(work)
    return work
