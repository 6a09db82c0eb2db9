#!/usr/bin/env python3
"""tessera's table reader (data/table_source.hpp) against `datasets` 5.2 and pyarrow 26, the libraries that write
the labs' data sets and read them in the labs' scripts.

The script makes small tables with them, as a student gets them: a Dataset.save_to_disk directory in two Arrow files
(captioned JPEG and PNG images, unicode text, a ClassLabel column), a DatasetDict with train and validation splits,
a Parquet file in row groups of 3 rows whose images are files named by path (what to_parquet writes), a hub-style
Parquet directory (data/train-0000x-of-00002.parquet, data/test-...), and load_dataset's Arrow cache of a JSON file.
table_dump reads each with tessera; every value must equal what `datasets` reads (text and integers exactly, an
image's encoded bytes by length and FNV-1a 64 hash), and the row count and columns must agree.
Then the bad tables must be refused, exit 1, with the message naming what is wrong: a truncated Arrow file, a
state.json naming a file that is not there, a missing column (the message lists the columns), a Parquet file of
another schema in a directory, a null caption (file, row and column), a split that is not there (the splits
listed), a Parquet footer whose row group claims 10^11 rows (a fuzzing find).

usage: check_table_source.py TABLE_DUMP [--perturb --expect-mismatch]
--perturb changes one expected caption: a negative control, which must then see a mismatch. Exit 0 when all agree,
1 when one differs, 2 when a side did not run. With --expect-mismatch exit 0 only when the comparison failed.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")

import datasets  # noqa: E402
import numpy as np  # noqa: E402
import pyarrow as pa  # noqa: E402
import pyarrow.parquet as pq  # noqa: E402
from PIL import Image  # noqa: E402

datasets.disable_progress_bars()
HERE = os.path.dirname(os.path.abspath(__file__))
FEATURES = datasets.Features({"image": datasets.Image(), "text": datasets.Value("string"),
                              "label": datasets.ClassLabel(names=["burger", "dessert", "soup"])})
CAPTIONS = ["a burger with fries", "crème brûlée on a plate", "миска супа", "拉面 and 🙂", "",
            "two\nlines",
            "\"quoted\" text", "tab\tseparated", "a long caption " * 20, "x"]


def fnv1a64(data):
    h = 0xcbf29ce484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return f"{h:016x}"


def make_images(folder, count, seed):
    rng = np.random.RandomState(seed)
    os.makedirs(folder, exist_ok=True)
    paths = []
    for i in range(count):
        h, w = rng.randint(8, 40), rng.randint(8, 40)
        pixels = (rng.rand(h, w, 3) * 255).astype("uint8")
        path = os.path.join(folder, f"{i:03d}.{'jpg' if i % 3 else 'png'}")
        Image.fromarray(pixels).save(path, **({"quality": 85} if i % 3 else {}))
        paths.append(os.path.abspath(path))
    return paths


def captioned(folder, count, seed):
    paths = make_images(os.path.join(folder, "images"), count, seed)
    return datasets.Dataset.from_dict(
        {"image": paths, "text": [CAPTIONS[(i + seed) % len(CAPTIONS)] + f" #{i}" for i in range(count)],
         "label": [(i * 7 + seed) % 3 for i in range(count)]}, features=FEATURES)


def expected(ds):
    """What `datasets` reads: captions, labels, and each image's encoded bytes (the file's, when only its path is
    stored)."""
    raw = ds.cast_column("image", datasets.Image(decode=False))
    images = []
    for cell in raw["image"]:
        data = cell["bytes"]
        if data is None:
            with open(cell["path"], "rb") as f:
                data = f.read()
        images.append([len(data), fnv1a64(data)])
    return {"rows": len(ds), "values": {"text": list(ds["text"]), "label": list(ds["label"]), "image": images}}


def dump(tool, data, split, columns, out):
    proc = subprocess.run([tool, data, split, out] + columns, capture_output=True, text=True)
    if proc.returncode != 0:
        return None, proc.stderr.strip()
    with open(out) as f:
        return json.load(f), ""


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("table_dump")
    parser.add_argument("--perturb", action="store_true")
    parser.add_argument("--expect-mismatch", action="store_true")
    args = parser.parse_args()
    failures, ran = [], True
    with tempfile.TemporaryDirectory() as tmp:
        cases = []  # (name, data, split, expected)
        ds = captioned(os.path.join(tmp, "a"), 23, 0)
        ds.save_to_disk(os.path.join(tmp, "saved"), num_shards=2)
        cases.append(("save_to_disk, 2 Arrow files", os.path.join(tmp, "saved"), "train",
                      expected(datasets.load_from_disk(os.path.join(tmp, "saved")))))
        split = datasets.DatasetDict({"train": captioned(os.path.join(tmp, "b"), 9, 1),
                                      "validation": captioned(os.path.join(tmp, "c"), 5, 2)})
        split.save_to_disk(os.path.join(tmp, "dict"))
        loaded = datasets.load_from_disk(os.path.join(tmp, "dict"))
        for name in ("train", "validation"):
            cases.append((f"DatasetDict split {name}", os.path.join(tmp, "dict"), name, expected(loaded[name])))
        pq_ds = captioned(os.path.join(tmp, "d"), 11, 3)
        pq_ds.to_parquet(os.path.join(tmp, "one.parquet"), batch_size=3)
        cases.append(("Parquet file, row groups of 3, images by path", os.path.join(tmp, "one.parquet"), "train",
                      expected(datasets.Dataset.from_parquet(os.path.join(tmp, "one.parquet")))))
        hub = os.path.join(tmp, "hub", "data")
        os.makedirs(hub)
        parts = [captioned(os.path.join(tmp, f"e{i}"), n, 4 + i) for i, n in enumerate((6, 7, 4))]
        for part, name in zip(parts, ("train-00000-of-00002", "train-00001-of-00002", "test-00000-of-00001")):
            # Images embedded, as the hub's Parquet files hold them.
            table = datasets.table.embed_table_storage(part.with_format("arrow")[:])
            pq.write_table(table, os.path.join(hub, name + ".parquet"), row_group_size=4)
        train_hub = datasets.load_dataset("parquet", data_files={"train": os.path.join(hub, "train-*.parquet")},
                                          cache_dir=os.path.join(tmp, "cache_pq"))["train"]
        cases.append(("hub Parquet directory, split train", os.path.dirname(hub), "train", expected(train_hub)))
        json_path = os.path.join(tmp, "alpaca.json")
        records = [{"instruction": f"say {CAPTIONS[i % len(CAPTIONS)]}", "input": "" if i % 2 else f"in {i}",
                    "output": f"out {i}"} for i in range(15)]
        with open(json_path, "w") as f:
            json.dump(records, f)
        cached = datasets.load_dataset("json", data_files={"train": json_path}, cache_dir=os.path.join(tmp, "cache"))
        cache_dir = os.path.dirname(cached["train"].cache_files[0]["filename"])
        cases.append(("load_dataset's Arrow cache", cache_dir, "train",
                      {"rows": len(cached["train"]),
                       "values": {k: list(cached["train"][k]) for k in ("instruction", "input", "output")}}))

        for name, data, split_name, want in cases:
            if args.perturb and name.startswith("save_to_disk"):
                want["values"]["text"][5] += "!"
            columns = [f"{c}:{'image' if c == 'image' else 'integer' if c == 'label' else 'text'}"
                       for c in want["values"]]
            got, err = dump(args.table_dump, data, split_name, columns, os.path.join(tmp, "out.json"))
            if got is None:
                print(f"FAIL {name}: table_dump refused it: {err}")
                ran = False
                continue
            bad = [c for c in want["values"] if got["values"].get(c) != want["values"][c]]
            if got["rows"] != want["rows"] or bad:
                for c in bad:
                    row = next(i for i, (a, b) in enumerate(zip(got["values"][c], want["values"][c])) if a != b) \
                        if len(got["values"][c]) == len(want["values"][c]) else "count"
                    print(f"MISMATCH {name}: column {c}, first at row {row}")
                failures.append(name)
            else:
                print(f"ok {name}: {want['rows']} rows, columns {', '.join(want['values'])} ({got['description']})")

        # Bad tables: each refused (exit 1) with these words in the message.
        bad_cases = []
        trunc = os.path.join(tmp, "truncated")
        ds.save_to_disk(trunc)
        arrow_file = os.path.join(trunc, "data-00000-of-00001.arrow")
        size = os.path.getsize(arrow_file)
        with open(arrow_file, "r+b") as f:
            f.truncate(size // 2)
        bad_cases.append(("truncated Arrow file", trunc, "train", ["image:image"], ["data-00000-of-00001.arrow"]))
        missing = os.path.join(tmp, "missing")
        ds.save_to_disk(missing, num_shards=2)
        os.remove(os.path.join(missing, "data-00001-of-00002.arrow"))
        bad_cases.append(("state.json names a missing file", missing, "train", [],
                          ["state.json", "data-00001-of-00002.arrow", "not there"]))
        bad_cases.append(("missing column", os.path.join(tmp, "saved"), "train", ["caption:text"],
                          ["no column 'caption'", "image", "text", "label", "caption_column="]))
        bad_cases.append(("column of another kind", os.path.join(tmp, "saved"), "train", ["label:text"],
                          ["'label'", "int64", "label_column="]))
        bad_cases.append(("split not there", os.path.join(tmp, "dict"), "test", [],
                          ["split 'test'", "train, validation", "split="]))
        mixed = os.path.join(tmp, "mixed")
        os.makedirs(mixed)
        pq.write_table(pa.table({"text": ["a", "b"]}), os.path.join(mixed, "part-0.parquet"))
        pq.write_table(pa.table({"text": [1, 2]}), os.path.join(mixed, "part-1.parquet"))
        bad_cases.append(("Parquet files of two schemas", mixed, "train", [], ["part-1.parquet", "differ"]))
        nulls = os.path.join(tmp, "nulls.parquet")
        pq.write_table(pa.table({"text": ["a"] * 1000 + [None] + ["b"] * 99}), nulls, row_group_size=300)
        bad_cases.append(("a null caption in row 1000 of 1,100", nulls, "train", ["text:text"],
                          ["nulls.parquet row 1000 column 'text'", "null"]))
        # A damaged footer (found by tests/fuzz/fuzz_table): row group 0 claims 139,429,082,747 rows where the file
        # says 2; decoding it would allocate for all of them (pyarrow itself runs out of memory on it).
        claims = os.path.join(tmp, "claims.parquet")
        with open(os.path.join(HERE, "..", "fuzz", "regressions", "fuzz_table",
                               "fuzz_table-oom-80db7d58aa540f3cb41a5be4785f3c336fc20b65"), "rb") as f, \
                open(claims, "wb") as g:
            g.write(f.read())
        bad_cases.append(("a row group claiming 10^11 rows", claims, "train", [],
                          ["claims.parquet: row group 0 claims 139,429,082,747 rows", "row_group_size"]))
        not_table = os.path.join(tmp, "empty_dir")
        os.makedirs(not_table)
        bad_cases.append(("no table", not_table, "train", [], ["no state.json", "*.parquet"]))
        for name, data, split_name, columns, words in bad_cases:
            got, err = dump(args.table_dump, data, split_name, columns, os.path.join(tmp, "out.json"))
            missing_words = [w for w in words if w not in err]
            if got is not None or missing_words:
                print(f"FAIL {name}: {'accepted' if got is not None else 'message lacks ' + repr(missing_words)}: "
                      f"{err}")
                failures.append(name)
            else:
                print(f"ok refused {name}: {err}")

    if not ran:
        return 2
    if args.expect_mismatch:
        return 0 if failures else 1
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
