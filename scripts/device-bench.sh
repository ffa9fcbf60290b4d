#!/usr/bin/env bash
# The one prepared run on a GPU machine (see docs/performance.md): Vulkan op and model tests, then strata-cli bench
# on a Llama-3-8B-shaped synthetic bf16 checkpoint, Vulkan against the CPU backend on the same machine.
# Expects in .gl/: the Vulkan loader and validation layer .debs, bin/strata-cli and bin/strata_vulkan_tests built
# on Debian 12, ref/ (the golden model and expected.json) and tokenizer.json.gz. Results go to $OUT.
set -u
OUT="${OUT:-/tmp/out}"; mkdir -p "$OUT"
for f in .gl/*.deb; do dpkg -x "$f" /; done; ldconfig
export XDG_RUNTIME_DIR=/tmp/xdg; mkdir -p -m700 "$XDG_RUNTIME_DIR"
gunzip -c .gl/tokenizer.json.gz > /tmp/tokenizer.json
B=.gl/bin
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.memory --format=csv | tee "$OUT/gpu.txt"
nproc >> "$OUT/gpu.txt"; grep -m1 'model name' /proc/cpuinfo >> "$OUT/gpu.txt"
if ! $B/strata-cli devices > "$OUT/devices.json" 2>&1 || ! grep -q '"discrete"' "$OUT/devices.json"; then
  export VK_DRIVER_FILES=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
  $B/strata-cli devices > "$OUT/devices.json" 2>&1
fi
cat "$OUT/devices.json"
# Op tests and model tests that need only the golden model (the golden tensors stay behind: size limit).
STRATA_REFERENCE_DIR=$PWD/.gl/ref STRATA_TOKENIZER_JSON=/tmp/tokenizer.json STRATA_VK_VALIDATION=1 \
  timeout 120 $B/strata_vulkan_tests '[vulkan]~[golden]' > "$OUT/vulkan_tests.txt" 2>&1
echo "vulkan tests rc=$?" | tee -a "$OUT/vulkan_tests.txt"; tail -5 "$OUT/vulkan_tests.txt"
time $B/strata-cli make-synthetic --out /tmp/m8b --tokenizer /tmp/tokenizer.json --shape 8b
timeout 200 $B/strata-cli bench --model /tmp/m8b --backend vulkan --prompt 512 --gen 64 > "$OUT/bench_8b_vulkan.json" 2>&1
echo "vulkan bench rc=$?"; cat "$OUT/bench_8b_vulkan.json"
timeout 60 $B/strata-cli bench --model /tmp/m8b --backend cpu --prompt 16 --gen 8 > "$OUT/bench_8b_cpu.json" 2>&1
echo "cpu bench rc=$?"; cat "$OUT/bench_8b_cpu.json"
