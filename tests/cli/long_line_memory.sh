#!/usr/bin/env bash
# long_line_memory.sh BINARY TOKENIZER
# An 8 MB one-line .txt (one document, 5.4 million tokens) tokenized through data= with a SentencePiece tokenizer:
# the run's peak RSS exceeds that of the same run on a 2 KB line by less than 250 MiB. Encoded in 1 MiB chunks
# (text/chunks.hpp) it exceeds it by about 145 MiB: the line, its ids (43 MB as int64, up to twice that while the
# vector grows), their uint16 copy and one chunk's working memory. Encoded whole, libsentencepiece held a record of
# every piece of the line at once: about 1,040 MiB more.
set -u
binary=$1 tokenizer=$2
bound_mib=250
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cd "$work" || exit 1
seq 1 2000000 | sed 's/$/ the quick brown fox, café 東京 e4 e5 3.14/' | tr '\n' ' ' | head -c 8000000 > long.txt
echo >> long.txt
head -c 2000 long.txt > short.txt
echo >> short.txt
# The peak RSS of a run, in KiB (python3's getrusage: /usr/bin/time is not everywhere).
peak_kib() {
  python3 -c 'import resource, subprocess, sys
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)' \
    "$binary" data="$1" tokenizer="$tokenizer" batch_size=2 seq_len=16 max_steps=1 threads=1 predict=false
}
short=$(peak_kib short.txt) || { echo "FAIL: the run on short.txt failed"; exit 1; }
long=$(peak_kib long.txt) || { echo "FAIL: the run on long.txt failed"; exit 1; }
extra=$(((long - short) / 1024))
echo "peak RSS: $short KiB with a 2 KB line, $long KiB with an 8 MB line: $extra MiB more (bound $bound_mib MiB)"
[ "$extra" -lt "$bound_mib" ] || { echo "FAIL: the 8 MB line took $extra MiB more"; exit 1; }
echo PASS
