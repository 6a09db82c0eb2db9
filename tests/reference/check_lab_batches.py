#!/usr/bin/env python3
"""The first batches tessera builds from a `datasets` directory (data/table_source.hpp through CaptionBatches and
ImageBatches) against what the labs' scripts build from it with `datasets` and the model's processor, and the step-1
loss against transformers' on that batch.

BLIP-2 (--family blip2, BATCH_DUMP and EXE blip2-opt-fp32): a small BLIP-2 over OPT saved by transformers (the model
of check_blip2_against_transformers.py, its vocabulary the tokenizer fixture's plus the image token), with the
OPT-like tokenizer fixture and a preprocessor_config.json written by BlipImageProcessor (32x32). The data is a
Dataset.save_to_disk directory of --rows captioned images, JPEG and PNG (made with Pillow, some of another size than
the model's, some with an EXIF Orientation), text captions from a few characters to a few dozen words. The lab's
side, as seed 000/002's scripts: load_from_disk(d).shuffle(seed=S).select(range(N)), batches of B rows in order (or,
with data_order=dataloader, DataLoader(shuffle=True, generator=torch.Generator().manual_seed(seed)))), pixel_values
from the image processor, tokenizer(text, padding=True, truncation=True, max_length=M) and labels=input_ids.
tessera's input_ids, attention_mask and labels must equal the tokenizer's bit for bit, its pixels the processor's
within --pixel-tol; the step-1 loss of blip2-opt-fp32 on that data must equal transformers' within 1e-5 relative,
given the image tokens before the caption (what Blip2Processor gives) and, as labels, the caption's ids
(caption_targets=caption, the default) or the whole input_ids (caption_targets=processor).
BLIP-2 over Flan-T5 (--family blip2-t5, EXE blip2-t5-fp32): the same over a small Flan-T5 layout, its tokenizer as
the hub ships Flan-T5's (spiece.model, a SentencePiece unigram model trained here with T5's pad 0 / eos 1 / unk 2,
beside transformers' T5Tokenizer's tokenizer.json and tokenizer_config.json): the captions end in </s> and pad with
0; the loss is transformers' own (the encoder reads the image tokens and the caption, the decoder the labels).
ViT (--family vit, EXE vit-fp32): a small ViT with a ViTImageProcessor config (resize to 32x32), a save_to_disk
directory of images and a ClassLabel column; pixels within --pixel-tol and labels equal, the step-1 loss within 1e-5.
The seed entries (--family catalogue, EXE seed000-single, --extra-exe seed002-bf16-true): each trains two steps on a
save_to_disk directory with the small model and the lab's shuffle, its data line naming both.
Bad tables (--family bad, EXE blip2-opt-fp32): image bytes that are no image, one null caption in 100,000 Parquet
rows, a truncated Arrow file, a state.json naming a missing file, a missing column, Parquet files of two schemas:
each run must exit non-zero naming the file, the row and the column (or listing the columns), and leave neither its
metrics file nor its save_dir behind (with --perturb the missing column is not asked for: that run trains, and must be
reported).

usage: check_lab_batches.py BATCH_DUMP EXE --family blip2|blip2-t5|vit|bad|catalogue [--perturb --expect-mismatch]
--perturb gives the lab's side another shuffle seed: a negative control, which must then see a mismatch.
Exit 0 when all agree, 1 when one differs, 2 when a side did not run.
"""
import argparse
import io
import json
import os
import shutil
import subprocess
import sys
import warnings

warnings.filterwarnings("ignore")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")

import datasets  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import sentencepiece as spm  # noqa: E402
from PIL import Image  # noqa: E402
from safetensors.torch import load_file  # noqa: E402
from transformers import (AutoTokenizer, BlipImageProcessor, Blip2ForConditionalGeneration,  # noqa: E402
                          T5Tokenizer, ViTConfig, ViTForImageClassification, ViTImageProcessor)
from transformers.loss.loss_utils import ForCausalLMLoss  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import check_blip2_against_transformers as blip2_check  # noqa: E402
import tessera_run  # noqa: E402

