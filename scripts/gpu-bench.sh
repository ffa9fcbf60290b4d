#!/usr/bin/env bash
# Strata's Vulkan backend on a machine with a real GPU, as one prepared run that fits in 8 minutes including the
# build (16 cores), so that a 15-minute lease leaves room to run it again. Results land in $OUT (default
# ./gpu-bench-out); summary.txt has the figures to record in docs/performance.md:
#   build (Release, Ninja, no UI, only strata-cli and the Vulkan tests)
#   tests    the Vulkan tests (validation on when the layer is found), while the 8B-shaped synthetic bf16 model is
#            written in the background
#   bench    `strata-cli bench --backend vulkan --prompt 512 --gen 64` on it: decode tokens/s, the fraction of the
#            device's own measured read bandwidth and of its rated bandwidth, pp512, the per-token fixed cost
#   profile  GPU time per kernel for decode-shaped steps (a 1-token prompt and 8 decode steps, a timestamp after
#            every dispatch), while its Q4_K_M quantization is written in the background
#   q4km     bench on the Q4_K_M file
#   coopmat  the bf16 prefill with a 1-token decode on the default float32 tiles, then again on matrix units
#            (STRATA_VK_COOPMAT=1, VK_NV_cooperative_matrix where the device has it): which of the two is faster;
#            then GPU time per kernel of the same prefill on each (profile-prefill*.txt): whether matmul_coopmat_*
#            itself is the slower kernel, and by how much
#   noflash  the bf16 prefill again with prompt attention in the grouped kernel (STRATA_VK_ATTN_FLASH_FROM=0),
#            the before of the flash-attention tiles; run only when time is left
#   convert  Q4_K_M decode again with block types' bytes converted to float (STRATA_VK_BYTE_FLOAT_BITS=0), the
#            before of the float-bits widening; runs only when time is left
#   kvf16    bf16 decode after a 4096-token prompt (STRATA_GPU_KV_PROMPT) with the KV cache in float32, then in
#            binary16 (--kv-cache f16): what halving attention's bytes moves at a long context
#   flashwg  the bf16 prefill again with flash-attention workgroups of 256 and 512 invocations
#            (STRATA_VK_ATTN_FLASH_FROM=16,8,WG: 32 and 64 rows of head_dim 128 per staged key block, against
#            16 at the default 128), to choose the default; last
# Every phase runs under a time limit cut to what is left of the run's deadline (STRATA_GPU_DEADLINE seconds,
# default 470) and records its exit status and seconds in $OUT/phases.txt, so one failure does not hide the rest.
#
#   scripts/gpu-bench.sh [PHASE ...]     default: info build model tests bench profile q4km loads tile8
#                                        profileq4 noquad attnsplit coopmat check shapes: what the H200's first
#                                        figures left open. loads: bf16 decode with the matvec's weight loads of 4
#                                        and of 8 iterations issued together (STRATA_VK_MATVEC_LOADS), beside the
#                                        default (1); tile8: the bf16 prefill with the float32 tiles at 8 x 8
#                                        outputs per invocation (STRATA_VK_MATMUL_TILE8=1) beside the default
#                                        4 x 8, and its GPU time per kernel; profileq4: profile on the Q4_K_M
#                                        file; noquad: Q4_K_M decode with whole units per invocation
#                                        (STRATA_VK_QUAD_LANES=0, the before of pieces and quads); attnsplit:
#                                        decode after STRATA_GPU_KV_PROMPT tokens with decode attention's keys
#                                        over more workgroups; check: Vulkan against the CPU
#                                        backend on a 2-layer 8B shape; shapes: decode in other matvec shapes, and
#                                        rmsnorm's workgroup at 256. More: noflash, convert, kvf16, flashwg (above),
#                                        sweep (matvec shapes, trace cost: [.bench]), quant (each block type on 2
#                                        layers)
#   scripts/gpu-bench.sh --bundle DIR    run on a Debian 12 machine that builds Strata: copies what a bare GPU
#                                        machine may lack (Vulkan headers + loader, glslc, glm, PCRE2 headers,
#                                        Catch2 2, nlohmann_json, the validation layer, the tokenizer, libglvnd's
#                                        packages, the golden data) into DIR and packs it as DIR.tar.xz
#
# A bundle at $STRATA_GPU_DEPS (default: build-gpudeps/ in the checkout, which git ignores), or its DIR.tar.xz, is
# used when present; without one the machine's own packages must do. Before the first phase that needs the device
# the script checks that the Vulkan loader finds it (the loader's report in $OUT/loader.txt) and, if not, unpacks
# the bundle's libglvnd packages and names NVIDIA's ICD; with no device after that it stops. On the lent GPU
# machine (its tool takes back 8 files, the checkout and carried paths 64 MiB):
#   carry build-gpudeps.tar.xz;  OUT_DEV=$OUT; OUT=/tmp/gpu-bench STRATA_GPU_PACK=$OUT_DEV scripts/gpu-bench.sh
# A dry run on a machine without a GPU (lavapipe):
#   STRATA_GPU_SHAPE=1b STRATA_GPU_LAYERS=1 STRATA_GPU_PROMPT=8 STRATA_GPU_GEN=2 scripts/gpu-bench.sh
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
  # A bare GPU machine may lack the loader's and NVIDIA's Vulkan driver's own needs (libglvnd: the ICD,
  # libGLX_nvidia.so.0, does not load without libGLdispatch.so.0; the loader's vkCreateInstance then says
  # VK_ERROR_INCOMPATIBLE_DRIVER). Debian's packages, unpacked there only when no device is found.
  mkdir -p "$dest/debs" /tmp/strata-apt-lists/partial
  apt_o=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/strata-apt-lists)
  apt-get "${apt_o[@]}" update -q > /dev/null
  (cd "$dest/debs" && apt-get "${apt_o[@]}" download libvulkan1 libglvnd0 libgl1 libglx0 libegl1 libopengl0 libgles2)
  # The golden data, so the whole-model tests run there too.
  ref="${STRATA_REFERENCE_DIR:-$here/../shared/reference}"
  [ -d "$ref" ] && cp -r "$ref" "$dest/reference"
  # What travels: the folder is too big beside the checkout (64 MiB in all), its xz archive is not (~45 MB).
  tar -C "$(dirname "$dest")" -cf - "$(basename "$dest")" | xz -T0 -6 > "$dest.tar.xz"
  du -sh "$dest" "$dest.tar.xz"
  exit 0
