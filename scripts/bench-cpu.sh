#!/usr/bin/env bash
# The CPU backend's speed table (docs/performance.md, "CPU backend"): makes Llama-shaped synthetic models, writes
# them as GGUF files of each type with strata-cli quantize, runs strata-cli bench on each and prints one table
# (prefill tokens/s and matrix GFLOP/s, decode tokens/s, weight GB/s of decode, the machine's streaming read in
# the same run and the fraction decode reaches, the kernels used).
# Usage: scripts/bench-cpu.sh [--cli PATH]... [--llama-cpp] [--dir DIR] [--shapes "1b 8b"]
#                             [--llama-cpp-variant NAME] [--types "F16 Q8_0 Q4_K_M"] [--prompt N] [--gen M]
#                             [--json-dir DIR]
#                             [-- extra strata-cli bench options]
# --cli may be given several times (a "before" and an "after" build): each file is then benched with each binary
# in turn, so that the runs of one file see the same load on a shared machine.
# Files are made once and kept in DIR (default /tmp/strata-bench-cpu; the 8B shape needs ~16 GB bf16 plus its
# GGUFs). Extra options after -- go to every bench run (--exact, --threads N, --repeats R).
# --llama-cpp: llama.cpp side by side (scripts/llama-cpp/fetch: its prebuilt CPU backend and a llama-bench-style
# harness). The F16 file is written by strata-cli quantize; every block type is then written by llama.cpp's own
# quantizer from that F16 file (llama-SHAPE-TYPE.llama.gguf), and each file is run by every strata-cli and then by
# llama.cpp (2 threads, pp = one batch of --prompt tokens, tg = --gen single-token steps, the best of 5 repeats
# after a warm-up, as strata-cli bench counts), so the runs of one file see the same load. A second table gives
# Strata / llama.cpp. --llama-cpp-variant haswell runs llama.cpp's AVX2 build only (pair it with
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
    for bench_cli in "${clis[@]}"; do
      label="$(basename "$(dirname "$(dirname "$bench_cli")")")"  # the build folder
      json="$("$bench_cli" bench --model "$file" --prompt "$prompt" --gen "$gen" "${extra[@]}")"
      [ -n "$json_dir" ] && echo "$json" >"$json_dir/$shape-$type-$label.json"
      rows+=("$(python3 -c '
import json, sys
j = json.loads(sys.stdin.read())
p, d, m = j["prefill"], j["decode"], j["machine_bandwidth"]
k = j["model"]["backend"].get("kernels", "") or "(before kernels were reported)"
print("| %s %s | %s | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | %s |" % (sys.argv[1], sys.argv[2], sys.argv[3],
      p["tokens_per_second"], p.get("matmul_gflop_per_second", 0), d["tokens_per_second"],
      d["effective_weight_gb_per_s"], m["gb_per_s"], j["decode_bandwidth_fraction"], k))' "$shape" "$type" "$label" <<<"$json")")
      echo "${rows[-1]}"
      last_json="$json"
    done
    if [ -n "$llama_cpp" ]; then
      ljson="$("$llama_cpp" "$file" --prompt "$prompt" --gen "$gen" --threads 2 --repeats 5 "${llama_variant[@]}")"
      [ -n "$json_dir" ] && echo "$ljson" >"$json_dir/$shape-$type-llama.cpp.json"
      # Weight GB/s and GFLOP/s from Strata's count of the same file's bytes and products per token.
      both="$(python3 -c '
import json, sys
l, s = json.loads(sys.argv[3]), json.loads(sys.argv[4])
p, d, m = l["prefill"], l["decode"], s["machine_bandwidth"]
p["tokens_per_second"], d["tokens_per_second"] = p["max"], d["max"]  # the best repeat, as strata-cli bench reports
sp = s["prefill"]
flop = sp.get("matmul_gflop_per_second", 0) / sp["tokens_per_second"] if sp["tokens_per_second"] else 0
gbs = s["decode"]["weight_bytes_per_token"] * d["tokens_per_second"] / 1e9
print("| %s %s | llama.cpp (%s) | %.1f | %.1f | %.2f | %.2f | %.2f | %.2f | |" % (sys.argv[1], sys.argv[2],
      l["cpu_backend"], p["tokens_per_second"], flop * p["tokens_per_second"], d["tokens_per_second"], gbs,
      m["gb_per_s"], gbs / m["gb_per_s"]))
print("| %s %s | %.2f | %.2f |" % (sys.argv[1], sys.argv[2], sp["tokens_per_second"] / p["tokens_per_second"],
      s["decode"]["tokens_per_second"] / d["tokens_per_second"]))' "$shape" "$type" "$ljson" "$last_json")"
      rows+=("$(head -1 <<<"$both")")
      ratios+=("$(tail -1 <<<"$both")")
      echo "${rows[-1]}"
    fi
  done
done
echo
echo "| file | build | prefill t/s | prefill GFLOP/s | decode t/s | decode weight GB/s | machine read GB/s | fraction | kernels |"
echo "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
printf '%s\n' "${rows[@]}"
echo
if [ ${#ratios[@]} -gt 0 ]; then
  echo "| file | Strata / llama.cpp pp$prompt | Strata / llama.cpp tg$gen |"
  echo "| --- | --- | --- |"
  printf '%s\n' "${ratios[@]}"
  echo
fi
echo "load after: $(uptime | sed 's/.*load average/load average/')"
