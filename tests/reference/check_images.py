#!/usr/bin/env python3
"""tessera's image decoding (io/image_file.hpp) against Pillow, byte for byte: for every image made here, the RGB
bytes image_decode_dump writes must equal numpy.asarray(Image.open(path).convert("RGB")), which is what the labs'
pipelines and transformers' image processors start from. Where Pillow raises, tessera must refuse too (and the
other way round).

The images, all generated here (seeded):
  JPEG by Pillow's encoder: RGB at qualities 5 to 100, subsampling 4:4:4 / 4:2:2 / 4:2:0, baseline and progressive,
      optimized Huffman tables, restart markers, keep_rgb (an RGB JPEG), grayscale, CMYK, an EXIF orientation of 6
      and an ICC profile (neither applied, by either), sizes 1x1 to 640x480 (odd sizes: partial MCUs).
  JPEG by jpeg_write (libjpeg's encoder, for what Pillow does not write but reads): YCCK, arithmetic coding,
      sampling 4:4:0 / 4:1:1 / 3x1 / subsampled CMYK, restart intervals.
  PNG written here (every bit depth of every colour type, the five filters in turn, Adam7 interlacing; palettes
      short of 2^depth entries, with tRNS) and by Pillow's encoder (1, L, LA, RGB, RGBA, P, P with transparency,
      I;16).
  Damaged files: JPEG and PNG cut at many points, a JPEG without EOI, flipped bytes in JPEG entropy data (libjpeg
      warns, Pillow ignores warnings), junk before a marker, PNG CRC errors (in IHDR, in an ancillary chunk before
      the image data: Pillow refuses; in IDAT: Pillow does not check), garbage IDAT data, an unknown critical
      chunk, an empty file, random bytes, text.

KNOWN_DIFFERENCES lists the cases where tessera knowingly refuses what Pillow opens (invalid files); they are
reported, not failed.

usage: check_images.py IMAGE_DECODE_DUMP JPEG_WRITE [--keep DIR] [--perturb --expect-mismatch]
--perturb changes one expected byte (the first pixel of the first image): a negative control, which must then see a
mismatch. Exit 0 when every case agrees, 1 when one does not, 2 when a tool did not run. With --expect-mismatch exit
0 only when the tools ran and the comparison failed.
"""
import argparse
import io
import os
import struct
import subprocess
import sys
import tempfile
import warnings
import zlib

import numpy as np
from PIL import Image, ImageFile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tessera_run  # noqa: E402

warnings.filterwarnings("ignore")
assert not ImageFile.LOAD_TRUNCATED_IMAGES  # Pillow's default, which the labs run with

# name -> why tessera refuses what Pillow opens
KNOWN_DIFFERENCES = {
    "png_palette_without_plte": "colour type 3 without PLTE breaks the PNG spec: libpng refuses it, Pillow paints "
                                "every pixel black",
    "png_zlib_ends_early": "a deflate stream that ends before the last row: libpng refuses it, Pillow leaves the "
                           "rows it lacks black",
}