fi

OUT="${OUT:-$here/gpu-bench-out}"
BUILD="${STRATA_GPU_BUILD:-$here/build-gpu-bench}"
MODELS="${STRATA_GPU_MODELS:-/tmp/strata-gpu-models}"
DEPS="${STRATA_GPU_DEPS:-$here/build-gpudeps}"
SHAPE="${STRATA_GPU_SHAPE:-8b}"
LAYERS="${STRATA_GPU_LAYERS:-}"    # empty: the shape's own
PROMPT="${STRATA_GPU_PROMPT:-512}"
KV_PROMPT="${STRATA_GPU_KV_PROMPT:-4096}"  # the kvf16 phase's context
GEN="${STRATA_GPU_GEN:-64}"
DEADLINE="${STRATA_GPU_DEADLINE:-470}"
mkdir -p "$OUT" "$MODELS"
: > "$OUT/phases.txt"
export XDG_RUNTIME_DIR="${XDG_RUNTIME_DIR:-$(mktemp -d)}"
chmod 700 "$XDG_RUNTIME_DIR"

cmake_extra=()
[ ! -d "$DEPS" ] && [ -f "$DEPS.tar.xz" ] && tar -C "$(dirname "$DEPS")" -xJf "$DEPS.tar.xz"
if [ -z "${STRATA_REFERENCE_DIR:-}" ] && [ ! -d "$here/../shared/reference" ] && [ -d "$DEPS/reference" ]; then
  export STRATA_REFERENCE_DIR="$DEPS/reference"
fi
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
name="llama3-$SHAPE-synthetic${LAYERS:+-${LAYERS}layers}"
model="$MODELS/$name"
model_q4km="$MODELS/$name-Q4_K_M.gguf"
model_small="$MODELS/llama3-$SHAPE-synthetic-2layers"
layer_args=()
[ -n "$LAYERS" ] && layer_args=(--layers "$LAYERS")