FIXTURE = os.path.join(os.path.dirname(HERE), "text", "fixtures", "bpe_json")
WORDS = ("a burger with fries on a plate crème brûlée soup of the day fresh salad grilled fish noodles in a bowl "
         "chocolate cake with berries").split()


def make_images(folder, n, rng, size_every=3):
    """JPEGs and PNGs, most of the model's 32x32, every size_every-th of another size; every fourth carries an EXIF
    Orientation of 2..8 (which datasets' Image feature applies)."""
    os.makedirs(folder, exist_ok=True)
    paths = []
    for i in range(n):
        h, w = (32, 32) if i % size_every else (int(rng.integers(20, 50)), int(rng.integers(20, 50)))
        pixels = rng.integers(0, 256, size=(h, w, 3), dtype=np.uint8)
        path = os.path.join(folder, f"{i:03d}.{'jpg' if i % 2 else 'png'}")
        options = {"quality": 90} if i % 2 else {}
        if i % 4 == 1:
            exif = Image.Exif()
            exif[0x0112] = 2 + (i // 4) % 7
            options["exif"] = exif.tobytes()
        Image.fromarray(pixels).save(path, **options)
        paths.append(path)
    return paths


def t5_tokenizer(d):
    """A Flan-T5-like tokenizer: a SentencePiece unigram model trained here on the caption words with T5's layout
    (pad 0, eos 1, unk 2, no bos), as the hub ships it (spiece.model), and transformers' T5Tokenizer made from it (100
    extra ids, as Flan-T5's)."""
    rng = np.random.default_rng(17)
    sentences = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 30)))) for _ in range(400)]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(sentences), model_writer=model, vocab_size=48,
                                   model_type="unigram", pad_id=0, eos_id=1, unk_id=2, bos_id=-1, pad_piece="<pad>",
                                   eos_piece="</s>", unk_piece="<unk>", character_coverage=1.0, num_threads=1,
                                   minloglevel=2)
    stage = os.path.join(d, "spiece")
    os.makedirs(stage, exist_ok=True)
    with open(os.path.join(stage, "spiece.model"), "wb") as f:
        f.write(model.getvalue())
    return T5Tokenizer.from_pretrained(stage), os.path.join(stage, "spiece.model")


def blip2_model(d, lm="opt"):
    model_dir = os.path.join(d, "model")
    if lm == "t5":
        # The hub's Flan-T5 directory: spiece.model beside transformers' tokenizer.json and tokenizer_config.json.
        tokenizer, spiece = t5_tokenizer(d)
        blip2_check.VOCAB = len(tokenizer) + 1  # the image token last
        blip2_check.make_model_dir(model_dir, "t5", False)
        shutil.copy(spiece, model_dir)
        tokenizer.save_pretrained(model_dir)
        BlipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(model_dir)
        return model_dir, blip2_check.VOCAB - 1
    tokenizer = AutoTokenizer.from_pretrained(FIXTURE)
    vocab = len(tokenizer) + 1  # the image token last
    blip2_check.VOCAB = vocab
    blip2_check.make_model_dir(model_dir, "opt", False)
    for name in os.listdir(FIXTURE):
        shutil.copy(os.path.join(FIXTURE, name), model_dir)
    # The fixture's tokenizer_config.json says add_bos_token true, which transformers 5.17 does not apply to a
    # tokenizer.json without a post_processor (the labs' side would get no BOS) and tessera does (as litgpt): the
    # model here says false, so that both sides tokenize the same way.
    config_path = os.path.join(model_dir, "tokenizer_config.json")
    with open(config_path) as f:
        config = json.load(f)
    config["add_bos_token"] = False
    with open(config_path, "w") as f:
        json.dump(config, f)
    BlipImageProcessor(size={"height": 32, "width": 32}).save_pretrained(model_dir)
    return model_dir, vocab - 1


