#!/usr/bin/env python3
"""Checks that a screenshot of a tessera-report page shows its charts: for each colour given, at least MIN pixels of
exactly that colour (the SVG's flat fills and lines; anti-aliased edges do not count).

usage: check_report_png.py SHOT.png MIN COLOUR[=NAME] [COLOUR[=NAME] ...]     (COLOUR as #rrggbb)
Exit 0 when every colour is there, 1 naming those that are missing. Only the standard library is needed.
"""
import struct
import sys
import zlib


def read_png(path):
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        sys.exit(f"{path}: not a PNG file")
    pos, idat, width = 8, b"", None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, colour_type, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or colour_type not in (2, 6) or interlace:
                sys.exit(f"{path}: only 8-bit RGB/RGBA non-interlaced PNGs are read (got depth {depth}, "
                         f"colour type {colour_type}, interlace {interlace})")
            channels = 3 if colour_type == 2 else 4
        elif kind == b"IDAT":
            idat += body
    raw = zlib.decompress(idat)
    stride = width * channels
    rows, prev = [], bytearray(stride)
    for y in range(height):
        f = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - channels] if i >= channels else 0
            b = prev[i]
            c = prev[i - channels] if i >= channels else 0
            if f == 1:
                line[i] = (line[i] + a) & 255
            elif f == 2:
                line[i] = (line[i] + b) & 255
            elif f == 3:
                line[i] = (line[i] + (a + b) // 2) & 255
            elif f == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        rows.append(bytes(line))
        prev = line
    return width, height, channels, rows


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__)
    path, minimum = sys.argv[1], int(sys.argv[2])
    wanted = {}
    for arg in sys.argv[3:]:
        colour, _, name = arg.partition("=")
        wanted[bytes.fromhex(colour.lstrip("#"))] = name or colour
    width, height, channels, rows = read_png(path)
    counts = dict.fromkeys(wanted, 0)
    for line in rows:
        for x in range(0, width * channels, channels):
            px = line[x:x + 3]
            if px in counts:
                counts[px] += 1
    missing = [f"{wanted[c]} ({counts[c]} px)" for c in wanted if counts[c] < minimum]
    for c in wanted:
        print(f"{wanted[c]:>14}: {counts[c]} px")
    if missing:
        print(f"{path}: not drawn (fewer than {minimum} pixels): " + ", ".join(missing))
        return 1
    print(f"{path}: {width}x{height}, every chart colour drawn")
    return 0


if __name__ == "__main__":
    sys.exit(main())
