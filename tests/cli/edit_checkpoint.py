#!/usr/bin/env python3
"""Damages tessera's files the ways tests/TesseraTestCheckpointIntegrity.cmake needs, as a disk, a copy or a hand
edit would. Each command edits in place:

  manifest STEP_DIR CODE          runs CODE (Python) on the manifest as `m`, e.g. 'm["files"] = []'
  flip FILE OFFSET                flips the low bit of one byte (OFFSET < 0 counts from the end)
  placement STEP_DIR FILE NAME TEXT
                                  sets tensor NAME's placement in rank file FILE's metadata to TEXT ("local 0"),
                                  keeping the header's length, then records the file's new size and CRC-32C in the
                                  manifest, so that only the placement is wrong
  cache_rows CACHE ROWS           sets a token cache's "rows" header line to ROWS and "tokens" to what makes
                                  12 * ROWS + 2 * tokens equal the body's bytes modulo 2^64 (a size check done in
                                  64-bit arithmetic then passes)
"""
import json
import os
import struct
import sys
from pathlib import Path


def crc32c(data: bytes) -> int:
    table = []
    for b in range(256):
        c = b
        for _ in range(8):
            c = (c >> 1) ^ (0x82F63B78 if c & 1 else 0)
        table.append(c)
    c = 0xFFFFFFFF
    for b in data:
        c = (c >> 8) ^ table[(c ^ b) & 0xFF]
    return c ^ 0xFFFFFFFF


def main():
    cmd, args = sys.argv[1], sys.argv[2:]
    if cmd == "manifest":
        path = Path(args[0]) / "manifest.json"
        m = json.loads(path.read_text())
        exec(args[1], {"m": m})
        path.write_text(json.dumps(m, indent=1) + "\n")
    elif cmd == "flip":
        path, offset = Path(args[0]), int(args[1])
        data = bytearray(path.read_bytes())
        data[offset] ^= 0x01
        path.write_bytes(bytes(data))
    elif cmd == "placement":
        step_dir, file, name, text = Path(args[0]), args[1], args[2], args[3]
        path = step_dir / file
        data = path.read_bytes()
        (n,) = struct.unpack("<Q", data[:8])
        header = json.loads(data[8:8 + n])
        header["__metadata__"][name] = text
        encoded = json.dumps(header, separators=(",", ":")).encode()
        if len(encoded) > n:
            sys.exit(f"the new header is {len(encoded)} bytes, longer than the {n} there")
        path.write_bytes(data[:8] + encoded.ljust(n, b" ") + data[8 + n:])
        manifest_path = step_dir / "manifest.json"
        m = json.loads(manifest_path.read_text())
        for f in m["files"]:
            if f["name"] == file:
                f["bytes"] = os.path.getsize(path)
                f["crc32c"] = f"{crc32c(path.read_bytes()):08x}"
        manifest_path.write_text(json.dumps(m, indent=1) + "\n")
    elif cmd == "cache_rows":
        path, rows = Path(args[0]), int(args[1])
        data = path.read_bytes()
        header, body = data[:4096], len(data) - 4096
        tokens = ((body - 12 * rows) % (1 << 64)) // 2
        lines = header.rstrip(b"\0").decode().split("\n")
        lines = [f"rows {rows}" if line.startswith("rows ") else f"tokens {tokens}" if line.startswith("tokens ")
                 else line for line in lines]
        path.write_bytes("\n".join(lines).encode().ljust(4096, b"\0") + data[4096:])
    else:
        sys.exit(f"unknown command {cmd}")


if __name__ == "__main__":
    main()
