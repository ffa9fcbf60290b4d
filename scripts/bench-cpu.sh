#!/usr/bin/env bash
# The CPU backend's speed table (docs/performance.md, "CPU backend"): makes Llama-shaped synthetic models, writes
# them as GGUF files of each type with strata-cli quantize, runs strata-cli bench on each and prints one table
# (prefill tokens/s and matrix GFLOP/s, decode tokens/s, weight GB/s of decode, the machine's streaming read in
# the same run and the fraction decode reaches, the kernels used).
# Usage: scripts/bench-cpu.sh [--cli PATH]... [--llama-cpp] [--dir DIR] [--shapes "1b 8b"] [--rounds R]
#                             [--llama-cpp-variant NAME] [--types "F16 Q8_0 Q4_K_M"] [--prompt N] [--gen M]
#                             [--json-dir DIR]
#                             [-- extra strata-cli bench options]
# --cli may be given several times (a "before" and an "after" build). Each file is run in --rounds rounds
# (default 3): every strata-cli in turn, then llama.cpp, one run each, so the runs of one file see the same
# minutes; the tables give each engine's median over the rounds (and every round's decode figure), because on a
# shared or virtual machine single runs swing by 20% or more from minute to minute.
# Files are made once and kept in DIR (default /tmp/strata-bench-cpu; the 8B shape needs ~16 GB bf16 plus its
# GGUFs), and flushed to disk (sync) before they are run. Extra options after -- go to every bench run
# (--exact, --threads N, --cpu-isa NAME).
# --llama-cpp: llama.cpp side by side (scripts/llama-cpp/fetch: its prebuilt CPU backend and a llama-bench-style
# harness). The F16 file is written by strata-cli quantize; every block type is then written by llama.cpp's own
# quantizer from that F16 file (llama-SHAPE-TYPE.llama.gguf), and each round runs it with every strata-cli and
# then with llama.cpp (2 threads, pp = one batch of --prompt tokens into an empty cache, tg = --gen single-token
# steps, after a warm-up: one measurement each, as strata-cli bench makes). A second table gives
# Strata / llama.cpp from the medians. --llama-cpp-variant haswell runs llama.cpp's AVX2 build only (pair it with
# -- --cpu-isa avx2 to compare the AVX2 kernels on an AVX-512 machine); by default ggml picks the best.
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
clis=()
dir=/tmp/strata-bench-cpu
shapes="1b"
types="F16 Q8_0 Q4_K_M"
prompt=64
gen=32
json_dir=""
rounds=3
llama_cpp=""
llama_variant=()
tokenizer="${STRATA_CACHE_DIR:-$HOME/.cache/strata}/tokenizer/tokenizer.json"
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --cli) clis+=("$2"); shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --shapes) shapes="$2"; shift 2 ;;
    --types) types="$2"; shift 2 ;;
    --prompt) prompt="$2"; shift 2 ;;
    --gen) gen="$2"; shift 2 ;;
    --json-dir) json_dir="$2"; shift 2 ;;
    --rounds) rounds="$2"; shift 2 ;;
    --llama-cpp) llama_cpp=1; shift ;;
    --llama-cpp-variant) llama_variant=(--cpu-variant "$2"); shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "bench-cpu: unknown option $1" >&2; exit 2 ;;
  esac
