"""What check_resume.py and check_stop.py share: the command line of an example binary's run on RANKS ranks
(mpirun, or the MPIEXEC of the environment, past one), and a private working directory for the checkpoints and
metrics a check writes, removed at exit; and, with tests/sharding/compare_runs.py, a reader of safetensors files
from the format's definition (standard library only: none of them imports torch)."""
import atexit
import json
import os
import shutil
import struct
import tempfile
from pathlib import Path


def read_safetensors(path):
    """({name: (dtype, shape, raw bytes)}, metadata) of one safetensors file: an 8-byte little-endian header length,
    the JSON header, the tensors' bytes at their offsets."""
    data = Path(path).read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    body = data[8 + n:]
    tensors = {k: (v["dtype"], v["shape"], body[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in header.items()}
    return tensors, meta


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
