#!/usr/bin/env bash
# Strata's Vulkan backend on a machine with a real GPU, in one go: build (Release, Ninja, no UI), the Vulkan
# tests, a Llama-3-8B-shaped synthetic bf16 model, `strata-cli bench --backend vulkan` on it, and what bench
# does not measure (GPU time per step, host time recording a step, the default trace's cost, matvec shapes,
# GPU time per kernel, Vulkan against CPU on the same model). Results land in $OUT (default ./gpu-bench-out).
#
#   scripts/gpu-bench.sh [PHASE ...]     phases: info build model tests bench extra quant (default: all, in
#                                        order; model runs in the background while the tests run; quant writes
#                                        and benches quantized GGUF files of the 8B shape)
#   scripts/gpu-bench.sh --bundle DIR    run on a Debian 12 machine that builds Strata: copies what a bare GPU
#                                        machine may lack (Vulkan headers + loader, glslc, glm, PCRE2 headers,
#                                        Catch2 2, nlohmann_json, the validation layer, the tokenizer) into DIR
#
# A bundle at $STRATA_GPU_DEPS (default: build-gpudeps/ in the checkout, which git ignores) is used when present;
# without one the machine's own packages must do. Every phase runs under a time limit and records its exit
# status in $OUT/phases.txt, so one failure does not hide the rest.
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"

