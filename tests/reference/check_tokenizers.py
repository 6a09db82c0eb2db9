#!/usr/bin/env python3
"""tessera's tokenizers (text/tokenizer.hpp) against the Python packages, byte for byte, on a few thousand strings
generated here (seeded): English and code, chess PGN, whitespace runs (tabs, newlines, CR LF, no-break and
ideographic spaces), digits, punctuation, accented Latin, Greek, Cyrillic, Arabic, Devanagari, CJK, emoji (ZWJ
sequences, skin tones, flags), combining marks, contractions ('s 't 're ...), leading and trailing spaces, the empty
string, special-token strings inside text (<s>, </s>, <pad>, <|sep|>), random code points from every plane, and
invalid UTF-8 given as bytes.

The references:
  a SentencePiece model (a directory with tokenizer.model, or the file)
      sentencepiece.SentencePieceProcessor(model_file=...).encode(text) and .decode(ids); invalid UTF-8 is passed
      as bytes, which sentencepiece takes.
  tokenizer.json (a directory with one, or the file)
      tokenizers.Tokenizer.from_file(path).encode(text, add_special_tokens=False).ids and .decode(ids); for
      invalid UTF-8 tessera must refuse (tokenizers takes str only).
  vocab.json + merges.txt (a directory without tokenizer.json)
      transformers' GPT2Tokenizer.from_pretrained(dir) (what AutoTokenizer loads for OPT: the config files' special
      tokens split out, add_prefix_space from tokenizer_config.json), .encode(text, add_special_tokens=False); decode
      through its tokenizers backend.
Checked for every string: the ids, and decode(ids) (special tokens skipped). Checked once per tokenizer: vocab_size
(SentencePiece: pieces; otherwise one more than the largest id) and the bos, eos and pad ids (transformers'
AutoTokenizer where config files are present, else the SentencePiece model's own).

Besides the given tokenizers, derived tokenizer.json files are checked when --variants is given: the first
tokenizer.json with add_prefix_space, with use_regex false, with ignore_merges, and with added tokens that are
single_word, lstrip, rstrip, normalized, special or not, and one whose content is not byte-level text.

--long BYTES checks long texts instead, of about BYTES bytes each, built from those strings: joined by single spaces
(one line), by mixed whitespace and newlines, wrapped in spaces, with special-token strings between them, a CJK text
without a space, and one with invalid UTF-8 bytes. tessera encodes them in chunks (tokenize_dump --chunk-bytes 1, at
every cut, and --chunk-bytes 4096), the reference encodes each whole.

usage: check_tokenizers.py TOKENIZE_DUMP TOKENIZER... [--variants] [--count N | --long BYTES]
                           [--perturb --expect-mismatch]
--perturb hands the comparison one wrong expected id (the first id of the first non-empty string of the first
tokenizer, plus one): a negative control, which must then see a mismatch. Exit 0 when every check passes, 1 when
one fails, 2 when tokenize_dump or a reference did not run. With --expect-mismatch exit 0 only when the tool ran
and the comparison failed.
"""
import argparse
import json
import os
import random
import subprocess
import sys
import tempfile
import warnings

warnings.filterwarnings("ignore")
import sentencepiece as spm  # noqa: E402
from tokenizers import Tokenizer  # noqa: E402

WORDS = ("the quick brown fox jumps over lazy dog model training loss gradient batch learning rate tokenizer "
         "memory shard optimizer state checkpoint precision bfloat16 attention layer norm weights bias Paris "
         "London naive implementation returns None while True else elif import torch numpy").split()
SCRIPTS = ["café", "naïve", "Straße", "Ångström", "façade", "jalapeño", "Ελληνικά", "Привет мир", "مرحبا بالعالم",
           "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก", "你好，世界", "東京都", "こんにちは世界", "カタカナ", "한국어 텍스트",
           "ǅungla", "ﬁnance", "ＡＢＣ１２３", "①②③", "Ⅻ", "½ ¾", "x² + y³", "٣٤٥", "१२३"]
EMOJI = ["🙂", "🚀", "👍🏽", "🇫🇷", "🇯🇵", "👨\u200d👩\u200d👧\u200d👦", "❤️", "1️⃣", "🏳️\u200d🌈", "🤖🤖🤖", "✨"]
COMBINING = ["e\u0301", "a\u0308\u0304", "n\u0303", "\u0301", " \u0301", "o\u0302\u0323\u0300", "क\u094d\u0937",
             "Z\u0351\u036b\u0343\u036a\u0302", "\u200d", "a\u200bb", "\ufe0f"]