# The validation layer is on in the tests when it can be found (bundled or installed).
validation=0
for d in "${VK_LAYER_PATH:-}" /usr/share/vulkan/explicit_layer.d /etc/vulkan/explicit_layer.d /usr/local/share/vulkan/explicit_layer.d; do
  [ -n "$d" ] && [ -f "$d/VkLayer_khronos_validation.json" ] && validation=1
done

phase() {  # phase NAME LIMIT_SECONDS FUNCTION: runs, times and records one step, within the run's deadline
  local name="$1" limit="$2" fn="$3"
  local left=$((DEADLINE - SECONDS))
  [ "$limit" -gt "$left" ] && limit=$left
  if [ "$limit" -le 5 ]; then
    printf '%-10s skipped: the run has %ss left\n' "$name" "$left" | tee -a "$OUT/phases.txt" >&2
    return 124
  fi
  local t0=$SECONDS
  echo "== $name (limit ${limit}s)" >&2
  # timeout runs programs, not shell functions: hand the function and the settings it reads to a new bash.
  timeout "$limit" bash -o pipefail -c "$(declare -p here OUT BUILD MODELS DEPS tokenizer cli tests model model_q4km \
    model_small layer_args SHAPE PROMPT KV_PROMPT GEN validation cmake_extra); $(declare -f "$fn"); $fn"
  local rc=$?
  printf '%-10s rc=%-3s %5ss (at %ss)\n' "$name" "$rc" "$((SECONDS - t0))" "$SECONDS" | tee -a "$OUT/phases.txt" >&2
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
  [ -f "$model/model.safetensors" ] ||
    "$cli" make-synthetic --out "$model" --tokenizer "$tokenizer" --shape "$SHAPE" "${layer_args[@]}" > "$OUT/make-synthetic.json" 2>&1
}

do_quantize() {
  [ -f "$model_q4km" ] || "$cli" quantize --model "$model" --out "$model_q4km" --type Q4_K_M > "$OUT/quantize-Q4_K_M.log" 2>&1
}

do_bench() {
  "$cli" bench --model "$model" --backend vulkan --prompt "$PROMPT" --gen "$GEN" --repeats 3 > "$OUT/bench-bf16.json" 2> "$OUT/bench-bf16.err"
}

do_profile() {
  # Every step decode-shaped (a 1-token prompt, its 1-token warm-up, 8 decode steps): GPU time per kernel, from
  # a timestamp after every dispatch, printed on stderr when the backend goes; per step = total / 10.
  STRATA_VK_PROFILE=1 "$cli" bench --model "$model" --backend vulkan --prompt 1 --gen 8 --repeats 1 \
    > "$OUT/profile-decode.json" 2> "$OUT/profile-decode.txt"
}

do_q4km() {
  "$cli" bench --model "$model_q4km" --backend vulkan --prompt "$PROMPT" --gen "$GEN" --repeats 3 > "$OUT/bench-q4km.json" 2> "$OUT/bench-q4km.err"
}

do_coopmat() {
  # The default first, measured the same way (a 1-token decode after the prompt), so the two compare.
  "$cli" bench --model "$model" --backend vulkan --prompt "$PROMPT" --gen 1 --repeats 3 \
    > "$OUT/bench-bf16-prefill.json" 2> "$OUT/bench-bf16-prefill.err"
  STRATA_VK_COOPMAT=1 "$cli" bench --model "$model" --backend vulkan --prompt "$PROMPT" --gen 1 --repeats 3 \
    > "$OUT/bench-bf16-coopmat.json" 2> "$OUT/bench-bf16-coopmat.err"
  STRATA_VK_PROFILE=1 "$cli" bench --model "$model" --backend vulkan --prompt "$PROMPT" --gen 1 --repeats 1 \
    > "$OUT/profile-prefill.json" 2> "$OUT/profile-prefill.txt"
  STRATA_VK_PROFILE=1 STRATA_VK_COOPMAT=1 "$cli" bench --model "$model" --backend vulkan --prompt "$PROMPT" \
    --gen 1 --repeats 1 > "$OUT/profile-prefill-coopmat.json" 2> "$OUT/profile-prefill-coopmat.txt"
}

