#!/usr/bin/env python3
"""tessera's instruction rows (data/text_data.hpp read by data/token_batches.hpp) against litgpt 0.5.7, the version
the seeds install: the rows of litgpt's SFTDataset with the "alpaca" prompt style, as its fine-tuning loop feeds them
to the model (input_ids padded with 0 by its collate function; the loss on logits[:, :-1] against labels[:, 1:]).

For each tokenizer directory given (DIR:CLASS: a copy of it whose tokenizer_config.json names that tokenizer_class,
which decides whether litgpt adds BOS) and each (seq_len, mask_prompt) in (96, false), (192, true), (1024, true), a few
hundred generated Alpaca records (seeded: empty and non-empty inputs, accented and non-Latin text, responses long
enough to be cut) are written as a JSON array; text_rows_dump prints tessera's row for each record, and the script
compares it with litgpt's: inputs (the ids, then 0) and targets (labels[t + 1], then -100) must be equal, id for id.

litgpt 0.5.7 pins torch<2.6 and numpy<2, so it is installed without its dependencies (scripts/install-deps.sh) and
its tokenizer, prompts and data/base modules are loaded here without the package's __init__, which imports the
rest of litgpt; those modules need only torch, lightning, yaml and the tokenizer packages of the environment.

usage: check_text_data.py TEXT_ROWS_DUMP TOKENIZER_DIR[:CLASS]... [--count N] [--perturb --expect-mismatch]
--perturb hands the comparison one wrong expected target (the first trained target of the first record, plus one):
a negative control, which must then see a mismatch. Exit 0 when every row is equal, 1 when one differs, 2 when a
side did not run. With --expect-mismatch exit 0 only when both ran and the comparison failed.
"""
import argparse
import importlib.util
import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import types
import warnings

warnings.filterwarnings("ignore")


def load_litgpt():
    loaded = getattr(sys.modules.get("litgpt"), "tessera_loaded", None)
    if loaded:  # an earlier check in this process (tests/reference/run_cases.py) set the package up
        return loaded
    spec = importlib.util.find_spec("litgpt")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("litgpt is not installed in this environment; run scripts/install-deps.sh")
    package = types.ModuleType("litgpt")
    package.__path__ = list(spec.submodule_search_locations)
    sys.modules["litgpt"] = package
    import litgpt.prompts  # noqa: E402
    import litgpt.tokenizer  # noqa: E402
    package.Tokenizer = litgpt.tokenizer.Tokenizer
    base_path = os.path.join(package.__path__[0], "data", "base.py")
    base_spec = importlib.util.spec_from_file_location("litgpt_data_base", base_path)
    base = importlib.util.module_from_spec(base_spec)
    base_spec.loader.exec_module(base)
    package.tessera_loaded = (litgpt.tokenizer.Tokenizer, base.SFTDataset)
    return package.tessera_loaded


WORDS = ("the model memory batch gradient token layer shard optimizer step loss data rank offload write explain "
         "list three reasons why how what is a an of to in for on with summarize translate classify").split()
EXTRA = ["café", "naïve", "Привет", "你好", "東京", "🙂", "x² + y³", "1. e4 e5 2. Nf3", "def f(x):\n    return x",
         "  two  spaces", "tab\there", "line\nbreak", "\"quoted\"", "<s>", "</s>"]


def phrase(rng, lo, hi):
    out = []
    for _ in range(rng.randint(lo, hi)):
        out.append(rng.choice(EXTRA) if rng.random() < 0.1 else rng.choice(WORDS))
    return " ".join(out)


def alpaca2k_train(cached, tokenizer, seq_len, mask, download_dir):
    """litgpt 0.5.7's Alpaca2k train set, its own setup() run: load_dataset (here answered with the cache made from
    the records, as the hub's files would be), train_test_split(test_size=0.05, seed=42), SFTDataset."""
    import datasets
    from litgpt.data.alpaca_2k import Alpaca2k
    module = Alpaca2k(mask_prompt=mask, prompt_style="alpaca", download_dir=download_dir)
    module.connect(tokenizer=tokenizer, batch_size=1, max_seq_length=seq_len)
    real = datasets.load_dataset
    datasets.load_dataset = lambda *a, **k: cached
    try:
        module.setup()
    finally:
        datasets.load_dataset = real
    return module.train_dataset