def blip2_data(d, rows, rng):
    paths = make_images(os.path.join(d, "images"), rows, rng)
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(1, 30)))) for _ in range(rows)]
    ds = datasets.Dataset.from_dict({"image": paths, "text": texts},
                                    features=datasets.Features({"image": datasets.Image(),
                                                                "text": datasets.Value("string")}))
    ds.save_to_disk(os.path.join(d, "data"), num_shards=2)
    return os.path.join(d, "data")


def lab_rows(data, shuffle_seed, n, batch, steps, order_seed=None):
    """The rows of the lab's first `steps` batches: shuffle(seed).select(range(n)), then in order or as a seeded
    shuffling DataLoader orders them."""
    ds = datasets.load_from_disk(data)
    if shuffle_seed >= 0:
        ds = ds.shuffle(seed=shuffle_seed)
    ds = ds.select(range(n))
    if order_seed is None:
        order = list(range(n))
    else:
        loader = torch.utils.data.DataLoader(range(n), batch_size=batch, shuffle=True,
                                             generator=torch.Generator().manual_seed(order_seed))
        order = [int(i) for b in loader for i in b]
    return [[ds[order[s * batch + i]] for i in range(batch)] for s in range(steps)]


def dump(tool, family, out, steps, args):
    keys = [f"{k}={v}" for k, v in args.items()]
    proc = subprocess.run([tool, family, out, str(steps)] + keys, capture_output=True, text=True)
    if proc.returncode != 0:
        print(f"batch_dump failed: {proc.stderr.strip()}")
        return None
    return load_file(out)


def check_blip2(a, d, lm="opt"):
    rng = np.random.default_rng(5)
    model_dir, image_token = blip2_model(d, lm)
    data = blip2_data(d, a.rows, rng)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    processor = BlipImageProcessor.from_pretrained(model_dir)
    ok = True
    configs = [dict(shuffle_seed=7, num_train_samples=24, max_length=12, caption_targets="caption"),
               dict(shuffle_seed=3, num_train_samples=20, max_length=9, caption_targets="processor",
                    data_order="dataloader", seed=11),
               dict(shuffle_seed=-1, num_train_samples=16, max_length=-1, caption_targets="caption")]
    for config in configs:
        args = dict(model_dir=model_dir, data=data, batch_size=4, seq_len=40, threads=1, device="cpu", **config)
        steps = 3
        ours = dump(a.batch_dump, f"blip2-{lm}", os.path.join(d, "batches.safetensors"), steps, args)
        if ours is None:
            return None
        max_length = config["max_length"] if config["max_length"] > 0 else args["seq_len"]
        seed = config["shuffle_seed"] + (1 if a.perturb else 0)
        batches = lab_rows(data, seed, config["num_train_samples"], 4, steps,
                           config.get("seed") if config.get("data_order") == "dataloader" else None)
        worst = 0.0
        for s, rows in enumerate(batches):
            text = tokenizer([r["text"] for r in rows], padding=True, truncation=True, max_length=max_length,
                             return_tensors="pt")
            pixels = processor(images=[r["image"] for r in rows], return_tensors="pt")["pixel_values"]
            same = torch.equal(ours[f"{s}.input_ids"], text["input_ids"]) and \
                torch.equal(ours[f"{s}.attention_mask"], text["attention_mask"])
            if config["caption_targets"] == "caption":
                same = same and torch.equal(ours[f"{s}.labels"], text["input_ids"])
            else:
                same = same and f"{s}.labels" not in ours
            diff = float((ours[f"{s}.pixels"] - pixels).abs().max())
            worst = max(worst, diff)
            if not same and a.keep:
                print("tessera", ours[f"{s}.input_ids"].tolist(), "\nlab    ", text["input_ids"].tolist())
            if not same or diff > a.pixel_tol:
                print(f"MISMATCH {config} step {s}: ids/mask/labels {'equal' if same else 'differ'}, pixels "
                      f"max |diff| {diff:.3g}")
                ok = False
        if ok:
            print(f"ok batches {config}: {steps} batches, ids, mask, labels equal; pixels max |diff| {worst:.3g}")
        # The step-1 loss on batch 0 against transformers'.
        rows = batches[0]
        text = tokenizer([r["text"] for r in rows], padding=True, truncation=True, max_length=max_length,
                         return_tensors="pt")
        pixels = processor(images=[r["image"] for r in rows], return_tensors="pt")["pixel_values"]
        queries = blip2_check.QUERIES
        image = torch.full((4, queries), image_token, dtype=torch.long)
        input_ids = torch.cat([image, text["input_ids"]], 1)
        mask = torch.cat([torch.ones(4, queries, dtype=torch.long), text["attention_mask"]], 1)
        labels = text["input_ids"] if config["caption_targets"] == "caption" else input_ids
        model = Blip2ForConditionalGeneration.from_pretrained(model_dir, dtype=torch.float32)
        with torch.no_grad():
            if lm == "t5":  # the encoder reads image and caption, the decoder is trained on the labels
                theirs = float(model(pixel_values=pixels, input_ids=input_ids, attention_mask=mask,
                                     labels=labels).loss)
            else:
                logits = model(pixel_values=pixels, input_ids=input_ids, attention_mask=mask).logits
                # Blip2ForConditionalGeneration's own loss on labels shorter than the sequence: its logits[:, -L:]
                # then ForCausalLMLoss (transformers 5.17 calls .view on that slice, which fails unless contiguous).
                theirs = float(ForCausalLMLoss(logits[:, -labels.size(1):, :].contiguous(), labels,
                                               vocab_size=model.config.text_config.vocab_size))
        run_args = dict(args, max_steps=1, lr=1e-3, metrics=os.path.join(d, "metrics.jsonl"))
        losses = tessera_run.run(a.exe, run_args, [])
        if losses is None:
            return None
        rel = abs(losses[0] - theirs) / abs(theirs)
        print(f"{'ok' if rel <= 1e-5 else 'MISMATCH'} step-1 loss {config['caption_targets']}: tessera "
              f"{losses[0]:.7f}, transformers {theirs:.7f} (relative {rel:.2e})")
        ok = ok and rel <= 1e-5
    return ok


