#!/usr/bin/env python3
"""Writes the small tokenizers that tessera's text tests run on (tests/text/fixtures/), trained on text this script
generates itself (no downloads), so that the files are a few tens of KB and the same on every run:

  sp_bpe/tokenizer.model        SentencePiece BPE laid out like Llama's (byte_fallback, split_digits, identity
                                normalization, no extra-whitespace removal, unk 0, bos 1, eos 2, no pad)
  sp_unigram/tokenizer.model    SentencePiece unigram laid out like T5's (pad 0, eos 1, unk 2, no bos, extra
                                whitespace removed), normalized by a small rule table of its own: T5's nmt_nfkc
                                table alone is ~240 KB
  bpe_json/tokenizer.json       byte-level BPE (GPT-2/OPT style) trained with `tokenizers`, OPT's four special
                                tokens first (<s> 0, <pad> 1, </s> 2, <unk> 3) and one added non-special token
  bpe_files/vocab.json, merges.txt
                                the same model as vocab.json + merges.txt
  bpe_json/, bpe_files/ tokenizer_config.json and special_tokens_map.json
                                as facebook/opt-125m's: bos, eos and unk </s>, pad <pad>, add_prefix_space false

usage: .venv/bin/python scripts/make_test_tokenizers.py [OUT_DIR] [--large]
OUT_DIR defaults to tests/text/fixtures. --large writes, instead, the bigger tokenizers that are checked locally and
not committed: a 4,000-token byte-level BPE (bpe_large/) and a 4,000-piece unigram with T5's real nmt_nfkc
normalization (sp_nfkc/).
"""
import argparse
import io
import json
import os
import random
import tempfile

import sentencepiece as spm
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from tokenizers import AddedToken

WORDS = """the of and to in is that for it as was with be by on not he this are or his from at which but have an
they you were her she there been one all we their has would when if so no what up out them some could more into
time than other its then two may only over first new these any after most also made like did many before must
through back years where much your way well down should because each just those people how too little state good
very make world still own see men work long get here between both life being under never day same another know
while last might us great old year off come since against go came right used take three model training token loss
gradient batch layer memory shard optimizer checkpoint precision tensor learning rate epoch data set value""".split()
ACCENTED = "café naïve façade déjà vu Straße Ångström señor niño über Müller crème brûlée coöperate jalapeño".split()
CJK = ["你好世界", "东京大学", "こんにちは", "カタカナ", "한국어 문장", "機械学習", "数据集"]
EMOJI = ["🙂", "🚀", "👍🏽", "🇫🇷", "👨\u200d👩\u200d👧", "✨", "🔥🔥"]
COMBINING = ["e\u0301", "a\u0308", "n\u0303", "o\u0302\u0323", "\u0915\u094d\u0937"]
CONTRACTIONS = ["don't", "it's", "they're", "we've", "I'm", "you'll", "he'd", "can't", "won't", "She's"]
PIECES = ["SQUARE", "ROOK", "PAWN"]


def sentence(rng):
    n = rng.randint(3, 14)
    out = []
    for _ in range(n):
        r = rng.random()
        if r < 0.70:
            out.append(rng.choice(WORDS))
        elif r < 0.78:
            out.append(rng.choice(CONTRACTIONS))
        elif r < 0.84:
            out.append(rng.choice(ACCENTED))
        elif r < 0.88:
            out.append(str(rng.choice([rng.randint(0, 99), rng.randint(100, 99999), rng.randint(1900, 2030)])))
        elif r < 0.91:
            out.append(f"{rng.random() * 100:.{rng.randint(1, 3)}f}")
        elif r < 0.94:
            out.append(rng.choice(CJK))
        elif r < 0.96:
            out.append(rng.choice(EMOJI))
        elif r < 0.98:
            out.append(rng.choice(COMBINING))
        else:
            out.append(rng.choice(PIECES))
    text = " ".join(out)
    text = text[0].upper() + text[1:]
    return text + rng.choice([".", "!", "?", ",", ";", ":", "...", ""])