def records(count, seed):
    rng = random.Random(seed)
    out = []
    for i in range(count):
        out.append({"instruction": phrase(rng, 3, 20).capitalize() + "?",
                    "input": phrase(rng, 1, 15) if i % 3 == 0 else "",
                    "output": phrase(rng, 1, 120 if i % 5 == 0 else 30) + "."})
    return out


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("dump")
    parser.add_argument("tokenizers", nargs="+")
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--alpaca2k", action="store_true",
                        help="litgpt's Alpaca2k: the records as load_dataset's Arrow cache, split 95/5 with seed 42")
    parser.add_argument("--perturb", action="store_true")
    parser.add_argument("--expect-mismatch", action="store_true")
    args = parser.parse_args()
    try:
        Tokenizer, SFTDataset = load_litgpt()
    except Exception as e:  # noqa: BLE001
        print(f"cannot load litgpt: {e}")
        return 2
    mismatches = 0
    perturbed = False
    with tempfile.TemporaryDirectory() as tmp:
        data = records(args.count, 1234)
        data_file = os.path.join(tmp, "alpaca.json")
        with open(data_file, "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=4)
        tessera_data, extra = data_file, []
        if args.alpaca2k:
            # What Alpaca2k's load_dataset(repo_id, cache_dir=download_dir) leaves: a datasets cache of Arrow files.
            import datasets
            datasets.disable_progress_bars()
            download_dir = os.path.join(tmp, "alpaca2k")
            cached = datasets.load_dataset("json", data_files={"train": data_file}, cache_dir=download_dir)
            tessera_data, extra = download_dir, ["val_split_fraction=0.05", "seed=42"]
        for arg in args.tokenizers:
            # DIR, or DIR:CLASS for a copy of DIR with a tokenizer_config.json naming that tokenizer_class.
            tok_dir, _, cls = arg.partition(":")
            if cls:
                copy = os.path.join(tmp, os.path.basename(os.path.normpath(tok_dir)) + "-" + cls)
                shutil.copytree(tok_dir, copy)
                with open(os.path.join(copy, "tokenizer_config.json"), "w", encoding="utf-8") as f:
                    json.dump({"tokenizer_class": cls}, f)
                tok_dir = copy
            tokenizer = Tokenizer(tok_dir)
            for seq_len, mask in ((96, False), (192, True), (1024, True)):
                out_file = os.path.join(tmp, "rows.jsonl")
                run = subprocess.run([args.dump, tessera_data, tok_dir, str(seq_len), "1" if mask else "0", out_file]
                                     + extra, capture_output=True, text=True)
                if run.returncode != 0:
                    print(f"text_rows_dump failed ({run.returncode}): {run.stderr.strip()}")
                    return 2
                with open(out_file, encoding="utf-8") as f:
                    got = [json.loads(line) for line in f]
                if args.alpaca2k:
                    dataset = alpaca2k_train(cached, tokenizer, seq_len, mask, download_dir)
                else:
                    dataset = SFTDataset(data=data, tokenizer=tokenizer, prompt_style="alpaca",
                                         max_seq_length=seq_len, mask_prompt=mask, ignore_index=-100)
                if len(got) != len(dataset):
                    print(f"{tok_dir} seq_len={seq_len} mask_prompt={mask}: tessera gave {len(got)} rows, litgpt "
                          f"{len(dataset)}")
                    mismatches += 1
                    continue
                cut = 0
                for i in range(len(dataset)):
                    item = dataset[i]
                    ids = item["input_ids"].tolist()
                    labels = item["labels"].tolist()
                    cut += len(ids) == seq_len
                    want_in = ids + [0] * (seq_len - len(ids))
                    want_tg = labels[1:] + [-100] * (seq_len - len(ids) + 1)
                    if args.perturb and not perturbed:
                        t = next(k for k, v in enumerate(want_tg) if v != -100)
                        want_tg[t] += 1
                        perturbed = True
                    if got[i]["inputs"] != want_in or got[i]["targets"] != want_tg:
                        mismatches += 1
                        if mismatches <= 5:
                            pairs = ((got[i]["inputs"], want_in), (got[i]["targets"], want_tg))
                            at = min(next((k for k, (a, b) in enumerate(zip(x, y)) if a != b), len(x)) for x, y in pairs)
                            lo, hi = max(0, at - 4), at + 8
                            print(f"MISMATCH {tok_dir} seq_len={seq_len} mask_prompt={mask} record {i} "
                                  f"({json.dumps(dataset.data[i], ensure_ascii=False)[:200]}), from position {at}:\n"
                                  f"  tessera inputs  {got[i]['inputs'][lo:hi]}\n  litgpt  inputs  {want_in[lo:hi]}\n"
                                  f"  tessera targets {got[i]['targets'][lo:hi]}\n  litgpt  targets {want_tg[lo:hi]}")
                print(f"{os.path.basename(os.path.normpath(tok_dir))}: seq_len={seq_len} mask_prompt={mask}: "
                      f"{len(dataset)} records ({cut} cut to seq_len) compared")
                for name in os.listdir(tmp):
                    if name.endswith(".tokens"):
                        os.remove(os.path.join(tmp, name))
    print(f"{mismatches} mismatching rows")
    if args.expect_mismatch:
        return 0 if mismatches > 0 else 1
    return 0 if mismatches == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