def photo(w, h, seed, channels=3):
    """A photo-like test image: smooth gradients, a sinusoid, hard-edged blocks and noise (every DCT frequency)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(np.float64)
    planes = []
    for c in range(channels):
        p = 255 * (x / max(w - 1, 1)) * (c % 2) + 255 * (y / max(h - 1, 1)) * ((c + 1) % 2)
        p += 60 * np.sin(x / (3 + c) + y / (5 + 2 * c))
        p += np.where(((x // 7) + (y // 5)) % 3 == c % 3, 90, -40)
        p += rng.normal(0, 25, (h, w))
        planes.append(p)
    return np.clip(np.stack(planes, -1), 0, 255).astype(np.uint8)


def pillow_bytes(img, fmt, **options):
    buf = io.BytesIO()
    img.save(buf, fmt, **options)
    return buf.getvalue()


# ---- PNG writer: any colour type and depth, any filter, Adam7 -------------------------------------------------------
ADAM7 = [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
SAMPLES = {0: 1, 2: 3, 3: 1, 4: 2, 6: 4}


def chunk(kind, data):
    return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))


def pack_row(row, depth):
    if depth == 16:
        return row.astype(">u2").tobytes()
    if depth == 8:
        return row.astype(np.uint8).tobytes()
    bits = np.unpackbits(row.reshape(-1, 1).astype(np.uint8), axis=1)[:, 8 - depth:].reshape(-1)
    return np.packbits(bits).tobytes()


def paeth(a, b, c):
    p = a + b - c
    pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
    return a if pa <= pb and pa <= pc else b if pb <= pc else c


def filtered(raw, prev, kind, bpp):
    out = bytearray([kind])
    for i, v in enumerate(raw):
        a = raw[i - bpp] if i >= bpp else 0
        b = prev[i] if prev else 0
        c = prev[i - bpp] if prev and i >= bpp else 0
        pred = [0, a, b, (a + b) // 2, paeth(a, b, c)][kind]
        out.append((v - pred) & 255)
    return bytes(out)


def png(a, color, depth, palette=None, trns=None, interlace=False, extra=b""):
    """a: (h, w, samples) array of sample values. Rows are filtered with filters 0..4 in turn."""
    a = np.asarray(a)
    a = a[..., None] if a.ndim == 2 else a
    h, w, _ = a.shape
    bpp = max(1, SAMPLES[color] * depth // 8)
    passes = ADAM7 if interlace else [(0, 0, 1, 1)]
    data, n = b"", 0
    for x0, y0, dx, dy in passes:
        sub = a[y0::dy, x0::dx]
        if sub.shape[0] == 0 or sub.shape[1] == 0:
            continue
        prev = None
        for row in sub:
            raw = pack_row(row, depth)
            data += filtered(raw, prev, n % 5, bpp)
            prev, n = raw, n + 1
    out = b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, depth, color, 0, 0, int(interlace)))
    out += extra
    if palette is not None:
        out += chunk(b"PLTE", bytes(np.asarray(palette, np.uint8).reshape(-1)))
    if trns is not None:
        out += chunk(b"tRNS", trns)
    return out + chunk(b"IDAT", zlib.compress(data, 9)) + chunk(b"IEND", b"")


def png_cases(rng):
    cases = {}
    for w, h in [(1, 1), (3, 2), (17, 33), (9, 7)]:
        for depth in (1, 2, 4, 8, 16):
            g = rng.integers(0, 1 << depth, (h, w))
            cases[f"png_gray{depth}_{w}x{h}"] = png(g, 0, depth)
            cases[f"png_gray{depth}_{w}x{h}_adam7"] = png(g, 0, depth, interlace=True)
        for depth in (8, 16):
            for color, name in [(2, "rgb"), (4, "gray_alpha"), (6, "rgba")]:
                s = rng.integers(0, 1 << depth, (h, w, SAMPLES[color]))
                cases[f"png_{name}{depth}_{w}x{h}"] = png(s, color, depth)
                cases[f"png_{name}{depth}_{w}x{h}_adam7"] = png(s, color, depth, interlace=True)
        for depth in (1, 2, 4, 8):
            idx = rng.integers(0, 1 << depth, (h, w))
            full = rng.integers(0, 256, (1 << depth, 3))
            cases[f"png_palette{depth}_{w}x{h}"] = png(idx, 3, depth, palette=full)
            cases[f"png_palette{depth}_{w}x{h}_adam7_trns"] = png(idx, 3, depth, palette=full,
                                                                  trns=bytes(rng.integers(0, 256, 1 << depth).tolist()),
                                                                  interlace=True)
            # indices past the palette's end
            cases[f"png_palette{depth}_{w}x{h}_short"] = png(idx, 3, depth, palette=full[:max(1, (1 << depth) // 3)])
    big = photo(640, 480, 1)
    cases["png_rgb8_640x480"] = png(big, 2, 8)
    cases["png_rgb8_640x480_adam7"] = png(big, 2, 8, interlace=True)
    cases["png_rgb16_64x48"] = png(photo(64, 48, 2).astype(np.uint16) * 257 + rng.integers(0, 256, (48, 64, 3)), 2, 16)
    g16 = rng.integers(0, 65536, (40, 30))
    g16[:5] = rng.integers(0, 256, (5, 30))  # values under 256 too: I;16's clip leaves them
    cases["png_gray16_clip_30x40"] = png(g16, 0, 16)
    cases["png_gray8_trns_5x4"] = png(rng.integers(0, 256, (4, 5)), 0, 8, trns=b"\x00\x07")
    cases["png_rgb8_trns_5x4"] = png(rng.integers(0, 256, (4, 5, 3)), 2, 8, trns=b"\x00\x01\x00\x02\x00\x03")
    cases["png_unknown_critical_chunk"] = png(rng.integers(0, 256, (4, 5, 3)), 2, 8, extra=chunk(b"ZZZZ", b"hi"))
    cases["png_text_chunk"] = png(rng.integers(0, 256, (4, 5, 3)), 2, 8, extra=chunk(b"tEXt", b"k\x00v"))
    # Pillow's encoder
    base = Image.fromarray(photo(33, 17, 3))
    cases["pillow_png_rgb"] = pillow_bytes(base, "PNG")
    cases["pillow_png_rgb_optimize"] = pillow_bytes(base, "PNG", optimize=True)
    cases["pillow_png_rgba"] = pillow_bytes(Image.fromarray(photo(33, 17, 4, 4)), "PNG")
    cases["pillow_png_l"] = pillow_bytes(base.convert("L"), "PNG")
    cases["pillow_png_la"] = pillow_bytes(base.convert("LA"), "PNG")
    cases["pillow_png_1"] = pillow_bytes(base.convert("1"), "PNG")
    cases["pillow_png_p"] = pillow_bytes(base.quantize(200), "PNG")
    cases["pillow_png_p4"] = pillow_bytes(base.quantize(16), "PNG", bits=4)
    cases["pillow_png_p_transparency"] = pillow_bytes(base.quantize(64), "PNG", transparency=3)
    cases["pillow_png_i16"] = pillow_bytes(Image.fromarray(g16.astype(np.uint16)), "PNG")
    return cases


# ---- JPEG ---------------------------------------------------------------------------------------------------------
def jpeg_cases(jpeg_write, work):
    cases = {}
    sizes = [(1, 1), (2, 2), (7, 5), (17, 33), (33, 17), (16, 16), (640, 480)]
    for w, h in sizes:
        img = Image.fromarray(photo(w, h, w * 1000 + h))
        for sub in (0, 1, 2):
            cases[f"jpeg_q75_sub{sub}_{w}x{h}"] = pillow_bytes(img, "JPEG", quality=75, subsampling=sub)
            cases[f"jpeg_q75_sub{sub}_{w}x{h}_progressive"] = pillow_bytes(img, "JPEG", quality=75, subsampling=sub,
                                                                          progressive=True)
        cases[f"jpeg_gray_{w}x{h}"] = pillow_bytes(img.convert("L"), "JPEG", quality=80)
        cases[f"jpeg_cmyk_{w}x{h}"] = pillow_bytes(img.convert("CMYK"), "JPEG", quality=90)
    img = Image.fromarray(photo(97, 61, 5))
    for q in (5, 25, 50, 90, 95, 100):
        cases[f"jpeg_q{q}_97x61"] = pillow_bytes(img, "JPEG", quality=q)
    cases["jpeg_optimize_97x61"] = pillow_bytes(img, "JPEG", quality=85, optimize=True)
    cases["jpeg_progressive_optimize_97x61"] = pillow_bytes(img, "JPEG", quality=85, progressive=True, optimize=True)
    cases["jpeg_keep_rgb_97x61"] = pillow_bytes(img, "JPEG", quality=85, keep_rgb=True, subsampling=0)
    cases["jpeg_restart_rows_97x61"] = pillow_bytes(img, "JPEG", quality=85, restart_marker_rows=1)
    cases["jpeg_restart_blocks_97x61"] = pillow_bytes(img, "JPEG", quality=85, restart_marker_blocks=3)
    cases["jpeg_gray_progressive_97x61"] = pillow_bytes(img.convert("L"), "JPEG", progressive=True)
    cases["jpeg_cmyk_progressive_97x61"] = pillow_bytes(img.convert("CMYK"), "JPEG", progressive=True)
    exif = Image.Exif()
    exif[0x0112] = 6  # Orientation: rotate 90 on display; neither Image.open nor tessera applies it
    cases["jpeg_exif_orientation6_97x61"] = pillow_bytes(img, "JPEG", exif=exif.tobytes())
    cases["jpeg_icc_97x61"] = pillow_bytes(img, "JPEG", icc_profile=b"not applied" * 10)
    # jpeg_write: what Pillow's encoder does not make
    rgb = photo(45, 29, 6)
    cmyk = np.asarray(Image.fromarray(rgb).convert("CMYK"))
    for name, space, raw, sampling, extra in [
        ("ycck", "ycck", cmyk, "1x1,1x1,1x1,1x1", []),
        ("ycck_sub", "ycck", cmyk, "2x2,1x1,1x1,2x2", []),
        ("cmyk_sub", "cmyk", cmyk, "2x2,1x1,1x1,2x2", []),
        ("ycck_progressive", "ycck", cmyk, "2x1,1x1,1x1,2x1", ["progressive"]),
        ("sub440", "ycc", rgb, "1x2,1x1,1x1", []),
        ("sub411", "ycc", rgb, "4x1,1x1,1x1", []),
        ("sub311", "ycc", rgb, "3x1,1x1,1x1", []),
        ("sub_odd", "ycc", rgb, "2x2,1x2,2x1", []),
        ("arith", "ycc", rgb, "2x2,1x1,1x1", ["arith"]),
        ("arith_progressive", "ycc", rgb, "2x1,1x1,1x1", ["arith", "progressive"]),
        ("arith_gray", "gray", rgb[..., 1].copy(), "1x1", ["arith"]),
        ("rgb_adobe", "rgb", rgb, "1x1,1x1,1x1", []),
        ("restart2", "ycc", rgb, "2x2,1x1,1x1", ["restart=2"]),
    ]:
        src = os.path.join(work, f"raw_{name}")
        with open(src, "wb") as f:
            f.write(np.ascontiguousarray(raw).tobytes())
        out = os.path.join(work, f"libjpeg_{name}.jpg")
        subprocess.run([jpeg_write, src, out, "45", "29", space, sampling, "85", *extra], check=True)
        with open(out, "rb") as f:
            cases[f"libjpeg_{name}_45x29"] = f.read()
    return cases


# ---- damage ---------------------------------------------------------------------------------------------------------
def damaged_cases(good_jpeg, good_progressive, good_png, rng):
    cases = {}
    for name, data in [("jpeg", good_jpeg), ("jpeg_progressive", good_progressive)]:
        n = len(data)
        for cut in sorted({3, 20, 200, n // 10, n // 3, n // 2, n - 600, n - 100, n - 3, n - 2, n - 1}):
            cases[f"{name}_cut_at_{cut}_of_{n}"] = data[:cut]
        flipped = bytearray(data)
        for i in rng.integers(n // 2, n - 10, 5):
            flipped[i] ^= 0x5A
        cases[f"{name}_flipped_entropy_bytes"] = bytes(flipped)
        cases[f"{name}_junk_before_eoi"] = data[:-2] + b"\x12\x34\x56" + data[-2:]
        app0 = 4 + struct.unpack(">H", data[4:6])[0]  # after SOI and APP0
        cases[f"{name}_junk_in_header"] = data[:app0] + b"\x12\x34" + data[app0:]
        cases[f"{name}_trailing_junk"] = data + b"junk after EOI"
    n = len(good_png)
    # the end: IDAT's last deflate bytes (every row is out before the end code), its Adler-32 (n-20), its CRC
    # (n-16), IEND (n-12)
    for cut in sorted({8, 16, 30, 40, n // 4, n // 2, n - 40, *range(n - 26, n - 11), n - 4, n - 1}):
        cases[f"png_cut_at_{cut}_of_{n}"] = good_png[:cut]
    small = png(np.random.default_rng(3).integers(0, 256, (13, 11, 3)), 2, 8, interlace=True)
    for cut in range(len(small) - 30, len(small) - 11):
        cases[f"png_adam7_cut_at_{cut}_of_{len(small)}"] = small[:cut]
    idat = good_png.index(b"IDAT")
    bad = bytearray(good_png)
    bad[29] ^= 1  # IHDR's CRC
    cases["png_bad_ihdr_crc"] = bytes(bad)
    bad = bytearray(good_png)
    length = struct.unpack(">I", good_png[idat - 4:idat])[0]
    bad[idat + 4 + length] ^= 1  # IDAT's CRC
    cases["png_bad_idat_crc"] = bytes(bad)
    text = chunk(b"tEXt", b"key\x00value")
    cases["png_bad_text_crc"] = good_png[:33] + text[:-1] + bytes([text[-1] ^ 1]) + good_png[33:]
    garbage = bytes(rng.integers(0, 256, length).astype(np.uint8))
    cases["png_garbage_idat"] = good_png[:idat + 4] + garbage + struct.pack(">I", zlib.crc32(b"IDAT" + garbage)) + \
        good_png[idat + 8 + length:]
    cases["png_no_iend"] = good_png[:-12]
    # the image data split over many IDAT chunks (valid), with empty ones among them
    stream = good_png[idat + 4:idat + 4 + length]
    split = b"".join(chunk(b"IDAT", stream[i:i + 997]) + (chunk(b"IDAT", b"") if i % 7 == 0 else b"")
                     for i in range(0, len(stream), 997))
    cases["png_split_idat"] = good_png[:idat - 4] + split + good_png[idat + 8 + length:]
    tiny = png(rng.integers(0, 256, (6, 7, 4)), 6, 8)
    t_at = tiny.index(b"IDAT")
    t_len = struct.unpack(">I", tiny[t_at - 4:t_at])[0]
    t_stream = tiny[t_at + 4:t_at + 4 + t_len]
    cases["png_one_byte_idats"] = tiny[:t_at - 4] + b"".join(chunk(b"IDAT", bytes([b])) for b in t_stream) + \
        tiny[t_at + 8 + t_len:]
    bad_adler = t_stream[:-1] + bytes([t_stream[-1] ^ 1])
    cases["png_bad_adler32"] = tiny[:t_at - 4] + chunk(b"IDAT", bad_adler) + tiny[t_at + 8 + t_len:]
    cases["png_extra_data_after_stream"] = tiny[:t_at - 4] + chunk(b"IDAT", t_stream + b"extra") + \
        tiny[t_at + 8 + t_len:]
    cases["png_bad_filter_type"] = tiny[:t_at - 4] + chunk(b"IDAT", zlib.compress(b"\x07" + bytes(28) * 6)) + \
        tiny[t_at + 8 + t_len:]
    # a deflate stream that stops after the first of the rows (stored block, final)
    w, h = 5, 4
    rows = b"".join(b"\x00" + bytes(rng.integers(0, 256, w * 3).astype(np.uint8)) for _ in range(h))
    early = zlib.compress(rows[:1 + w * 3])
    cases["png_zlib_ends_early"] = (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
                                    + chunk(b"IDAT", early) + chunk(b"IEND", b""))
    cases["png_palette_without_plte"] = png(rng.integers(0, 4, (3, 3)), 3, 8)
    cases["empty"] = b""
    cases["random_bytes"] = bytes(rng.integers(0, 256, 300).astype(np.uint8))
    cases["text"] = b"this is not an image\n"
    cases["png_signature_only"] = b"\x89PNG\r\n\x1a\n"
    cases["jpeg_soi_only"] = b"\xff\xd8\xff"
    return cases


def pillow_rgb(path):
    try:
        with Image.open(path) as im:
            return np.asarray(im.convert("RGB")), None
    except Exception as e:  # noqa: BLE001: whatever Pillow raises is "refused"
        return None, f"{type(e).__name__}: {e}"


def read_tessera(path):
    with open(path + ".tessera", "rb") as f:
        data = f.read()
    head, _, rest = data.partition(b"\n")
    fields = head.decode("utf-8", "replace").split(" ", 1)
    if fields[0] == "error":
        return None, fields[1]
    w, h, _channels = map(int, fields[1].split())
    return np.frombuffer(rest, np.uint8).reshape(h, w, 3), None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump")
    ap.add_argument("jpeg_write")
    ap.add_argument("--keep", help="write the images into this directory and keep them")
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--expect-mismatch", action="store_true")
    a = ap.parse_args()
    rng = np.random.default_rng(20250101)
    with tempfile.TemporaryDirectory() as tmp:
        work = a.keep or tmp
        os.makedirs(work, exist_ok=True)
        try:
            cases = jpeg_cases(a.jpeg_write, work)
        except (OSError, subprocess.CalledProcessError) as e:
            print(f"jpeg_write did not run: {e}")
            return 2
        cases.update(png_cases(rng))
        cases.update(damaged_cases(cases["jpeg_q75_sub2_640x480"], cases["jpeg_q75_sub2_640x480_progressive"],
                                   cases["png_rgb8_640x480"], rng))
        paths = {}
        for name, data in cases.items():
            paths[name] = os.path.join(work, name + (".png" if name.startswith(("png", "pillow_png")) else ".jpg"))
            with open(paths[name], "wb") as f:
                f.write(data)
        listing = os.path.join(work, "images.txt")
        with open(listing, "w") as f:
            f.write("".join(p + "\n" for p in paths.values()))
        run = subprocess.run([a.dump, listing], capture_output=True, text=True)
        if run.returncode != 0:
            print(f"image_decode_dump failed (exit {run.returncode}):\n{run.stdout}{run.stderr}")
            return 2

        ok, perturb = True, a.perturb
        decoded = refused = 0
        for name, path in paths.items():
            want, want_error = pillow_rgb(path)
            got, got_error = read_tessera(path)
            if want is not None and perturb and want.size:
                want = want.copy()
                want.flat[0] ^= 1
                perturb = False
            if name in KNOWN_DIFFERENCES:
                print(f"known difference {name}: Pillow {'opens it' if want is not None else want_error}; tessera "
                      f"{'decodes it' if got is not None else 'refuses it: ' + got_error} ({KNOWN_DIFFERENCES[name]})")
                continue
            if want is None and got is None:
                refused += 1
                continue
            if want is None or got is None:
                ok = False
                print(f"MISMATCH {name}: Pillow {'decodes it' if want is not None else 'refuses it: ' + want_error}; "
                      f"tessera {'decodes it' if got is not None else 'refuses it: ' + got_error}")
                continue
            if want.shape != got.shape or not np.array_equal(want, got):
                ok = False
                diff = "shape " + str(got.shape) + " vs " + str(want.shape) if want.shape != got.shape else \
                    f"{int((want != got).any(-1).sum())} of {want.shape[0] * want.shape[1]} pixels differ, by up to " \
                    f"{int(np.abs(want.astype(int) - got.astype(int)).max())}"
                print(f"MISMATCH {name}: {diff}")
                continue
            decoded += 1
        print(f"{decoded} images decoded byte-identically to Pillow {Image.__version__}, {refused} refused by both, "
              f"{len(KNOWN_DIFFERENCES)} known differences")
    return tessera_run.verdict(ok, a.expect_mismatch)


if __name__ == "__main__":
    sys.exit(main())
