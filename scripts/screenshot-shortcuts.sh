#!/usr/bin/env bash
# Screenshots of the shortcuts overlay (F1) and File > Open Recent, taken the way a person sees them: the real
# app under Xvfb (1600 x 1000), keys sent with xdotool, the screen captured with ImageMagick's import.
# Settings, the demonstration model and the "recent" models live in a private folder, never the user's.
#   scripts/screenshot-shortcuts.sh [BUILD_DIR] [OUT_DIR]        (defaults: build, docs/screenshots)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
out=${2:-$root/docs/screenshots}
strata=$build/app/strata
[ -x "$strata" ] || { echo "screenshot-shortcuts: no $strata; build the 'strata' target first" >&2; exit 1; }
for tool in xvfb-run xdotool import; do
    command -v $tool >/dev/null || { echo "screenshot-shortcuts: $tool is missing (apt-get install xvfb xauth xdotool imagemagick)" >&2; exit 1; }
done
tokenizer=${STRATA_CACHE_DIR:-$HOME/.cache/strata}/tokenizer/tokenizer.json
[ -f "$tokenizer" ] || { echo "screenshot-shortcuts: no tokenizer at $tokenizer (scripts/setup downloads it)" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/cache/tokenizer" "$tmp/config/strata" "$out"
mkdir -m 700 "$tmp/runtime"
ln -s "$tokenizer" "$tmp/cache/tokenizer/tokenizer.json"
# Three models the menu will list (empty stand-ins: the menu only needs them to exist), under a short path.
models=/tmp/strata-screenshot-models
rm -rf "$models"
trap 'rm -rf "$tmp" "$models"' EXIT
mkdir -p "$models/Meta-Llama-3-8B-Instruct" "$models/Llama-3.2-1B-Instruct"
touch "$models/Meta-Llama-3.1-8B-Instruct-Q8_0.gguf"
cat >"$tmp/config/strata/strata.conf" <<CONF
[General]
recentModels=$models/Meta-Llama-3-8B-Instruct, $models/Meta-Llama-3.1-8B-Instruct-Q8_0.gguf, $models/Llama-3.2-1B-Instruct
CONF

cat >"$tmp/shoot.sh" <<SHOOT
set -e
"$strata" 2>/dev/null &
app=\$!
for i in \$(seq 1 120); do  # the demonstration model is written, opened and run
    sleep 1
    xdotool search --name "demonstration model" >/dev/null 2>&1 && break
done
sleep 4
# No window manager: give the window the keyboard focus directly.
win=\$(xdotool search --name "demonstration model" | head -1)
xdotool mousemove 800 500
xdotool windowfocus --sync "\$win"
xdotool key F1
sleep 1
import -window root "$out/shortcuts-overlay.png"
xdotool key Escape
sleep 0.5
xdotool key alt+f
sleep 0.5
xdotool key r
sleep 1
import -window root "$out/open-recent.png"
xdotool key Escape Escape
kill \$app
SHOOT
XDG_CONFIG_HOME=$tmp/config XDG_DATA_HOME=$tmp/data XDG_RUNTIME_DIR=$tmp/runtime STRATA_CACHE_DIR=$tmp/cache \
    xvfb-run -a -s "-screen 0 1600x1000x24" bash "$tmp/shoot.sh"
echo "wrote $out/shortcuts-overlay.png and $out/open-recent.png"