do_profileq4() {  # as profile, on the Q4_K_M file
  STRATA_VK_PROFILE=1 "$cli" bench --model "$model_q4km" --backend vulkan --prompt 1 --gen 8 --repeats 1 \
    > "$OUT/profile-decode-q4km.json" 2> "$OUT/profile-decode-q4km.txt"
}

do_loads() {
  # bf16 decode with the float types' matvec loads LOADS iterations at a time (STRATA_VK_MATVEC_LOADS): the default
  # (1) first, measured alike, then 4 and 8. If one is clearly faster, make it matvec_loads' default.
  local l
  for l in 1 4 8; do
    STRATA_VK_MATVEC_LOADS=$l "$cli" bench --model "$model" --backend vulkan --prompt 8 --gen "$GEN" --repeats 2 \
      > "$OUT/bench-bf16-loads-$l.json" 2> "$OUT/bench-bf16-loads-$l.err"
  done
}

do_tile8() {
  # The bf16 prefill on the float32 tiles with 4 x 8 (the default, first, measured alike) and 8 x 8 outputs per
  # invocation (STRATA_VK_MATMUL_TILE8=1), then the latter profiled (against the coopmat phase's profile-prefill.txt).
  local t
  for t in 0 1; do
    STRATA_VK_MATMUL_TILE8=$t "$cli" bench --model "$model" --backend vulkan --prompt "$PROMPT" --gen 1 --repeats 3 \
      > "$OUT/bench-bf16-tile8-$t.json" 2> "$OUT/bench-bf16-tile8-$t.err"
  done
  STRATA_VK_PROFILE=1 STRATA_VK_MATMUL_TILE8=1 "$cli" bench --model "$model" --backend vulkan --prompt "$PROMPT" \
    --gen 1 --repeats 1 > "$OUT/profile-prefill-tile8.json" 2> "$OUT/profile-prefill-tile8.txt"
}

do_noquad() {  # Q4_K_M decode with whole units per invocation (STRATA_VK_QUAD_LANES=0): the before of QUAD_LANES
  STRATA_VK_QUAD_LANES=0 "$cli" bench --model "$model_q4km" --backend vulkan --prompt 8 --gen "$GEN" --repeats 3 \
    > "$OUT/bench-q4km-noquad.json" 2> "$OUT/bench-q4km-noquad.err"
}

do_shapes() {
  # Decode in matvec shapes (STRATA_VK_MATVEC=WG,ROWS; the default, 128,2, first, measured alike) on both files,
  # and the bf16 file with rmsnorm's workgroup at 256 (the before of the device's widest).
  local s
  for s in 128,2 64,4 128,4 256,2 256,4 512,2; do
    STRATA_VK_MATVEC=$s "$cli" bench --model "$model" --backend vulkan --prompt 8 --gen "$GEN" --repeats 2 \
      > "$OUT/shape-bf16-$s.json" 2>&1
    STRATA_VK_MATVEC=$s "$cli" bench --model "$model_q4km" --backend vulkan --prompt 8 --gen "$GEN" --repeats 2 \
      > "$OUT/shape-q4km-$s.json" 2>&1
  done
  STRATA_VK_NORM_WG=256 "$cli" bench --model "$model" --backend vulkan --prompt 8 --gen "$GEN" --repeats 2 \
    > "$OUT/bench-bf16-norm256.json" 2>&1
}

do_noflash() {
  STRATA_VK_ATTN_FLASH_FROM=0 "$cli" bench --model "$model" --backend vulkan --prompt "$PROMPT" --gen 1 --repeats 3 \
    > "$OUT/bench-bf16-noflash.json" 2> "$OUT/bench-bf16-noflash.err"
}

do_convert() {
  STRATA_VK_BYTE_FLOAT_BITS=0 "$cli" bench --model "$model_q4km" --backend vulkan --prompt 8 --gen "$GEN" --repeats 3 \
    > "$OUT/bench-q4km-convert.json" 2> "$OUT/bench-q4km-convert.err"
}

do_kvf16() {
  for kv in f32 f16; do
    "$cli" bench --model "$model" --backend vulkan --prompt "$KV_PROMPT" --gen 32 --repeats 1 --kv-cache $kv \
      > "$OUT/bench-bf16-ctx-$kv.json" 2> "$OUT/bench-bf16-ctx-$kv.err"
  done
}