def check_vit(a, d):
    rng = np.random.default_rng(9)
    model_dir = os.path.join(d, "model")
    torch.manual_seed(3)
    config = ViTConfig(image_size=32, patch_size=8, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                       intermediate_size=64, num_labels=5, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    ViTForImageClassification(config).save_pretrained(model_dir)
    ViTImageProcessor(size={"height": 32, "width": 32}).save_pretrained(model_dir)
    paths = make_images(os.path.join(d, "images"), a.rows, rng)
    names = ["burger", "cake", "fish", "salad", "soup"]
    labels = [int(x) for x in rng.integers(0, 5, size=a.rows)]
    ds = datasets.Dataset.from_dict({"img": paths, "food": labels}, features=datasets.Features(
        {"img": datasets.Image(), "food": datasets.ClassLabel(names=names)}))
    data = os.path.join(d, "data")
    datasets.DatasetDict({"train": ds, "validation": ds.select(range(4))}).save_to_disk(data)
    args = dict(model_dir=model_dir, data=data, batch_size=4, threads=1, device="cpu", shuffle_seed=13,
                num_train_samples=24, image_column="img", label_column="food", split="train")
    ours = dump(a.batch_dump, "vit", os.path.join(d, "batches.safetensors"), 3, args)
    if ours is None:
        return None
    processor = ViTImageProcessor.from_pretrained(model_dir)
    ds = datasets.load_from_disk(data)["train"].shuffle(seed=13 + (1 if a.perturb else 0)).select(range(24))
    ok = True
    for s in range(3):
        rows = [ds[s * 4 + i] for i in range(4)]
        pixels = processor(images=[r["img"] for r in rows], return_tensors="pt")["pixel_values"]
        want = torch.tensor([r["food"] for r in rows])
        diff = float((ours[f"{s}.pixels"] - pixels).abs().max())
        if not torch.equal(ours[f"{s}.labels"], want) or diff > a.pixel_tol:
            print(f"MISMATCH vit step {s}: labels {ours[f'{s}.labels'].tolist()} vs {want.tolist()}, pixels "
                  f"{diff:.3g}")
            ok = False
    if ok:
        print("ok vit batches: 3 batches, labels equal, pixels within tolerance")
    rows = [ds[i] for i in range(4)]
    pixels = processor(images=[r["img"] for r in rows], return_tensors="pt")["pixel_values"]
    model = ViTForImageClassification.from_pretrained(model_dir)
    with torch.no_grad():
        theirs = float(model(pixel_values=pixels, labels=torch.tensor([r["food"] for r in rows])).loss)
    losses = tessera_run.run(a.exe, dict(args, max_steps=1, lr=1e-3, metrics=os.path.join(d, "metrics.jsonl")), [])
    if losses is None:
        return None
    rel = abs(losses[0] - theirs) / abs(theirs)
    print(f"{'ok' if rel <= 1e-5 else 'MISMATCH'} vit step-1 loss: tessera {losses[0]:.7f}, transformers "
          f"{theirs:.7f} (relative {rel:.2e})")
    return ok and rel <= 1e-5


def check_bad(a, d):
    """Bad tables given to a BLIP-2 run: each must exit non-zero with the file, the row and the column (or the
    columns there are) in its message, and leave no metrics file or save_dir behind."""
    model_dir, _ = blip2_model(d)
    rng = np.random.default_rng(1)
    good = blip2_data(os.path.join(d, "good"), 8, rng)
    ds = datasets.load_from_disk(good)
    cases = []
    # Row 5's image bytes are not an image.
    raw = ds.cast_column("image", datasets.Image(decode=False))
    images = list(raw["image"])
    images[5] = {"bytes": b"this is not an image", "path": "bad.jpg"}
    bad_image = datasets.Dataset.from_dict({"image": images, "text": list(ds["text"])},
                                           features=datasets.Features({"image": datasets.Image(),
                                                                       "text": datasets.Value("string")}))
    bad_image.save_to_disk(os.path.join(d, "bad_image"))
    cases.append(("image bytes that are no image", os.path.join(d, "bad_image"), {},
                  ["data-00000-of-00001.arrow row 5 column 'image'"]))
    # 100,000 rows, one null caption (row 73,456).
    png = images[0]["bytes"]
    texts = ["a burger"] * 100_000
    texts[73_456] = None
    import pyarrow as pa
    import pyarrow.parquet as pq
    image_type = pa.struct([("bytes", pa.binary()), ("path", pa.string())])
    pq.write_table(pa.table({"image": pa.array([{"bytes": png, "path": None}] * 100_000, type=image_type),
                             "text": pa.array(texts, type=pa.string())}),
                   os.path.join(d, "big.parquet"), row_group_size=10_000)
    cases.append(("one null caption in 100,000 rows", os.path.join(d, "big.parquet"), {},
                  ["big.parquet row 73456 column 'text'", "null"]))
    # A truncated Arrow file.
    trunc = os.path.join(d, "truncated")
    shutil.copytree(good, trunc)
    arrow = os.path.join(trunc, "data-00001-of-00002.arrow")
    with open(arrow, "r+b") as f:
        f.truncate(os.path.getsize(arrow) // 2)
    cases.append(("a truncated Arrow file", trunc, {}, ["data-00001-of-00002.arrow", "truncated"]))
    # A state.json naming a file that is not there.
    missing = os.path.join(d, "missing")
    shutil.copytree(good, missing)
    os.remove(os.path.join(missing, "data-00000-of-00002.arrow"))
    cases.append(("state.json names a missing file", missing, {}, ["state.json", "data-00000-of-00002.arrow"]))
    # The captions under another column name.
    cases.append(("a missing column", good, {"text_column": "caption"},
                  ["no column 'caption'", "image", "text", "text_column="]))
    # A Parquet file of another schema beside a good one.
    mixed = os.path.join(d, "mixed")
    os.makedirs(mixed)
    pq.write_table(pa.table({"image": pa.array([{"bytes": png, "path": None}] * 4, type=image_type),
                             "text": ["a"] * 4}), os.path.join(mixed, "part-0.parquet"))
    pq.write_table(pa.table({"image": pa.array([png] * 4), "text": ["a"] * 4}), os.path.join(mixed, "part-1.parquet"))
    cases.append(("Parquet files of two schemas", mixed, {}, ["part-1.parquet", "differ"]))
    ok = True
    for name, data, extra, words in cases:
        metrics, saved = os.path.join(d, "metrics.jsonl"), os.path.join(d, "saved")
        args = dict(model_dir=model_dir, data=data, batch_size=2, seq_len=40, max_steps=1, threads=1, device="cpu",
                    metrics=metrics, save_dir=saved, **extra)
        if a.perturb:
            args.pop("text_column", None)
        proc = subprocess.run([a.exe] + [f"{k}={v}" for k, v in args.items()], capture_output=True, text=True,
                              timeout=240)
        message = proc.stdout + proc.stderr
        lacks = [w for w in words if w not in message]
        left = [p for p in (metrics, saved) if os.path.exists(p)]
        if proc.returncode == 0 or lacks or left:
            print(f"MISMATCH {name}: exit {proc.returncode}, message lacks {lacks}, left behind {left}:\n"
                  f"{message.strip()[-600:]}")
            ok = False
            for p in left:
                shutil.rmtree(p) if os.path.isdir(p) else os.remove(p)
        else:
            line = next((ln for ln in message.splitlines() if words[0] in ln), "")
            print(f"ok refused ({proc.returncode}) {name}: {line.strip()[:300]}")
    return ok


def check_catalogue(a, d):
    """The seed entries on the lab's kind of data: EXE (seed000-single or seed002-bf16-true: BLIP-2 over OPT, the
    seeds' settings) given a save_to_disk directory, the small model and the lab's shuffle, trains two steps; its
    data line names the table and the shuffle. --extra-exe entries likewise."""
    model_dir, _ = blip2_model(d)
    data = blip2_data(d, 24, np.random.default_rng(2))
    ok = True
    for exe in [a.exe] + a.extra_exe:
        args = dict(model_dir=model_dir, data=data, shuffle_seed=42, batch_size=2, accumulate_grad_batches=1,
                    num_train_samples=16, max_steps=2, threads=1, device="cpu", predict="false")
        proc = subprocess.run([exe] + [f"{k}={v}" for k, v in args.items()], capture_output=True, text=True,
                              timeout=240)
        out = proc.stdout + proc.stderr
        words = ["datasets directory", "shuffled as Dataset.shuffle(seed=42)", "step 2/2"]
        lacks = [w for w in words if w not in out]
        if proc.returncode != 0 or lacks:
            print(f"MISMATCH {os.path.basename(exe)}: exit {proc.returncode}, output lacks {lacks}:\n{out[-800:]}")
            ok = False
        else:
            print(f"ok {os.path.basename(exe)} trained on the table: "
                  f"{next(ln for ln in out.splitlines() if 'datasets directory' in ln).strip()[:160]}")
    return ok


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("batch_dump")
    ap.add_argument("exe")
    ap.add_argument("--family", required=True, choices=["blip2", "blip2-t5", "vit", "bad", "catalogue"])
    ap.add_argument("--extra-exe", action="append", default=[], help="catalogue: more entries to run")
    ap.add_argument("--rows", type=int, default=30)
    ap.add_argument("--pixel-tol", type=float, default=1e-5)
    ap.add_argument("--keep", help="work in this dir instead of a temporary one, and keep it (debugging)")
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--expect-mismatch", action="store_true")
    a = ap.parse_args()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    datasets.disable_progress_bars()
    torch.set_num_threads(1)
    check = {"blip2": check_blip2, "blip2-t5": lambda a, d: check_blip2(a, d, "t5"), "vit": check_vit,
             "bad": check_bad, "catalogue": check_catalogue}[a.family]
    return tessera_run.verdict(tessera_run.in_work_dir(a.keep, lambda d: check(a, d)), a.expect_mismatch)


if __name__ == "__main__":
    sys.exit(main())
