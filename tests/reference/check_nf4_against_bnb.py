#!/usr/bin/env python3
"""tessera's NF4 (quant/nf4.hpp, the base of QLora) against bitsandbytes' quantize_4bit / dequantize_4bit
(quant_type "nf4", blocksize 64, CPU), without and with double quantization of the block scales
(compress_statistics=True against tessera's double_quant).

The cases, random and edge: normal weights of several shapes (sizes not a multiple of the block, an odd numel, a
1-D tensor, 2^20 values that split into many parallel chunks), a bf16 weight, all-zero blocks, a block with one
huge value, blocks whose largest magnitude is negative, values exactly on the midpoints between two code values
(ties), and blocks of subnormal magnitude. tessera_nf4_dump (tests/quant/nf4_dump.cpp) quantizes each tensor with
nf4_quantize and writes the packed codes, the absmax, the double-quantized absmax (codes, their absmax, offset)
and both dequantizations.

Checks, all bit-exact (the same fp32 operations, so nothing may differ): the packed bytes (two codes per byte,
element 2i in the high nibble, as bitsandbytes packs), the absmax, the double-quantization codes, absmax and
offset, and the dequantized values (tessera's nf4_dequantize against dequantize_4bit of bitsandbytes' own
quantization).

usage: check_nf4_against_bnb.py NF4_DUMP [--perturb --expect-mismatch]
--perturb hands bitsandbytes the tensors with one value of the first case replaced by minus its block's extreme
value (another code): a negative control, which must then see a mismatch. With --expect-mismatch exit 0 only when
tessera ran and the comparison failed. Exit 0 when every check passes, 1 when one fails, 2 when the dump fails.
"""
import argparse
import os
import subprocess
import sys
import tempfile
import warnings

import torch

warnings.filterwarnings("ignore")
import bitsandbytes.functional as bnbf  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402

BLOCK = 64


def cases():
    g = torch.Generator().manual_seed(5)
    out = {
        "normal_64x128": torch.randn(64, 128, generator=g) * 0.02,
        "normal_7x37": torch.randn(7, 37, generator=g),  # 259 values: 4 blocks and 3 more; odd numel
        "normal_1001": torch.randn(1001, generator=g) * 3.0,
        "normal_3x100": torch.randn(3, 100, generator=g),  # rows that are not whole blocks
        "normal_1Mi": torch.randn(1024, 1024, generator=g),
        "bf16_96x64": (torch.randn(96, 64, generator=g) * 0.05).to(torch.bfloat16),
        "uniform_wide": (torch.rand(40, 64, generator=g) * 2 - 1) * 1e4,
    }
    z = torch.randn(6, BLOCK, generator=g)
    z[1] = 0
    z[4] = 0
    out["zero_blocks"] = z.reshape(-1)
    out["all_zero_130"] = torch.zeros(130)
    h = torch.randn(4, BLOCK, generator=g) * 0.01
    h[2, 17] = 1e6  # one huge value: the rest of its block rounds to code 7 (0.0)
    out["huge_value"] = h.reshape(-1)
    s = torch.randn(3, BLOCK, generator=g)
    for b in range(3):
        k = int(s[b].abs().argmax())
        s[b, k] = -(s[b].abs().max() + 1.0)  # the block's largest magnitude is negative: code 0 (-1.0)
    out["negative_extreme"] = s.reshape(-1)
    # Ties: absmax 1 (the first value) and then every midpoint between neighbouring code values, computed in fp32
    # as both sides do; a tie must go to the lower code on both.
    code = bnbf.get_4bit_type("nf4", device="cpu")
    mids = (code[:-1] + code[1:]) / 2
    out["midpoints"] = torch.cat([torch.tensor([1.0]), mids, -mids, torch.zeros(BLOCK - 1 - 2 * mids.numel())])
    # Subnormal block magnitudes: 1/absmax overflows fp32 below about 2.9e-39 (bitsandbytes clamps absmax to 1e-38
    # before the reciprocal).
    tiny = torch.randn(2, BLOCK, generator=g) * 1e-40
    tiny[1, :8] = 0
    out["subnormal"] = tiny.reshape(-1)
    return out