def code_line(rng):
    name = rng.choice(["x", "loss", "batch_size", "lr", "grad", "step", "tokens", "self.weight"])
    templates = [
        f"    {name} = {rng.randint(0, 512)} * {rng.choice(WORDS)}_{rng.randint(0, 9)}",
        f"def {rng.choice(WORDS)}_{rng.choice(WORDS)}({name}, n={rng.randint(1, 64)}):",
        f"\tif ({name} >= {rng.randint(1, 99)}) {{ return {name}[{rng.randint(0, 7)}]; }}",
        f"for (int i = 0; i < {rng.randint(2, 4096)}; ++i) {name}[i] += 0.{rng.randint(1, 999)}f;",
        f"        return torch.zeros({rng.randint(1, 8)}, {rng.randint(1, 1024)}, dtype=torch.float32)",
        f"#include <{rng.choice(['vector', 'string', 'cstdint', 'torch/torch.h'])}>",
        f"// {sentence(rng)}",
    ]
    return rng.choice(templates)


def pgn(rng):
    files, ranks = "abcdefgh", "12345678"
    moves = []
    for number in range(1, rng.randint(3, 14)):
        pair = []
        for _ in range(2):
            square = rng.choice(files) + rng.choice(ranks)
            kind = rng.random()
            if kind < 0.4:
                move = square
            elif kind < 0.8:
                move = rng.choice("NBRQK") + rng.choice(["", "x"]) + square
            elif kind < 0.9:
                move = rng.choice(files) + "x" + square
            else:
                move = rng.choice(["O-O", "O-O-O"])
            pair.append(move + rng.choice(["", "", "", "+", "#", "!", "?!"]))
        moves.append(f"{number}. {pair[0]} {pair[1]}")
    result = rng.choice(["1-0", "0-1", "1/2-1/2", "*"])
    return " ".join(moves) + " " + result


SYLLABLES = "ka lo mi ne ru sa te vo zu bre qui stra pho ght ing tion ment ous ble ver pre con dis".split()


def invented_words(rng):
    # Words no list holds: enough distinct text for a few thousand merges (the --large tokenizers).
    return " ".join("".join(rng.choice(SYLLABLES) for _ in range(rng.randint(1, 4))) for _ in range(rng.randint(4, 12)))


def corpus(seed, lines, rich=False):
    rng = random.Random(seed)
    out = []
    for _ in range(lines):
        r = rng.random()
        if rich and r < 0.3:
            out.append(invented_words(rng))
        elif r < 0.55:
            out.append(sentence(rng))
        elif r < 0.75:
            out.append(code_line(rng))
        elif r < 0.90:
            out.append(pgn(rng))
        else:
            # Whitespace the models must learn: runs of spaces, tabs, no-break and ideographic spaces.
            out.append(rng.choice(["  ", "    ", "\t", "\u00a0", "\u3000", " \t "]).join(sentence(rng).split(" ")))
    return out


# The unigram model's normalization: a few NFKC rules (full-width forms, ligatures, no-break and ideographic spaces,
# a precomposed accent) in SentencePiece's TSV form, source code points TAB target code points.
T5_LIKE_RULES = [
    *[((0xFF01 + i,), (0x21 + i,)) for i in range(94)],  # full-width ASCII -> ASCII
    ((0xFB01,), (0x66, 0x69)),  # ﬁ -> fi
    ((0xFB02,), (0x66, 0x6C)),  # ﬂ -> fl
    ((0x00A0,), (0x20,)),  # no-break space -> space
    ((0x3000,), (0x20,)),  # ideographic space -> space
    ((0x2026,), (0x2E, 0x2E, 0x2E)),  # … -> ...
    ((0x0065, 0x0301), (0x00E9,)),  # e + combining acute -> é
    ((0x2460,), (0x31,)),  # ① -> 1
]


def write_rules(path):
    with open(path, "w", encoding="utf-8") as f:
        for source, target in T5_LIKE_RULES:
            f.write(" ".join(f"{c:X}" for c in source) + "\t" + " ".join(f"{c:X}" for c in target) + "\n")


def train_sentencepiece(path, lines, **options):
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(lines), model_writer=model, num_threads=1,
                                   minloglevel=2, **options)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(model.getvalue())


OPT_SPECIALS = ["<s>", "<pad>", "</s>", "<unk>"]


def opt_special(content):
    return {"content": content, "lstrip": False, "normalized": True, "rstrip": False, "single_word": False}


