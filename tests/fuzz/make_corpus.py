#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/): small valid inputs of each format, from
which libFuzzer mutates. The family configs and the adapter config are what tessera's own save_dir writes, the
metrics file what its metrics= writes:

  for b in llama-fp32 opt-fp32 t5-fp32 vit-fp32 blip2-opt-fp32 blip2-t5-fp32 llama-lora-fp32; do
    build/examples/$b model=tiny max_steps=1 predict=false batch_size=1 seq_len=16 save_dir=SAVES/$b \\
      metrics=SAVES/$b.jsonl; done
  .venv/bin/python tests/fuzz/make_corpus.py SAVES

The image seeds are Pillow's PNGs and JPEGs (hence the project's Python, which has Pillow), each under 1 KiB.
"""
import json
import struct
import sys
from pathlib import Path

saves = Path(sys.argv[1])
out = Path(__file__).resolve().parent / "corpus"


def put(target, name, data):
    d = out / target
    d.mkdir(parents=True, exist_ok=True)
    (d / name).write_bytes(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None):
    header, body = {}, b""
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
        body += raw
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + body


floats = struct.pack("<4f", 1, 2, 3, 4)
put("fuzz_safetensors", "two_tensors", safetensors({"a": ("F32", [2, 2], floats), "b": ("BF16", [2], b"\x80\x3f\x00\x40")},
                                                   {"format": "pt"}))
put("fuzz_safetensors", "empty_tensor", safetensors({"e": ("F16", [0, 3], b"")}))
put("fuzz_safetensors", "llama_tiny_head", (saves / "llama-fp32" / "model.safetensors").read_bytes()[:4096])

put("fuzz_checkpoint_index", "index", json.dumps({"metadata": {"total_size": 16}, "weight_map": {
    "a": "model-00001-of-00001.safetensors", "b": "model-00001-of-00001.safetensors"}}))

for i, name in enumerate(["llama-fp32", "opt-fp32", "t5-fp32", "vit-fp32", "blip2-opt-fp32", "blip2-t5-fp32"]):
    put("fuzz_config_json", name, bytes([i]) + (saves / name / "config.json").read_bytes())

put("fuzz_token_file", "nanogpt", struct.pack("<100H", *[(i * 7) % 50 for i in range(100)]))
header = [20240520, 1, 50] + [0] * 253
put("fuzz_token_file", "llmc", struct.pack("<256i", *header) + struct.pack("<50H", *range(50)))

put("fuzz_pairs", "ids", "\n".join(json.dumps({"input_ids": [1, 2, 3, i], "labels": [4, 5, i]}) for i in range(6)) + "\n")
put("fuzz_pairs", "text", json.dumps({"input": "translate: hello", "target": "hallo"}) + "\n")

put("fuzz_captions", "ids", "\n".join(json.dumps({"image": "images/a.png", "input_ids": [1, 2, i]}) for i in range(4)) + "\n")
put("fuzz_captions", "labels", json.dumps({"image": "images/a.png", "input_ids": [5, 6], "labels": [6, 7]}) + "\n")

put("fuzz_peft_adapter", "tessera_lora", (saves / "llama-lora-fp32" / "adapter_config.json").read_bytes())

put("fuzz_train_state_manifest", "manifest", json.dumps({
    "format": "tessera train state", "version": 2, "step": 1,
    # the size and CRC-32C of the harness's rank file
    "files": [{"name": "rank-00000.safetensors", "bytes": 260, "crc32c": "3abf75c9"}],
    "world_size": 1, "shard_group_size": 1, "units": 1,
    "experiment": {"family": "llama"}, "settings": {"seq_len": 32},
    "optimizer": {"name": "adam8bit", "has_state": True, "steps": 1},
    "loss_scaler": {"scale": 65536.0, "good_in_a_row": 0, "skipped": 0, "growths": 0}}))

put("fuzz_metrics", "llama_one_step", (saves / "llama-fp32.jsonl").read_bytes())


# fuzz_image: one of each kind image_file.hpp decodes, small (libFuzzer's inputs stay near the seeds' size).
import io  # noqa: E402
import zlib  # noqa: E402

import numpy as np  # noqa: E402
from PIL import Image  # noqa: E402


def image_bytes(img, fmt, **options):
    buf = io.BytesIO()
    img.save(buf, fmt, **options)
    return buf.getvalue()


pixels = np.random.default_rng(0).integers(0, 256, (9, 11, 3), dtype=np.uint8)
pixels[:, :6] = pixels[:, :6] // 64 * 64  # flat areas next to noise
rgb = Image.fromarray(pixels)
seeds = {
    "rgb.png": image_bytes(rgb, "PNG"),
    "rgba.png": image_bytes(rgb.convert("RGBA"), "PNG"),
    "gray16.png": image_bytes(Image.fromarray(pixels[..., 0].astype(np.uint16) * 300), "PNG"),
    "palette4_trns.png": image_bytes(rgb.quantize(16), "PNG", bits=4, transparency=2),
    "gray1.png": image_bytes(rgb.convert("1"), "PNG"),
    "baseline_420.jpg": image_bytes(rgb, "JPEG", quality=70, optimize=True),
    "progressive_444.jpg": image_bytes(rgb, "JPEG", quality=70, subsampling=0, progressive=True, optimize=True),
    "gray.jpg": image_bytes(rgb.convert("L"), "JPEG", quality=70, optimize=True),
    "cmyk.jpg": image_bytes(rgb.convert("CMYK"), "JPEG", quality=70, optimize=True),
    "restart.jpg": image_bytes(rgb, "JPEG", quality=70, restart_marker_blocks=1, optimize=True),
}


def adam7_png(a):
    """An interlaced 8-bit RGB PNG (Pillow's encoder does not interlace), rows unfiltered."""
    def chunk(kind, data):
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))
    h, w, _ = a.shape
    raw = b"".join(b"\x00" + row.tobytes() for x0, y0, dx, dy in
                   [(0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2), (0, 1, 1, 2)]
                   if a[y0::dy, x0::dx].size for row in a[y0::dy, x0::dx])
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 1))
            + chunk(b"IDAT", zlib.compress(raw, 9)) + chunk(b"IEND", b""))


seeds["rgb_adam7.png"] = adam7_png(pixels)
for name, data in seeds.items():
    put("fuzz_image", name, data)

# The table readers: tiny tables as datasets and the hub write them (pyarrow): an Arrow IPC stream with an image
# struct, a text and an integer column, the same as an IPC file, and as Parquet in two row groups.
import io  # noqa: E402

import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402

image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
png = next(data for name, data in sorted(seeds.items()) if name.endswith(".png"))
table = pa.table({"image": pa.array([{"bytes": png, "path": None},
                                     {"bytes": None, "path": "missing.png"}], type=image_type),
                  "text": ["a burger", "soup"], "label": pa.array([0, 2], type=pa.int64())})
stream = io.BytesIO()
with pa.ipc.new_stream(stream, table.schema) as writer:
    writer.write_table(table, max_chunksize=1)
put("fuzz_table", "stream.arrow", stream.getvalue())
file = io.BytesIO()
with pa.ipc.new_file(file, table.schema) as writer:
    writer.write_table(table)
put("fuzz_table", "file.arrow", file.getvalue())
parquet = io.BytesIO()
pq.write_table(table, parquet, row_group_size=1)
put("fuzz_table", "two_groups.parquet", parquet.getvalue())