SPACES = [" ", "  ", "   ", "\t", "\t\t", "\n", "\n\n", "\r\n", " \n ", "\u00a0", "\u3000", "\u2003", "\x0b", "\x0c",
          "\x85", "\u2028", "\u1680", "\u202f", " \t\n"]
SPECIALS = ["<s>", "</s>", "<pad>", "<unk>", "<|sep|>", "<|endoftext|>", "</s", "<s >", "<<s>>", "</s></s>"]
PUNCT = ["!", "?", "...", "!!!???", "---", "***", "\"quoted\"", "(parens)", "[x]", "{y}", "@#$%^&*", "«»", "—", "’",
         "''", "``", ";;", "::", "->", "=>", "/**/", "#!", "\\n", "~~"]
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "'S", "'LL", "''s", "’s", "'", "rock'n'roll", "it's",
                "don't", "we're", "I've", "I'm", "you'll", "he'd", "o'clock", "'tis"]
CODE = ["def f(x):\n    return x * 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}", "if x>=3:\n\t\tpass",
        "#include <vector>\nint main() { return 0; }", "    self.weight = nn.Parameter(torch.zeros(4, 8))",
        "x = [1, 2, 3]  # comment", "SELECT * FROM t WHERE id = 42;", "{\"key\": [1.5e-3, null, true]}",
        "a_b_c = __init__(self, *args, **kwargs)", "std::vector<std::int64_t> ids{1, 2};"]


def pgn(rng):
    moves = []
    for number in range(1, rng.randint(2, 10)):
        pair = []
        for _ in range(2):
            square = rng.choice("abcdefgh") + rng.choice("12345678")
            pair.append(rng.choice(["", "N", "B", "R", "Q", "K"]) + rng.choice(["", "x"]) + square +
                        rng.choice(["", "", "+", "#", "!?"]))
        moves.append(f"{number}. {pair[0]} {pair[1]}")
    return " ".join(moves) + rng.choice(["", " 1-0", " 0-1", " 1/2-1/2", " *"])


def number(rng):
    return rng.choice([str(rng.randint(0, 10 ** rng.randint(1, 15))), f"{rng.uniform(-1e4, 1e4):.{rng.randint(0, 6)}f}",
                       f"{rng.randint(1, 999):,}", f"{rng.randint(1900, 2099)}-0{rng.randint(1, 9)}-{rng.randint(10, 28)}",
                       f"+1 ({rng.randint(200, 999)}) {rng.randint(100, 999)}-{rng.randint(1000, 9999)}",
                       f"{rng.random():.3e}", "0x" + "".join(rng.choice("0123456789abcdef") for _ in range(8))])


def random_code_point(rng):
    while True:
        plane = rng.choice([0, 0, 0, 0, 1, 2, 3, 14, 15, 16])
        cp = plane * 0x10000 + rng.randrange(0x10000) if plane else rng.randrange(0x10000)
        if not 0xD800 <= cp <= 0xDFFF:
            return chr(cp)


def fragment(rng):
    kind = rng.randrange(12)
    if kind == 0:
        return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 8)))
    if kind == 1:
        return rng.choice(SCRIPTS)
    if kind == 2:
        return rng.choice(EMOJI)
    if kind == 3:
        return rng.choice(COMBINING)
    if kind == 4:
        return rng.choice(SPACES)
    if kind == 5:
        return rng.choice(SPECIALS)
    if kind == 6:
        return rng.choice(PUNCT)
    if kind == 7:
        return rng.choice(CONTRACTIONS)
    if kind == 8:
        return number(rng)
    if kind == 9:
        return pgn(rng)
    if kind == 10:
        return rng.choice(CODE)
    return "".join(random_code_point(rng) for _ in range(rng.randint(1, 4)))