def perturb(t):
    t = t.clone()
    flat = t.view(-1)
    block = flat[:BLOCK]
    extreme = block[block.abs().argmax()]
    flat[1] = -extreme
    return t


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump")
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--expect-mismatch", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(1)
    inputs = cases()
    with tempfile.TemporaryDirectory() as d:
        src, dst = os.path.join(d, "in.safetensors"), os.path.join(d, "out.safetensors")
        save_file({k: v.contiguous() for k, v in inputs.items()}, src)
        proc = subprocess.run([a.dump, src, dst, str(BLOCK)], stderr=subprocess.PIPE, text=True)
        if proc.returncode != 0:
            print(proc.stderr[-4000:])
            print(f"ERROR: {a.dump} exited with {proc.returncode}")
            return 2
        ours = load_file(dst)
    ok = True
    for i, (name, w) in enumerate(inputs.items()):
        theirs_in = perturb(w) if a.perturb and i == 0 else w
        ok = compare(name, w, theirs_in, ours) and ok
    print(f"double quantization: {FLIPS['count']} near-tie flips in {FLIPS['values']} absmax codes, the farthest "
          f"{FLIPS['worst_band']:.2e} of the block's absmax from the midpoint (accepted up to {TIE_BAND:g})")
    print("PASS" if ok else "FAIL")
    if a.expect_mismatch:
        print("negative control: " + ("mismatch seen, as expected" if not ok else "NO mismatch: the check is blind"))
        return 0 if not ok else 1
    return 0 if ok else 1


def unpack(packed, n):
    codes = torch.stack([packed >> 4, packed & 15], dim=1).reshape(-1)
    return codes[:n]


def dequantize_fp32(packed, state):
    state.dtype = torch.float32  # tessera's dump is fp32 whatever the weight's dtype; both scale in fp32
    return bnbf.dequantize_4bit(packed, state).reshape(-1)


def compare(name, w, theirs_in, ours):
    n = w.numel()
    packed, state = bnbf.quantize_4bit(theirs_in, blocksize=BLOCK, quant_type="nf4")
    packed = packed.reshape(-1)
    my_packed, my_absmax, my_deq = ours[name + ".codes"], ours[name + ".absmax"], ours[name + ".dequant"].reshape(-1)
    problems, notes = [], []
    if my_packed.shape != packed.shape:
        problems.append(f"packed shape {tuple(my_packed.shape)}, bitsandbytes {tuple(packed.shape)}")
    else:
        codes, my_codes = unpack(packed, n), unpack(my_packed, n)
        bad = int((codes != my_codes).sum())
        if bad:
            k = int((codes != my_codes).nonzero()[0])
            problems.append(f"{bad} of {n} codes differ (first at {k}: tessera {int(my_codes[k])}, "
                            f"bitsandbytes {int(codes[k])})")
        elif not torch.equal(packed, my_packed):
            problems.append(f"the padding nibble of the odd numel differs: tessera {int(my_packed[-1]) & 15}, "
                            f"bitsandbytes {int(packed[-1]) & 15}")
    # bitsandbytes' CPU quantize_4bit clamps the stored absmax of a trailing partial block to 1e-38 (its full
    # blocks keep the plain max): an all-zero tail is stored as 1e-38 there and 0 by tessera. Every value of such a
    # block dequantizes to 0 on both sides, which the dequantization check below still requires.
    their_absmax = state.absmax.clone()
    if n % BLOCK and float(my_absmax[-1]) == 0.0 and float(their_absmax[-1]) == float(torch.tensor(1e-38)):
        their_absmax[-1] = 0.0
        notes.append("all-zero tail block: bitsandbytes stores absmax 1e-38, tessera 0")
    absmax_diff = max_abs(my_absmax, their_absmax)
    if absmax_diff != 0:
        problems.append(f"absmax differs by up to {absmax_diff:.3e}")
    deq_diff = max_abs(my_deq, dequantize_fp32(packed.reshape(-1, 1), state))
    if deq_diff != 0:
        problems.append(f"dequantized values differ by up to {deq_diff:.3e}")
    if not notes:
        problems += compare_double_quant(name, theirs_in, ours, notes)
    else:  # the absmax inputs of the double quantization differ by the quirk above: compare the results only
        packed2, state2 = bnbf.quantize_4bit(theirs_in, blocksize=BLOCK, quant_type="nf4", compress_statistics=True)
        d = max_abs(ours[name + ".dq_dequant"].reshape(-1), dequantize_fp32(packed2, state2))
        if d != 0:
            problems.append(f"double quantization: dequantized values differ by up to {d:.3e}")
    top = w.float().abs().max().item()
    err = (w.float().reshape(-1) - my_deq).abs().max().item() / (top if top > 0 else 1.0)
    print(f"{name:18s} {str(tuple(w.shape)):13s} {str(w.dtype)[6:]:8s}: "
          + ("identical" if not problems else "; ".join(problems))
          + "".join(f" [{x}]" for x in notes) + f" (NF4 error {err:.3f} of max |w|)")
    return not problems


