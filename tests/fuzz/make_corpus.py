#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora (tests/fuzz/corpus/<target>/): small valid inputs of each format, from
which libFuzzer mutates. The family configs and the adapter config are what tessera's own save_dir writes, the
metrics file what its metrics= writes:

  for b in llama-fp32 opt-fp32 t5-fp32 vit-fp32 blip2-opt-fp32 blip2-t5-fp32 llama-lora-fp32; do
    build/examples/$b model=tiny max_steps=1 predict=false batch_size=1 seq_len=16 save_dir=SAVES/$b \\
      metrics=SAVES/$b.jsonl; done
  tests/fuzz/make_corpus.py SAVES
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
    "format": "tessera train state", "version": 1, "step": 1,
    "files": [{"name": "rank-00000.safetensors", "bytes": 260}],  # the size of the harness's rank file
    "experiment": {"family": "llama"}, "settings": {"seq_len": 32}, "optimizer": {"has_state": False, "steps": 0},
    "loss_scaler": {"scale": 65536.0, "good_in_a_row": 0, "skipped": 0, "growths": 0}}))

put("fuzz_metrics", "llama_one_step", (saves / "llama-fp32.jsonl").read_bytes())