def strings(count, seed=2024):
    """The texts, deterministic: the lists' items alone, in pairs, and `count` random mixes."""
    rng = random.Random(seed)
    out = ["", " ", "a", "  leading", "trailing  ", " both ", "\n", "\x00", "a\x00b", "\x7f"]
    for group in (WORDS, SCRIPTS, EMOJI, COMBINING, SPACES, SPECIALS, PUNCT, CONTRACTIONS, CODE):
        out += list(group)
    for space in SPACES:
        for word in ("word", "1", "!", "é", "</s>", "'s"):
            out += [space + word, word + space, word + space + word]
    for special in SPECIALS:
        out += [f"x{special}y", f"x {special} y", f"{special}word", f"word{special}", f" {special}", f"{special} "]
    for c in CONTRACTIONS:
        out += [f"word{c}", f"word {c} more", f"WORD{c.upper()}"]
    out += [pgn(rng) for _ in range(60)] + [number(rng) for _ in range(60)]
    out += ["".join(random_code_point(rng) for _ in range(rng.randint(1, 12))) for _ in range(200)]
    while len(out) < count:
        sep = rng.choice(["", " ", " ", "", "\n", "  "])
        text = sep.join(fragment(rng) for _ in range(rng.randint(1, 6)))
        if rng.random() < 0.15:
            text = rng.choice(SPACES) + text + rng.choice(SPACES)
        out.append(text)
    return out


INVALID_UTF8 = [b"\xff", b"a\x80b", b"\xe2\x82", b"\xe2\x82 x", b"\xc0\xaf", b"\xed\xa0\x80", b"\xf4\x90\x80\x80",
                b"\xf0\x9f\x99", b"ok \xfe\xfe ok", b"caf\xe9", b"\xc3\x28", b"\xa0\xa1", b"\xf8\x88\x80\x80\x80",
                b"x\xe0\x80\xafy", b"\xef\xbf\xbd\xff", b"</s>\xff<s>"]