# ------------------------------------------------------------------------------------------------ bundle
if [ "${1:-}" = "--bundle" ]; then
  dest="${2:?usage: scripts/gpu-bench.sh --bundle DIR}"
  set -e
  rm -rf "$dest"
  mkdir -p "$dest"/{bin,lib/pkgconfig,lib/cmake,share/cmake,include,layers}
  arch=x86_64-linux-gnu
  cp -r /usr/include/vulkan /usr/include/vk_video "$dest/include/"
  rm -f "$dest"/include/vulkan/*.hpp  # the C++ bindings are 10 MB Strata does not use
  cp /usr/lib/$arch/libvulkan.so.1 "$dest/lib/" && ln -s libvulkan.so.1 "$dest/lib/libvulkan.so"
  cp /usr/bin/glslc "$dest/bin/" && cp /usr/lib/$arch/libshaderc.so.1 "$dest/lib/"
  cp -r /usr/include/glm "$dest/include/" && cp -r /usr/share/cmake/glm "$dest/share/cmake/"
  cp -r /usr/include/nlohmann "$dest/include/" && cp -r /usr/share/cmake/nlohmann_json "$dest/share/cmake/"
  cp /usr/include/pcre2.h "$dest/include/"
  cp "$(readlink -f /usr/lib/$arch/libpcre2-8.so)" "$dest/lib/" && ln -s "$(basename "$(readlink -f /usr/lib/$arch/libpcre2-8.so)")" "$dest/lib/libpcre2-8.so"
  sed -e 's|^prefix=.*|prefix=${pcfiledir}/../..|' -e 's|^libdir=.*|libdir=${prefix}/lib|' \
      -e 's|^includedir=.*|includedir=${prefix}/include|' /usr/lib/$arch/pkgconfig/libpcre2-8.pc > "$dest/lib/pkgconfig/libpcre2-8.pc"
  cp -r /usr/include/catch2 "$dest/include/" && cp -r /usr/lib/cmake/Catch2 "$dest/lib/cmake/" && cp /usr/lib/libCatch2WithMain.a "$dest/lib/"
  cp /usr/lib/$arch/libVkLayer_khronos_validation.so "$dest/layers/"
  sed 's|"library_path": *"[^"]*"|"library_path": "./libVkLayer_khronos_validation.so"|' \
      /usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json > "$dest/layers/VkLayer_khronos_validation.json"
  tok="${STRATA_CACHE_DIR:-$HOME/.cache/strata}/tokenizer/tokenizer.json"  # as scripts/setup caches it
  [ -f "$tok" ] && mkdir -p "$dest/cache/tokenizer" && cp "$tok" "$dest/cache/tokenizer/"
  du -sh "$dest"
  exit 0
fi

OUT="${OUT:-$here/gpu-bench-out}"
BUILD="${STRATA_GPU_BUILD:-$here/build-gpu-bench}"
MODELS="${STRATA_GPU_MODELS:-/tmp/strata-gpu-models}"
DEPS="${STRATA_GPU_DEPS:-$here/build-gpudeps}"
mkdir -p "$OUT" "$MODELS"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
chmod 700 "$XDG_RUNTIME_DIR"

cmake_extra=()
if [ -d "$DEPS" ]; then
  export VULKAN_SDK="$DEPS"                       # FindVulkan: include/, lib/, bin/glslc
  export PATH="$DEPS/bin:$PATH"
  export LD_LIBRARY_PATH="$DEPS/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  export PKG_CONFIG_PATH="$DEPS/lib/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
  export VK_LAYER_PATH="$DEPS/layers"
  cmake_extra+=(-DCMAKE_PREFIX_PATH="$DEPS" -Dglm_DIR="$DEPS/share/cmake/glm" -Dnlohmann_json_DIR="$DEPS/share/cmake/nlohmann_json"
                -DCatch2_DIR="$DEPS/lib/cmake/Catch2" -DCMAKE_POLICY_VERSION_MINIMUM=3.5)
fi
# The tokenizer as scripts/setup caches it (<cache>/tokenizer/tokenizer.json): the bundle's, else the machine's.
tokenizer="$DEPS/cache/tokenizer/tokenizer.json"
[ -f "$tokenizer" ] || tokenizer="${STRATA_CACHE_DIR:-$HOME/.cache/strata}/tokenizer/tokenizer.json"
cli="$BUILD/app/strata-cli"
tests="$BUILD/tests/strata_vulkan_tests"
model8b="$MODELS/llama3-8b-synthetic"
model8b_small="$MODELS/llama3-8b-synthetic-2layers"

# The validation layer is on in the tests when it can be found (bundled or installed).
validation=0
for d in "${VK_LAYER_PATH:-}" /usr/share/vulkan/explicit_layer.d /etc/vulkan/explicit_layer.d /usr/local/share/vulkan/explicit_layer.d; do
  [ -n "$d" ] && [ -f "$d/VkLayer_khronos_validation.json" ] && validation=1
done

phase() {  # phase NAME LIMIT_SECONDS FUNCTION: runs, times and records one step
  local name="$1" limit="$2" fn="$3"
  local t0=$SECONDS
  echo "== $name" >&2
  # timeout runs programs, not shell functions: hand the function and the settings it reads to a new bash.
  timeout "$limit" bash -o pipefail -c "$(declare -p here OUT BUILD MODELS DEPS tokenizer cli tests model8b \
    model8b_small validation cmake_extra); $(declare -f "$fn"); $fn"
  local rc=$?
  printf '%-22s rc=%-3s %5ss\n' "$name" "$rc" "$((SECONDS - t0))" | tee -a "$OUT/phases.txt" >&2
  return $rc
}

do_info() {
  { date -u; uname -a; nproc; free -g; nvidia-smi 2>&1 | head -20; } > "$OUT/machine.txt" 2>&1
  echo "validation layer: $validation, bundle: $([ -d "$DEPS" ] && echo "$DEPS" || echo none)" >> "$OUT/machine.txt"
}

do_build() {
  cmake -S "$here" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DSTRATA_BUILD_UI=OFF \
        -DSTRATA_CACHE_DIR="$(dirname "$(dirname "$tokenizer")")" "${cmake_extra[@]}" > "$OUT/configure.log" 2>&1 &&
  cmake --build "$BUILD" -j "$(nproc)" --target strata-cli strata_vulkan_tests > "$OUT/build.log" 2>&1
}

do_tests() {
  "$cli" devices > "$OUT/devices.json" 2>&1
  # The whole-model tests need ../shared/reference (the golden data); without it only the op tests run.
  local filter="[vulkan]~[model]"
  [ -d "${STRATA_REFERENCE_DIR:-$here/../shared/reference}" ] && filter="[vulkan]"
  STRATA_VK_VALIDATION=$validation "$tests" "$filter" -d yes > "$OUT/tests.txt" 2>&1
  local rc=$?
  # A failure with the validation layer on is rerun without it, to tell layer messages from wrong results.
  if [ $rc -ne 0 ] && [ "$validation" = 1 ]; then
    STRATA_VK_VALIDATION=0 "$tests" "$filter" -d yes > "$OUT/tests-without-validation.txt" 2>&1
  fi
  return $rc
}

do_model() {
  [ -f "$model8b/model.safetensors" ] ||
    "$cli" make-synthetic --out "$model8b" --tokenizer "$tokenizer" --shape 8b > "$OUT/make-synthetic.json" 2>&1
  [ -f "$model8b_small/model.safetensors" ] ||
    "$cli" make-synthetic --out "$model8b_small" --tokenizer "$tokenizer" --shape 8b --layers 2 >> "$OUT/make-synthetic.json" 2>&1
}

do_bench() {
  "$cli" bench --model "$model8b" --backend vulkan --prompt 512 --gen 64 > "$OUT/bench-8b.json" 2> "$OUT/bench-8b.err"
}

do_quant() {
  # Quantized GGUF files of the 8B shape (2 layers: quick to write; the embedding and output tables are full size),
  # each benched next to the bf16 file it came from, then the whole 8B model as Q4_K_M when time allows.
  local t f
  "$cli" bench --model "$model8b_small" --backend vulkan --prompt 128 --gen 32 > "$OUT/bench-8b-2layers-bf16.json" 2>&1
  for t in Q4_K_M Q8_0 Q4_0 Q4_K Q6_K; do
    f="$MODELS/llama3-8b-synthetic-2layers-$t.gguf"
    [ -f "$f" ] || "$cli" quantize --model "$model8b_small" --out "$f" --type "$t" > "$OUT/quantize-2layers-$t.log" 2>&1
    "$cli" bench --model "$f" --backend vulkan --prompt 128 --gen 32 > "$OUT/bench-8b-2layers-$t.json" 2>&1
  done
  f="$MODELS/llama3-8b-synthetic-Q4_K_M.gguf"
  [ -f "$f" ] || "$cli" quantize --model "$model8b" --out "$f" --type Q4_K_M > "$OUT/quantize-8b-Q4_K_M.log" 2>&1
  "$cli" bench --model "$f" --backend vulkan --prompt 512 --gen 64 > "$OUT/bench-8b-Q4_K_M.json" 2>&1
}

do_extra() {
  # GPU/wall time per step, host recording time, default-trace cost, matvec shapes.
  STRATA_VK_VALIDATION=0 STRATA_BENCH_MODEL="$model8b" STRATA_BENCH_PROMPT=512 STRATA_BENCH_GEN=64 \
    STRATA_BENCH_SWEEP="${STRATA_BENCH_SWEEP:-32,4 64,2 128,1 128,2 128,4 128,8 256,2 256,4 256,8}" \
    STRATA_BENCH_OUT="$OUT/vulkan-bench-8b.json" "$tests" "[.bench]" > "$OUT/vulkan-bench-8b.log" 2>&1
  # GPU time per kernel (a timestamp after every dispatch).
  STRATA_VK_VALIDATION=0 STRATA_VK_PROFILE=1 STRATA_BENCH_MODEL="$model8b" STRATA_BENCH_PROMPT=512 STRATA_BENCH_GEN=16 \
    STRATA_BENCH_SWEEP="" STRATA_BENCH_OUT="$OUT/profile-run.json" "$tests" "[.bench]" > "$OUT/profile-8b.txt" 2>&1
  # Vulkan against the CPU backend on the 8B shape (2 layers, so the CPU side stays quick), validation as above.
  STRATA_VK_VALIDATION=$validation STRATA_CHECK_MODEL="$model8b_small" "$tests" "[.check]" > "$OUT/check-8b-2layers.txt" 2>&1
}

phases=("$@")
[ ${#phases[@]} -eq 0 ] && phases=(info build model tests bench extra quant)
model_pid=
for p in "${phases[@]}"; do
  case "$p" in
    info) phase info 60 do_info ;;
    build) phase build 900 do_build || { echo "build failed: see $OUT/build.log" >&2; exit 1; } ;;
    # Writing the synthetic model (disk and CPU) overlaps with the tests (GPU); bench waits for it.
    model) phase model 600 do_model & model_pid=$! ;;
    tests) phase tests 600 do_tests ;;
    bench) [ -n "$model_pid" ] && wait "$model_pid"; model_pid=; phase bench 600 do_bench ;;
    extra) [ -n "$model_pid" ] && wait "$model_pid"; model_pid=; phase extra 900 do_extra ;;
    quant) [ -n "$model_pid" ] && wait "$model_pid"; model_pid=; phase quant 900 do_quant ;;
    *) echo "unknown phase $p (info build model tests bench extra quant)" >&2; exit 2 ;;
  esac
done
[ -n "$model_pid" ] && wait "$model_pid"
exit 0