# bitsandbytes' CPU quantize_blockwise (csrc: a BinSearch lookup, then the nearer of that code and the next one)
# returns, for a few values within about 1e-5 of the midpoint between two neighbouring codes of the dynamic map,
# the farther of the two; tessera returns the nearest. Such a flip is accepted when tessera's code is the nearest
# and bitsandbytes' is its neighbour, with the value within TIE_BAND (in units of the block's absmax) of the
# midpoint. An all-zero block (absmax 0) is coded 0 by bitsandbytes (0/0) and 127 (0.0) by tessera; both decode to
# zero.
TIE_BAND = 1e-4
FLIPS = {"count": 0, "values": 0, "worst_band": 0.0}


def compare_double_quant(name, theirs_in, ours, notes):
    problems = []
    packed2, state2 = bnbf.quantize_4bit(theirs_in, blocksize=BLOCK, quant_type="nf4", compress_statistics=True)
    dq_codes = ours[name + ".dq_codes"].reshape(-1)
    dq_absmax, dq_offset = ours[name + ".dq_absmax"].reshape(-1), ours[name + ".dq_offset"]
    their_codes = state2.absmax.reshape(-1)
    if float(dq_offset[0]) != float(state2.offset):
        problems.append(f"double quantization: offset {float(dq_offset[0])!r}, bitsandbytes {float(state2.offset)!r}")
    if max_abs(dq_absmax, state2.state2.absmax) != 0:
        problems.append(f"double quantization: the absmax of the absmax differs by "
                        f"{max_abs(dq_absmax, state2.state2.absmax):.3e}")
    code = state2.state2.code.float()
    x = ours[name + ".absmax"].reshape(-1) - dq_offset[0]  # fp32, as both sides compute it
    FLIPS["values"] += x.numel()
    flips = 0
    for i in (dq_codes != their_codes).nonzero().reshape(-1).tolist():
        a = float(dq_absmax[i // 256])
        mine, theirs = int(dq_codes[i]), int(their_codes[i])
        if a == 0.0:
            continue
        v = float(x[i] / dq_absmax[i // 256])
        nearest = min(range(256), key=lambda c: (abs(v - float(code[c])), c))
        band = abs(v - (float(code[mine]) + float(code[theirs])) / 2)
        if mine != nearest or abs(mine - theirs) != 1 or band > TIE_BAND:
            problems.append(f"double quantization: absmax {i} (value/absmax {v:.8f}) coded {mine} by tessera, "
                            f"{theirs} by bitsandbytes, nearest {nearest}")
            break
        flips += 1
        FLIPS["worst_band"] = max(FLIPS["worst_band"], band)
    if flips:
        FLIPS["count"] += flips
        notes.append(f"{flips} of {x.numel()} absmax codes are near-tie flips")
    # Decoding: bitsandbytes' dequantize_4bit on tessera's double-quantized absmax codes must give tessera's values.
    state2.absmax = dq_codes.clone()
    d = max_abs(ours[name + ".dq_dequant"].reshape(-1), dequantize_fp32(packed2, state2))
    if d != 0:
        problems.append(f"double quantization: bitsandbytes decodes tessera's codes to values up to {d:.3e} away")
    return problems


def max_abs(a, b):
    a, b = a.double().reshape(-1), b.double().reshape(-1)
    if a.shape != b.shape:
        return float("inf")
    return (a - b).abs().max().item() if a.numel() else 0.0


if __name__ == "__main__":
    sys.exit(main())