def long_texts(size, seed=11):
    """One-line texts of about `size` bytes (newlines inside the strings become spaces, but for the mixed one)."""
    rng = random.Random(seed)
    pool = strings(3000)

    def build(join, keep_newlines=False):
        parts, n = [], 0
        while n < size:
            text = rng.choice(pool)
            text = text if keep_newlines else text.replace("\r", " ").replace("\n", " ")
            parts.append(text)
            n += len(text.encode("utf-8")) + 1
        return join(parts)

    cjk = [t for t in SCRIPTS if " " not in t and not t.isascii()]
    out = [build(" ".join),
           build(lambda parts: "".join(p + rng.choice([" ", " ", " ", "  ", "\t", "\n", " \n ", "\u00a0", ""])
                                       for p in parts), keep_newlines=True),
           "  " + build(" ".join) + " ",
           build(lambda parts: " ".join(p + rng.choice(SPECIALS) for p in parts)),
           "".join(rng.choice(cjk) for _ in range(size // 12))]
    invalid = bytearray(build(" ".join).encode("utf-8"))
    for _ in range(50):
        invalid[rng.randrange(len(invalid))] = rng.choice([0xFF, 0x80, 0xE2, 0xC3])
    return out + [bytes(invalid)]


def remembered(encode):
    known = {}

    def once(text):
        if text not in known:
            known[text] = list(encode(text))
        return known[text]
    return once


def shown(text):
    """A string for a message: long ones cut to their start and length."""
    return repr(text) if len(text) <= 120 else f"{text[:60]!r}... ({len(text)} characters)"


def id_difference(got, want):
    if len(got) + len(want) <= 60:
        return f"tessera {got}, reference {want}"
    at = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
    return (f"{len(got)} and {len(want)} ids, first different at {at}: tessera {got[at:at + 8]}, "
            f"reference {want[at:at + 8]}")


def byte_level(json_file):
    with open(json_file, encoding="utf-8") as f:
        root = json.load(f)
    return (root.get("model") or {}).get("type", "BPE") == "BPE" and \
        (root.get("pre_tokenizer") or {}).get("type") == "ByteLevel"


def resolve(path):
    """(format, file, directory) as tessera's Tokenizer::load chooses them."""
    if os.path.isdir(path):
        json_file, model = os.path.join(path, "tokenizer.json"), os.path.join(path, "tokenizer.model")
        if os.path.exists(json_file) and (not os.path.exists(model) or byte_level(json_file)):
            return "json", json_file, path
        if os.path.exists(model):
            return "sentencepiece", model, path
        return "vocab_merges", path, path
    directory = os.path.dirname(path)
    if os.path.basename(path) in ("vocab.json", "merges.txt"):
        return "vocab_merges", directory, directory
    return ("sentencepiece" if path.endswith(".model") else "json"), path, directory


class Reference:
    """Encode, decode and the special ids of one tokenizer as the Python packages give them."""

    def __init__(self, path):
        self.format, file, directory = resolve(os.path.abspath(path))
        self.accepts_bytes = self.format == "sentencepiece"
        if self.format == "sentencepiece":
            sp = spm.SentencePieceProcessor(model_file=file)
            self.kind = "sentencepiece"
            self.encode, self.decode = sp.encode, sp.decode
            self.vocab_size = sp.vocab_size()
            self.special = {key: (value if value >= 0 else None) for key, value in
                            (("bos_id", sp.bos_id()), ("eos_id", sp.eos_id()), ("pad_id", sp.pad_id()))}
        elif self.format == "json":
            tok = Tokenizer.from_file(file)
            self.kind = "byte-level-bpe"
            self.encode = lambda text: tok.encode(text, add_special_tokens=False).ids
            self.decode = tok.decode
            self.vocab_size = max(tok.get_vocab(with_added_tokens=True).values()) + 1
            self.special = {"bos_id": None, "eos_id": None, "pad_id": None}
        else:
            from transformers import GPT2Tokenizer
            tok = GPT2Tokenizer.from_pretrained(directory)
            backend = tok.backend_tokenizer
            self.kind = "byte-level-bpe"
            self.encode = lambda text: tok.encode(text, add_special_tokens=False)
            self.decode = backend.decode
            self.vocab_size = max(backend.get_vocab(with_added_tokens=True).values()) + 1
            self.special = {"bos_id": tok.bos_token_id, "eos_id": tok.eos_token_id, "pad_id": tok.pad_token_id}
        # The config files name the special tokens: transformers' reading of them is the reference.
        if os.path.exists(os.path.join(directory, "tokenizer_config.json")):
            from transformers import AutoTokenizer
            auto = AutoTokenizer.from_pretrained(directory)
            self.special = {"bos_id": auto.bos_token_id, "eos_id": auto.eos_token_id, "pad_id": auto.pad_token_id}


def run_dump(dump, tokenizer, inputs, work, chunk_bytes=None):
    in_path, out_path = os.path.join(work, "in.jsonl"), os.path.join(work, "out.jsonl")
    with open(in_path, "w", encoding="utf-8") as f:
        for item in inputs:
            row = {"hex": item.hex()} if isinstance(item, bytes) else {"text": item}
            f.write(json.dumps(row, ensure_ascii=True) + "\n")
    chunks = [] if chunk_bytes is None else ["--chunk-bytes", str(chunk_bytes)]
    proc = subprocess.run([dump, *chunks, tokenizer, in_path, out_path], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"tokenize_dump {tokenizer} failed ({proc.returncode}): {proc.stderr.strip()}")
    with open(out_path, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f]
    return rows[0], rows[1:]


def check(name, ref, header, rows, inputs, perturb):
    mismatches = []
    for key in ("bos_id", "eos_id", "pad_id"):
        if header[key] != ref.special[key]:
            mismatches.append(f"{key}: tessera {header[key]}, reference {ref.special[key]}")
    if header["kind"] != ref.kind:
        mismatches.append(f"kind: tessera {header['kind']}, reference {ref.kind}")
    if header["vocab_size"] != ref.vocab_size:
        mismatches.append(f"vocab_size: tessera {header['vocab_size']}, reference {ref.vocab_size}")
    if len(rows) != len(inputs):
        mismatches.append(f"tessera wrote {len(rows)} rows for {len(inputs)} inputs")
    for text, row in zip(inputs, rows):
        if isinstance(text, bytes) and not ref.accepts_bytes:
            if "error" not in row or "not valid UTF-8" not in row["error"]:
                mismatches.append(f"{shown(text)}: tessera gave {shown(str(row))}, but must refuse invalid UTF-8")
            continue
        if "error" in row:
            mismatches.append(f"{shown(text)}: tessera refused it: {row['error']}")
            continue
        want = list(ref.encode(text))
        if perturb and want:
            want[0] += 1
            perturb = False
        if row["ids"] != want:
            mismatches.append(f"{shown(text)}: ids {id_difference(row['ids'], want)}")
            continue
        want_text = ref.decode(want)
        if row["decoded"] != want_text:
            mismatches.append(f"{shown(text)}: decode tessera {shown(row['decoded'])}, reference {shown(want_text)}")
    print(f"{name}: {len(inputs)} strings ({sum(isinstance(t, bytes) for t in inputs)} of them invalid UTF-8), "
          f"{len(mismatches)} mismatches; fingerprint {header['fingerprint']}")
    for line in mismatches[:8]:
        print("  " + line)
    return not mismatches


def variants(json_file, work):
    """Derived tokenizer.json files that exercise the options the fixtures leave at their defaults."""
    with open(json_file, encoding="utf-8") as f:
        base = json.load(f)
    top = max(max(base["model"]["vocab"].values()), max((t["id"] for t in base["added_tokens"]), default=0))

    def added(content, offset, **flags):
        token = {"id": top + offset, "content": content, "single_word": False, "lstrip": False, "rstrip": False,
                 "normalized": False, "special": False}
        token.update(flags)
        return token

    out = {}
    for name, change in (
        ("add_prefix_space", lambda t: t["pre_tokenizer"].update(add_prefix_space=True)),
        ("no_regex", lambda t: t["pre_tokenizer"].update(use_regex=False)),
        ("ignore_merges", lambda t: t["model"].update(ignore_merges=True)),
        ("added_flags", lambda t: t["added_tokens"].extend([
            added("<mask>", 1, lstrip=True, special=True),
            added("[R]", 2, rstrip=True),
            added("the", 3, single_word=True),
            added("ing", 4, single_word=True, normalized=True),
            added("<mask><mask>", 5, special=True),
            added("end of text", 6, special=False),
            added("é!", 7, lstrip=True, rstrip=True),
        ])),
    ):
        t = json.loads(json.dumps(base))
        change(t)
        d = os.path.join(work, "variant_" + name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "tokenizer.json"), "w", encoding="utf-8") as f:
            json.dump(t, f, ensure_ascii=False)
        out[name] = os.path.join(d, "tokenizer.json")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dump")
    ap.add_argument("tokenizers", nargs="+")
    ap.add_argument("--count", type=int, default=3000)
    ap.add_argument("--variants", action="store_true")
    ap.add_argument("--long", type=int, default=0, metavar="BYTES")
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--expect-mismatch", action="store_true")
    a = ap.parse_args()
    texts = strings(a.count)
    special_words = ["<mask>", "[R]", "the", "ing", "<mask><mask>", "end of text", "é!"]
    rng = random.Random(7)
    # The variants' added tokens between words, digits, underscores, accented letters and every kind of space: what
    # single_word, lstrip and rstrip look at.
    glue = ["", " ", "  ", "x", "é", "1", "_", "!", "\n"] + SPACES
    texts += [rng.choice(glue).join([rng.choice(special_words + WORDS[:8] + SPACES) for _ in range(rng.randint(1, 7))])
              for _ in range(400)]
    inputs = long_texts(a.long) if a.long else texts + INVALID_UTF8
    chunk_sizes = [1, 4096] if a.long else [None]
    ok, perturb = True, a.perturb
    with tempfile.TemporaryDirectory() as work:
        targets = [(os.path.basename(os.path.normpath(t)), t) for t in a.tokenizers]
        if a.variants:
            first_json = next((resolve(t)[1] for _, t in targets if resolve(t)[0] == "json"), None)
            if first_json is None:
                print("--variants: no byte-level tokenizer.json among the tokenizers")
                return 2
            targets += [("variant " + name, path) for name, path in variants(first_json, work).items()]
        for name, path in targets:
            try:
                ref = Reference(path)
            except Exception as e:  # noqa: BLE001: any failure to run either side is exit 2
                print(f"{name}: {e}")
                return 2
            ref.encode = remembered(ref.encode)  # once per text, however many chunk sizes
            for chunk_bytes in chunk_sizes:
                label = name if chunk_bytes is None else f"{name}, chunks of {chunk_bytes} bytes"
                try:
                    header, rows = run_dump(a.dump, path, inputs, work, chunk_bytes)
                except Exception as e:  # noqa: BLE001
                    print(f"{label}: {e}")
                    return 2
                ok = check(label, ref, header, rows, inputs, perturb) and ok
                perturb = False
                if a.expect_mismatch and not ok:
                    break  # the control's one wrong id was caught: the rest would only repeat the check
            if a.expect_mismatch and not ok:
                break
    if a.expect_mismatch:
        print("negative control: " + ("mismatch seen, as it must be" if not ok else "NO mismatch seen"))
        return 0 if not ok else 1
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
