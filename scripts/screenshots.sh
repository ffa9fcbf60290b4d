#!/usr/bin/env bash
# Screenshots of every explorer view at 1600 x 1000 under Xvfb, for docs/screenshots/ and the README.
# The demonstration model is written fresh (into a private cache, from the cached Llama 3 tokenizer), the default
# prompt runs, and `strata --screenshot-dir` saves one PNG per view (QWidget::grab of the whole window).
#   scripts/screenshots.sh [BUILD_DIR] [OUT_DIR]        (defaults: build, docs/screenshots)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$root/docs/screenshots}
strata=$build/app/strata
if [ ! -x "$strata" ]; then
    echo "screenshots: no $strata; build the 'strata' target first" >&2
    exit 1
fi
command -v xvfb-run >/dev/null || { echo "screenshots: xvfb-run is missing (apt-get install xvfb xauth)" >&2; exit 1; }
tokenizer=${STRATA_CACHE_DIR:-$HOME/.cache/strata}/tokenizer/tokenizer.json
if [ ! -f "$tokenizer" ]; then
    echo "screenshots: no tokenizer at $tokenizer (scripts/setup downloads it)" >&2
    exit 1
fi

cache=$(mktemp -d)
trap 'rm -rf "$cache"' EXIT
mkdir -p "$cache/tokenizer" "$out"
ln -s "$tokenizer" "$cache/tokenizer/tokenizer.json"
export XDG_RUNTIME_DIR="$cache/runtime"
export XDG_CONFIG_HOME="$cache/config"  # the chat's settings and recent models: not the user's
mkdir -m 700 "$XDG_RUNTIME_DIR"

STRATA_CACHE_DIR="$cache" xvfb-run -a -s "-screen 0 1600x1000x24" \
    "$strata" --screenshot-dir "$out" 2> >(grep -v 'propagateSizeHints' >&2)
