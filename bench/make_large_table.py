#!/usr/bin/env python3
"""Writes a large captioned-image table for bench/table_read: DIR/arrow, laid out as Dataset.save_to_disk lays it out
(state.json, dataset_info.json, data-0000K-of-0000N.arrow Arrow IPC streams of 100-row record batches, an image
struct<bytes, path> and a text column), and DIR/parquet, the same rows as Parquet files in 100-row row groups (the
hub's layout, data/train-0000K-of-0000N.parquet). Images are random bytes of ~100 KB (the reader does not decode
them); each shard holds ~500 MB, as save_to_disk's default max_shard_size does.

usage: make_large_table.py DIR GB
"""
import json
import os
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def main():
    out, gb = sys.argv[1], float(sys.argv[2])
    row_bytes = 100_000
    rows = int(gb * 1e9 / row_bytes)
    per_shard = 5_000
    shards = (rows + per_shard - 1) // per_shard
    rng = np.random.default_rng(0)
    image = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    schema = pa.schema([("image", image), ("text", pa.string())])
    os.makedirs(os.path.join(out, "arrow"), exist_ok=True)
    os.makedirs(os.path.join(out, "parquet", "data"), exist_ok=True)
    files = []
    for k in range(shards):
        n = min(per_shard, rows - k * per_shard)
        name = f"data-{k:05d}-of-{shards:05d}.arrow"
        files.append({"filename": name})
        pq_writer = pq.ParquetWriter(os.path.join(out, "parquet", "data", f"train-{k:05d}-of-{shards:05d}.parquet"),
                                     schema, compression="none")
        with pa.ipc.new_stream(os.path.join(out, "arrow", name), schema) as writer:
            for start in range(0, n, 100):
                m = min(100, n - start)
                blobs = [rng.bytes(row_bytes) for _ in range(m)]
                batch = pa.record_batch([pa.array([{"bytes": b, "path": f"{k}_{start + i}.jpg"}
                                                   for i, b in enumerate(blobs)], type=image),
                                         pa.array([f"caption {k * per_shard + start + i}" for i in range(m)])],
                                        schema=schema)
                writer.write_batch(batch)
                pq_writer.write_batch(batch, row_group_size=100)
        pq_writer.close()
    with open(os.path.join(out, "arrow", "state.json"), "w") as f:
        json.dump({"_data_files": files, "_fingerprint": "bench", "_format_columns": None, "_format_kwargs": {},
                   "_format_type": None, "_output_all_columns": False, "_split": "train"}, f, indent=2)
    with open(os.path.join(out, "arrow", "dataset_info.json"), "w") as f:
        json.dump({"features": {"image": {"_type": "Image"}, "text": {"dtype": "string", "_type": "Value"}}}, f)
    print(f"{rows} rows, {shards} shards in {out}/arrow and {out}/parquet")


if __name__ == "__main__":
    main()