do_attnsplit() {
  # Decode after a long prompt with decode attention's keys split over more workgroups
  # (STRATA_VK_ATTN_SPLIT_FROM=FROM,KEYS,GROUPS; the default aims at 256 workgroups of at least 64 keys).
  local s
  for s in 128,64,256 128,32,1024 128,16,2048; do
    STRATA_VK_ATTN_SPLIT_FROM=$s "$cli" bench --model "$model" --backend vulkan --prompt "$KV_PROMPT" --gen 32 \
      --repeats 1 > "$OUT/attnsplit-$s.json" 2>&1
  done
}

do_flashwg() {
  for wg in 256 512; do
    STRATA_VK_ATTN_FLASH_FROM=16,8,$wg "$cli" bench --model "$model" --backend vulkan --prompt "$PROMPT" --gen 1 \
      --repeats 3 > "$OUT/bench-bf16-flashwg$wg.json" 2> "$OUT/bench-bf16-flashwg$wg.err"
  done
}

do_sweep() {
  # GPU/wall time per step, host recording time, default-trace cost, matvec shapes.
  STRATA_VK_VALIDATION=0 STRATA_BENCH_MODEL="$model" STRATA_BENCH_PROMPT="$PROMPT" STRATA_BENCH_GEN="$GEN" \
    STRATA_BENCH_SWEEP="${STRATA_BENCH_SWEEP:-32,4 64,2 128,1 128,2 128,4 128,8 256,2 256,4 256,8}" \
    STRATA_BENCH_OUT="$OUT/vulkan-bench.json" "$tests" "[.bench]" > "$OUT/vulkan-bench.log" 2>&1
}

do_check() {
  # Vulkan against the CPU backend on the shape (2 layers, so the CPU side stays quick).
  [ -f "$model_small/model.safetensors" ] ||
    "$cli" make-synthetic --out "$model_small" --tokenizer "$tokenizer" --shape "$SHAPE" --layers 2 > "$OUT/make-synthetic-2layers.json" 2>&1
  STRATA_VK_VALIDATION=$validation STRATA_CHECK_MODEL="$model_small" "$tests" "[.check]" > "$OUT/check-2layers.txt" 2>&1
}

do_quant() {
  # Each block type on the 2-layer shape (quick to write; the embedding and output tables are full size).
  local t f
  [ -f "$model_small/model.safetensors" ] ||
    "$cli" make-synthetic --out "$model_small" --tokenizer "$tokenizer" --shape "$SHAPE" --layers 2 > "$OUT/make-synthetic-2layers.json" 2>&1
  "$cli" bench --model "$model_small" --backend vulkan --prompt 128 --gen 32 > "$OUT/bench-2layers-bf16.json" 2>&1
  for t in Q4_K_M Q8_0 Q4_0 Q4_K Q6_K; do
    f="$model_small-$t.gguf"
    [ -f "$f" ] || "$cli" quantize --model "$model_small" --out "$f" --type "$t" > "$OUT/quantize-2layers-$t.log" 2>&1
    "$cli" bench --model "$f" --backend vulkan --prompt 128 --gen 32 > "$OUT/bench-2layers-$t.json" 2>&1
  done
}