done
[ ${#clis[@]} -gt 0 ] || clis=("$here/build/app/strata-cli")
for c in "${clis[@]}"; do [ -x "$c" ] || { echo "bench-cpu: no strata-cli at $c (build it, or pass --cli)" >&2; exit 1; }; done
cli="${clis[0]}"  # makes and quantizes the files
mkdir -p "$dir"
[ -n "$json_dir" ] && mkdir -p "$json_dir"
[ -z "$llama_cpp" ] || llama_cpp="$("$here/scripts/llama-cpp/fetch")"

echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
echo "cpu flags: $(grep -m1 '^flags' /proc/cpuinfo | tr ' ' '\n' | grep -E '^(avx|avx2|fma|f16c|avx512f|avx512bw|avx512vl|avx512_vnni|avx_vnni|avx512_bf16)$' | tr '\n' ' ')"
echo "kernel: $(uname -r); transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
echo "load before: $(uptime | sed 's/.*load average/load average/')"
echo "bench options: --prompt $prompt --gen $gen ${extra[*]:-}"
echo

rows=()
ratios=()
for shape in $shapes; do
  src="$dir/llama-$shape"
  if [ ! -f "$src/config.json" ]; then
    echo "bench-cpu: making $src" >&2
    "$cli" make-synthetic --shape "$shape" --out "$src" --tokenizer "$tokenizer" >/dev/null
  fi
  for type in $types; do
    file="$dir/llama-$shape-$type.gguf"
    if [ -n "$llama_cpp" ] && [ "$type" != F16 ]; then file="$dir/llama-$shape-$type.llama.gguf"; fi
    if [ ! -f "$file" ]; then
      echo "bench-cpu: quantizing $file" >&2
      if [ -n "$llama_cpp" ] && [ "$type" != F16 ]; then
        f16="$dir/llama-$shape-F16.gguf"
        [ -f "$f16" ] || "$cli" quantize --model "$src" --type F16 --out "$f16" >/dev/null 2>&1
        "$llama_cpp" quantize "$f16" "$file.tmp" "$type" >/dev/null 2>&1 && mv "$file.tmp" "$file"
      else
        "$cli" quantize --model "$src" --type "$type" --out "$file" >/dev/null 2>&1
      fi
    fi
    sync  # a file just written is still being flushed to disk: that must not overlap the first run
    # A mapped file's speed depends on its page cache: a kernel with large folios (ext4 on recent kernels, not
    # Debian 12's 6.1) maps a file that was read ahead in 2 MiB pages, but one just written stays in 4 KiB pages
    # (decode from the mapping about 3x slower on the Zen 5 VM of docs/performance.md).
    cache="$(grep -E '^(Cached|FileHugePages|FilePmdMapped):' /proc/meminfo | tr -s ' ' | tr '\n' ' ')"
    echo "page cache before $(basename "$file"): $cache"
    # Rounds: each strata-cli, then llama.cpp, one run each (llama.cpp --repeats 1: one pp and one tg, as
    # strata-cli bench measures), --rounds times over; the tables give each engine's median over the rounds.
    labels=()
    for bench_cli in "${clis[@]}"; do labels+=("$(basename "$(dirname "$(dirname "$bench_cli")")")"); done  # build folders
    runs="$(mktemp -d)"
    for round in $(seq "$rounds"); do
      for i in "${!clis[@]}"; do
        "${clis[$i]}" bench --model "$file" --prompt "$prompt" --gen "$gen" "${extra[@]}" >"$runs/strata-$i-$round.json"
        [ -n "$json_dir" ] && cp "$runs/strata-$i-$round.json" "$json_dir/$shape-$type-${labels[$i]}-$round.json"
      done
      if [ -n "$llama_cpp" ]; then
        "$llama_cpp" "$file" --prompt "$prompt" --gen "$gen" --threads 2 --repeats 1 "${llama_variant[@]}" \
          >"$runs/llama-$round.json"
        [ -n "$json_dir" ] && cp "$runs/llama-$round.json" "$json_dir/$shape-$type-llama.cpp-$round.json"
      fi
    done
    out="$(python3 - "$shape" "$type" "$runs" "$rounds" "${labels[@]}" <<'PY'
import json, statistics, sys
shape, type_, runs, rounds, labels = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5:]
def load(name):
    try:
        return json.load(open(f"{runs}/{name}"))
    except FileNotFoundError:
        return None
med = statistics.median
rows, strata = [], []
for i, label in enumerate(labels):
    js = [load(f"strata-{i}-{r}.json") for r in range(1, rounds + 1)]
    pp = med(j["prefill"]["tokens_per_second"] for j in js)
    gf = med(j["prefill"].get("matmul_gflop_per_second", 0) for j in js)
    tg = med(j["decode"]["tokens_per_second"] for j in js)
    bw = med(j["machine_bandwidth"]["gb_per_s"] for j in js)
    wb = js[0]["decode"]["weight_bytes_per_token"]
    k = js[0]["model"]["backend"].get("kernels", "") or "(before kernels were reported)"
    runs_tg = ", ".join("%.2f" % j["decode"]["tokens_per_second"] for j in js)
    rows.append("| %s %s | %s | %.1f | %.1f | %.2f (%s) | %.2f | %.2f | %.2f | %s |" % (
        shape, type_, label, pp, gf, tg, runs_tg, wb * tg / 1e9, bw, wb * tg / 1e9 / bw, k))
    strata.append((label, pp, gf, tg, bw, wb))
ls = [load(f"llama-{r}.json") for r in range(1, rounds + 1)]
if ls[0]:
    pp = med(l["prefill"]["tokens_per_second"] for l in ls)
    tg = med(l["decode"]["tokens_per_second"] for l in ls)
    _, spp, sgf, stg, bw, wb = strata[0]  # GFLOP/s and weight GB/s from Strata's count of the same file's work
    runs_tg = ", ".join("%.2f" % l["decode"]["tokens_per_second"] for l in ls)
    rows.append("| %s %s | llama.cpp (%s) | %.1f | %.1f | %.2f (%s) | %.2f | %.2f | %.2f | |" % (
        shape, type_, ls[0]["cpu_backend"], pp, sgf / spp * pp if spp else 0, tg, runs_tg, wb * tg / 1e9, bw,
        wb * tg / 1e9 / bw))
    for label, spp, _, stg, _, _ in strata:
        rows.append("RATIO| %s %s | %s | %.2f | %.2f |" % (shape, type_, label, spp / pp, stg / tg))
print("\n".join(rows))
PY
)"
    rm -rf "$runs"
    while IFS= read -r line; do
      case "$line" in RATIO*) ratios+=("${line#RATIO}") ;; *) rows+=("$line"); echo "$line" ;; esac
    done <<<"$out"
  done
done
echo
echo "| file | build | prefill t/s | prefill GFLOP/s | decode t/s (rounds) | decode weight GB/s | machine read GB/s | fraction | kernels |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
echo
if [ ${#ratios[@]} -gt 0 ]; then
  echo "| file | build | Strata / llama.cpp pp$prompt | Strata / llama.cpp tg$gen |"
  echo "| --- | --- | --- | --- |"
  printf '%s\n' "${ratios[@]}"
  echo
fi
echo "load after: $(uptime | sed 's/.*load average/load average/')"