def write_opt_configs(directory):
    # facebook/opt-125m's: OPT prepends </s> (id 2) as its BOS, pads with <pad> (id 1).
    config = {"add_bos_token": True, "add_prefix_space": False, "errors": "replace",
              "bos_token": {"__type": "AddedToken", **opt_special("</s>")},
              "eos_token": {"__type": "AddedToken", **opt_special("</s>")},
              "pad_token": {"__type": "AddedToken", **opt_special("<pad>")},
              "unk_token": {"__type": "AddedToken", **opt_special("</s>")},
              "model_max_length": 2048, "tokenizer_class": "GPT2Tokenizer"}
    special = {"bos_token": opt_special("</s>"), "eos_token": opt_special("</s>"), "pad_token": opt_special("<pad>"),
               "unk_token": opt_special("</s>")}
    for name, value in (("tokenizer_config.json", config), ("special_tokens_map.json", special)):
        with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
            json.dump(value, f, indent=2, ensure_ascii=False)
            f.write("\n")


def train_byte_level_bpe(lines, vocab_size):
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, min_frequency=2, show_progress=False,
                                  special_tokens=[AddedToken(t, special=True, normalized=False) for t in OPT_SPECIALS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(lines, trainer=trainer)
    return tokenizer


def write_byte_level_bpe(out, lines, vocab_size, with_extra_token):
    tokenizer = train_byte_level_bpe(lines, vocab_size)
    if with_extra_token:
        # An added token that is not special: split out of the text like the specials, but kept by decode.
        tokenizer.add_tokens([AddedToken("<|sep|>", special=False, normalized=False)])
    json_dir, files_dir = os.path.join(out, "bpe_json"), os.path.join(out, "bpe_files")
    for d in (json_dir, files_dir):
        os.makedirs(d, exist_ok=True)
        write_opt_configs(d)
    tokenizer.save(os.path.join(json_dir, "tokenizer.json"), pretty=False)
    tokenizer.model.save(files_dir)


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default=os.path.join(os.path.dirname(__file__), "..", "tests", "text",
                                                               "fixtures"))
    parser.add_argument("--large", action="store_true", help="the bigger local-only tokenizers")
    args = parser.parse_args()
    out = os.path.abspath(args.out)
    if args.large:
        lines = corpus(seed=11, lines=60000, rich=True)
        tokenizer = train_byte_level_bpe(lines, 4000)
        os.makedirs(os.path.join(out, "bpe_large"), exist_ok=True)
        tokenizer.save(os.path.join(out, "bpe_large", "tokenizer.json"))
        write_opt_configs(os.path.join(out, "bpe_large"))
        train_sentencepiece(os.path.join(out, "sp_nfkc", "tokenizer.model"), lines, model_type="unigram",
                            vocab_size=4000, pad_id=0, eos_id=1, unk_id=2, bos_id=-1,
                            normalization_rule_name="nmt_nfkc")
        train_sentencepiece(os.path.join(out, "sp_bpe_large", "tokenizer.model"), lines, model_type="bpe",
                            vocab_size=4000, byte_fallback=True, split_digits=True, allow_whitespace_only_pieces=True,
                            normalization_rule_name="identity", remove_extra_whitespaces=False,
                            character_coverage=0.9995, unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
        return
    lines = corpus(seed=7, lines=6000)
    train_sentencepiece(os.path.join(out, "sp_bpe", "tokenizer.model"), lines, model_type="bpe", vocab_size=1000,
                        byte_fallback=True, split_digits=True, allow_whitespace_only_pieces=True,
                        normalization_rule_name="identity", remove_extra_whitespaces=False,
                        character_coverage=0.9995, unk_id=0, bos_id=1, eos_id=2, pad_id=-1)
    # The model records the rule file's path as given: a relative name in a scratch directory keeps it the same.
    home = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch:
        os.chdir(scratch)
        try:
            write_rules("t5_like_rules.tsv")
            train_sentencepiece(os.path.join(out, "sp_unigram", "tokenizer.model"), lines, model_type="unigram",
                                vocab_size=800, pad_id=0, eos_id=1, unk_id=2, bos_id=-1, character_coverage=0.9995,
                                normalization_rule_tsv="t5_like_rules.tsv")
        finally:
            os.chdir(home)
    write_byte_level_bpe(out, lines, vocab_size=1000, with_extra_token=True)


if __name__ == "__main__":
    main()