# The figures to record: per bench file, decode and prefill, the fractions of the measured and rated bandwidth.
summary() {
  python3 - "$OUT" "${STRATA_GPU_RATED_GBS:-}" > "$OUT/summary.txt" 2>&1 <<'PY' || echo "no summary (python3 missing?)" > "$OUT/summary.txt"
import json, os, sys
out, rated_env = sys.argv[1], sys.argv[2]
# Rated memory bandwidth, GB/s, by device name (the vendors' figures); STRATA_GPU_RATED_GBS overrides.
RATED = [("H200", 4800), ("H100 PCIe", 2000), ("H100", 3350), ("A100-SXM4-80GB", 2039), ("A100 80GB PCIe", 1935),
         ("A100", 1555), ("L40S", 864), ("L4", 300), ("A10", 600), ("T4", 320), ("RTX 4090", 1008),
         ("RTX 4080", 717), ("RTX 3090 Ti", 1008), ("RTX 3090", 936), ("RTX 3080", 760), ("RX 7900 XTX", 960)]
for name in ("bench-bf16.json", "bench-q4km.json"):
    path = os.path.join(out, name)
    try:
        d = json.load(open(path))
    except Exception as e:
        print(f"{name}: none ({e})")
        continue
    dev = d["model"]["backend"].get("device", "?")
    rated = float(rated_env) if rated_env else next((r for key, r in RATED if key in dev), None)
    dec, pre, mb = d["decode"], d["prefill"], d["machine_bandwidth"]
    print(f"{name}: {dev}, {d['model'].get('parameters', 0) / 1e9:.2f} B parameters, "
          f"{dec['weight_bytes_per_token'] / 1e9:.2f} GB read per decode token")
    print(f"  decode {dec['tokens_per_second']:.2f} tok/s = {dec['effective_weight_gb_per_s']:.1f} GB/s of weights; "
          f"device read {mb['gb_per_s']:.1f} GB/s -> {d['decode_bandwidth_fraction']:.3f} of it" +
          (f", {dec['effective_weight_gb_per_s'] / rated:.3f} of the rated {rated:.0f} GB/s" if rated else ", rated unknown"))
    print(f"  prefill {pre['tokens']} tokens: {pre['tokens_per_second']:.1f} tok/s, "
          f"{pre.get('matmul_gflop_per_second', 0):.0f} GFLOP/s")
    print(f"  per decode token: {json.dumps(d.get('decode_step', {}))}")
    print(f"  kernels: {d['model']['backend'].get('kernels', '?')}")
def extra(name, what):  # one line per optional phase's result (why there is none, where its file is there)
    path = os.path.join(out, name)
    if not os.path.exists(path):
        return
    try:
        print(f"{name}: {what(json.load(open(path)))}")
    except Exception as e:
        print(f"{name}: none ({e})")
extra("bench-bf16-prefill.json",
      lambda d: f"prefill on the default (float32 tiles) {d['prefill']['tokens_per_second']:.1f} tok/s")
extra("bench-bf16-coopmat.json",
      lambda d: f"prefill with STRATA_VK_COOPMAT=1 {d['prefill']['tokens_per_second']:.1f} tok/s, "
                f"{d['model']['backend'].get('kernels', '?')}")
extra("bench-bf16-noflash.json",
      lambda d: f"prefill without flash-attention tiles {d['prefill']['tokens_per_second']:.1f} tok/s")
extra("bench-q4km-convert.json",
      lambda d: f"Q4_K_M decode with bytes converted to float {d['decode']['tokens_per_second']:.1f} tok/s")
for t in (0, 1):
    extra(f"bench-bf16-tile8-{t}.json",
          lambda d, t=t: f"bf16 prefill with STRATA_VK_MATMUL_TILE8={t} {d['prefill']['tokens_per_second']:.1f} tok/s")
for l in (1, 4, 8):
    extra(f"bench-bf16-loads-{l}.json",
          lambda d, l=l: f"bf16 decode with STRATA_VK_MATVEC_LOADS={l} {d['decode']['tokens_per_second']:.1f} tok/s")
extra("bench-q4km-noquad.json",
      lambda d: f"Q4_K_M decode with whole units per invocation {d['decode']['tokens_per_second']:.1f} tok/s")
extra("bench-bf16-norm256.json",
      lambda d: f"bf16 decode with rmsnorm workgroups of 256 {d['decode']['tokens_per_second']:.1f} tok/s")
for f in sorted(n for n in os.listdir(out) if n.startswith("attnsplit-")):
    extra(f, lambda d: f"decode after {d['prefill']['tokens']} tokens {d['decode']['tokens_per_second']:.2f} tok/s")
for f in sorted(n for n in os.listdir(out) if n.startswith("shape-")):
    extra(f, lambda d: f"decode {d['decode']['tokens_per_second']:.1f} tok/s")
for kv in ("f32", "f16"):
    extra(f"bench-bf16-ctx-{kv}.json",
          lambda d, kv=kv: f"decode after {d['prefill']['tokens']} tokens, {kv} KV cache "
                           f"{d['decode']['tokens_per_second']:.2f} tok/s, {json.dumps(d.get('decode_step', {}))}")
for wg in (256, 512):
    extra(f"bench-bf16-flashwg{wg}.json",
          lambda d, wg=wg: f"prefill with flash workgroups of {wg} {d['prefill']['tokens_per_second']:.1f} tok/s")
PY
  cat "$OUT/summary.txt" >&2
}

