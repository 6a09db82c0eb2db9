#!/usr/bin/env bash
# text_data_run.sh BINARY TOKENIZER: a Llama experiment trains two steps on Alpaca-style JSONL records (prompt masked)
# and on a .txt of chess games, each tokenized into a token cache beside the file on the first run and read from it
# on the second (the cache is not rewritten), and a third run with another text in the file writes a new one.
set -eu
bin=$1 tok=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work"
for i in $(seq 1 40); do
  printf '{"instruction": "Repeat the number %d.", "input": "%d", "output": "%d %d %d"}\n' "$i" "$i" "$i" "$i" "$i"
done > a.jsonl
for i in $(seq 1 60); do echo "1. e4 e5 2. Nf3 Nc6 3. Bb5 a6 4. Ba4 Nf6 5. O-O Be7 game $i"; done > games.txt
run() { "$bin" tokenizer="$tok" batch_size=4 max_steps=2 threads=1 "$@"; }
run data=a.jsonl seq_len=192 mask_prompt=true > out1.txt
grep -E -q '^  data +instructions a.jsonl \(40 records, [0-9]+ tokens' out1.txt || { cat out1.txt; exit 1; }
grep -E -q '^  mask_prompt +\| true' out1.txt || { echo "no mask_prompt row"; cat out1.txt; exit 1; }
grep -q '^\[done\]' out1.txt
cache=$(ls a.jsonl.sentencepiece-*.tokens)
stamp=$(stat -c %Y-%i "$cache")
sleep 1
run data=a.jsonl seq_len=192 > out2.txt
[ "$(stat -c %Y-%i "$cache")" = "$stamp" ] || { echo "FAIL: the cache was rewritten"; exit 1; }
run data=games.txt seq_len=32 > out3.txt
grep -E -q '^  data +documents games.txt \(60 records' out3.txt || { cat out3.txt; exit 1; }
grep -q '^\[done\]' out3.txt
echo "1. d4 d5" >> games.txt
run data=games.txt seq_len=32 > out4.txt
grep -E -q '^  data +documents games.txt \(61 records' out4.txt || { cat out4.txt; exit 1; }
[ -z "$(ls | grep partial || true)" ] || { echo "FAIL: partial files left"; ls; exit 1; }
echo PASS