# Vulkan's driver, found before the first phase that needs the device, with the loader's own report in
# $OUT/loader.txt. A bare machine may not load NVIDIA's driver: then the bundle's libglvnd and loader packages are
# unpacked (as root, where ldconfig lacks libGLdispatch.so.0), then NVIDIA's ICD is named directly.
driver_found() {
  VK_LOADER_DEBUG=error,warn,driver timeout 60 "$cli" devices > "$OUT/loader.txt" 2>&1
  ! grep -q "no usable Vulkan device" "$OUT/loader.txt"
}
nvidia_dirs=(/usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib /lib/x86_64-linux-gnu /usr/local/nvidia/lib64 /usr/local/nvidia/lib
             /usr/local/lib /usr/local/cuda/compat)
driver_report() {  # what a failed driver load needs explained, in $OUT/driver.txt
  {
    echo "== id"; id
    echo "== environment"; env | grep -E '^(LD_LIBRARY_PATH|NVIDIA_|VK_|PATH)=' | sort
    echo "== ICD manifests"
    for f in /usr/share/vulkan/icd.d/*.json /etc/vulkan/icd.d/*.json /usr/local/share/vulkan/icd.d/*.json \
             /usr/local/nvidia/share/vulkan/icd.d/*.json /usr/local/nvidia/icd.d/*.json; do
      [ -f "$f" ] && { echo "-- $f"; cat "$f"; echo; }
    done
    echo "== NVIDIA's user-space libraries, glvnd, loaders"
    find "${nvidia_dirs[@]}" -maxdepth 1 \( -name 'libGLX_nvidia*' -o -name 'libnvidia-*' -o -name 'libGLdispatch*' \
         -o -name 'libvulkan*' -o -name 'libEGL_nvidia*' -o -name 'libcuda.so*' \) 2>/dev/null | sort
    echo "== ldd of NVIDIA's Vulkan driver"
    find "${nvidia_dirs[@]}" -maxdepth 1 -name 'libGLX_nvidia.so.0' 2>/dev/null | while read -r l; do echo "-- $l"; ldd "$l"; done
    echo "== ldconfig"; ldconfig -p 2>&1 | grep -E -i 'nvidia|GLdispatch|vulkan'
  } > "$OUT/driver.txt" 2>&1
}
find_driver() {
  driver_found && return 0
  cp "$OUT/loader.txt" "$OUT/loader-before.txt"
  driver_report
  if [ -d "$DEPS/debs" ] && [ "$(id -u)" -eq 0 ] && ! ldconfig -p | grep -q libGLdispatch.so.0; then
    echo "driver: none found; unpacking the bundle's libglvnd and Vulkan loader packages" >&2
    for f in "$DEPS"/debs/*.deb; do dpkg -x "$f" /; done
    ldconfig
    driver_found && return 0
  fi
  # NVIDIA's driver where the dynamic linker does not look (a container's /usr/local/nvidia/lib64): on the
  # library path, and a manifest that names it by its full path.
  local lib dir icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  lib="$(find "${nvidia_dirs[@]}" -maxdepth 1 -name 'libGLX_nvidia.so.0' 2>/dev/null | head -1)"
  if [ -n "$lib" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then
    dir="$(dirname "$lib")"
    echo "driver: none found; $lib on the library path, named by a manifest of our own" >&2
    export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$dir"
    if [ -f "$icd" ]; then
      sed "s|\"library_path\": *\"[^\"]*\"|\"library_path\": \"$lib\"|" "$icd" > "$OUT/nvidia_icd.json"
    else
      printf '{"file_format_version": "1.0.1", "ICD": {"library_path": "%s", "api_version": "1.3.0"}}\n' "$lib" \
        > "$OUT/nvidia_icd.json"
    fi
    export VK_DRIVER_FILES="$OUT/nvidia_icd.json"
    driver_found && return 0
    unset VK_DRIVER_FILES
  fi
  if [ -f "$icd" ] && [ -z "${VK_DRIVER_FILES:-}" ]; then
    echo "driver: none found; naming $icd" >&2
    export VK_DRIVER_FILES="$icd"
    driver_found && return 0
  fi
  printf '%-10s rc=1   no Vulkan device (loader.txt, driver.txt)\n' driver >> "$OUT/phases.txt"
  echo "driver: no Vulkan device; the loader's report ($OUT/loader.txt) ends:" >&2
  tail -20 "$OUT/loader.txt" >&2
  echo "---- driver.txt" >&2; cat "$OUT/driver.txt" >&2
  return 1
}

# STRATA_GPU_PACK=DIR (the device tool's $OUT, which takes back at most 8 files): the results as one archive
# there, with the summary and the phases beside it.
pack() {
  [ -n "${STRATA_GPU_PACK:-}" ] || return 0
  mkdir -p "$STRATA_GPU_PACK"
  tar -C "$(dirname "$OUT")" -czf "$STRATA_GPU_PACK/gpu-bench.tgz" "$(basename "$OUT")"
  cp "$OUT/summary.txt" "$OUT/phases.txt" "$STRATA_GPU_PACK/" 2>/dev/null
  echo "---- phases"; cat "$OUT/phases.txt"
  echo "---- tests"; tail -4 "$OUT/tests.txt" 2>/dev/null
}

phases=("$@")
[ ${#phases[@]} -eq 0 ] &&
  phases=(info build model tests bench profile q4km loads tile8 profileq4 noquad attnsplit coopmat check shapes)
model_pid=
quant_pid=
wait_model() { [ -n "$model_pid" ] && wait "$model_pid"; model_pid=; }
driver_checked=0
for p in "${phases[@]}"; do
  case "$p" in
    info|build|model) ;;
    *) if [ "$driver_checked" = 0 ]; then
         driver_checked=1
         find_driver || { wait_model; summary; pack; exit 1; }
       fi ;;
  esac
  case "$p" in
    info) phase info 30 do_info ;;
    build) phase build 300 do_build || { echo "build failed: see $OUT/build.log" >&2; wait_model; pack; exit 1; } ;;
    # Writing the synthetic model (disk and CPU) overlaps the tests (GPU); bench waits for it.
    model) phase model 240 do_model & model_pid=$! ;;
    tests) phase tests 150 do_tests ;;
    bench) wait_model; phase bench 120 do_bench ;;
    # The Q4_K_M file is written (CPU) while the profile runs (GPU); q4km waits for it.
    profile) wait_model; { phase quantize 200 do_quantize & } ; quant_pid=$!; phase profile 60 do_profile ;;
    q4km) wait_model; [ -n "$quant_pid" ] && wait "$quant_pid"; quant_pid=
          [ -f "$model_q4km" ] || phase quantize 200 do_quantize; phase q4km 120 do_q4km ;;
    coopmat) wait_model; phase coopmat 120 do_coopmat ;;
    profileq4) [ -f "$model_q4km" ] && phase profileq4 60 do_profileq4 ;;
    loads) wait_model; phase loads 90 do_loads ;;
    tile8) wait_model; phase tile8 90 do_tile8 ;;
    noquad) [ -f "$model_q4km" ] && phase noquad 60 do_noquad ;;
    shapes) wait_model; [ -f "$model_q4km" ] && phase shapes 150 do_shapes ;;
    noflash) wait_model; phase noflash 60 do_noflash ;;
    convert) [ -f "$model_q4km" ] && phase convert 60 do_convert ;;
    kvf16) wait_model; phase kvf16 90 do_kvf16 ;;
    flashwg) wait_model; phase flashwg 60 do_flashwg ;;
    attnsplit) wait_model; phase attnsplit 90 do_attnsplit ;;
    sweep) wait_model; phase sweep 300 do_sweep ;;
    check) phase check 300 do_check ;;
    quant) phase quant 400 do_quant ;;
    *) echo "unknown phase $p (info build model tests bench profile q4km coopmat noflash convert kvf16 flashwg" \
            "profileq4 loads tile8 noquad shapes attnsplit sweep check quant)" >&2; exit 2 ;;
  esac
done
wait_model
[ -n "$quant_pid" ] && wait "$quant_pid"
summary
pack
exit 0
