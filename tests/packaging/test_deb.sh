#!/usr/bin/env bash
# packaging: deb — builds the Debian package with CPack from a finished build, unpacks it into a clean root
# (dpkg -x: works as root and not), and runs what was installed: strata-cli --version, make-demo with the
# packaged tokenizer, info on that demonstration model, every command's --help, devices without any Vulkan
# driver, strata --help offscreen. Checks the declared dependencies, the files (binaries, man pages, desktop
# entry, metainfo, icons, tokenizer; no model blob) and validates the desktop entry and the metainfo.
#   test_deb.sh BUILD_DIR WORK_DIR VERSION
set -euo pipefail
build=$1
work=$2
version=$3
rm -rf "$work"
mkdir -p "$work"
fail() {
    echo "FAIL: $*" >&2
    exit 1
}
step() { echo "== $*"; }

step "cpack"
(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/cpack" >"$work/cpack.log" 2>&1) ||
    { cat "$work/cpack.log" >&2; fail "cpack failed"; }
deb=$(ls "$work"/cpack/strata_*.deb 2>/dev/null | head -1)
[ -n "$deb" ] || fail "cpack wrote no strata_*.deb (see $work/cpack.log)"
echo "package: $(basename "$deb") ($(du -h "$deb" | cut -f1))"

step "declared dependencies"
depends=$(dpkg-deb -f "$deb" Depends)
recommends=$(dpkg-deb -f "$deb" Recommends)
echo "Depends: $depends"
echo "Recommends: $recommends"
for dep in libvulkan1 libqt6widgets6 libqt6gui6 libqt6core6 libqt6svg6 qt6-qpa-plugins libc6; do
    grep -Eq "(^|, )$dep( |,|$)" <<<"$depends" || fail "Depends lacks $dep"
done
grep -q mesa-vulkan-drivers <<<"$recommends" || fail "Recommends lacks mesa-vulkan-drivers"
[ "$(dpkg-deb -f "$deb" Version)" = "$version" ] || fail "version is $(dpkg-deb -f "$deb" Version), not $version"

step "files"
dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|' >"$work/files.txt"
for f in /usr/bin/strata /usr/bin/strata-cli \
    /usr/share/applications/io.github.strata.Strata.desktop \
    /usr/share/metainfo/io.github.strata.Strata.metainfo.xml \
    /usr/share/icons/hicolor/scalable/apps/io.github.strata.Strata.svg \
    /usr/share/man/man1/strata.1 /usr/share/man/man1/strata-cli.1 \
    /usr/share/strata/tokenizer.json /usr/share/doc/strata/copyright; do
    grep -qx "$f" "$work/files.txt" || fail "the package lacks $f"
done
for size in 16 32 48 64 128 256; do
    grep -qx "/usr/share/icons/hicolor/${size}x${size}/apps/io.github.strata.Strata.png" "$work/files.txt" ||
        fail "the package lacks the ${size}x${size} icon"
done
if grep -Eq '\.safetensors$|\.gguf$|/demo/' "$work/files.txt"; then fail "the package carries a model blob"; fi

step "unpack into a clean root"
root=$work/root
dpkg -x "$deb" "$root"
[ -x "$root/usr/bin/strata-cli" ] || fail "no executable usr/bin/strata-cli after dpkg -x"

if command -v desktop-file-validate >/dev/null; then
    desktop-file-validate "$root/usr/share/applications/io.github.strata.Strata.desktop" || fail "desktop entry invalid"
else
    echo "desktop-file-validate missing (apt-get install desktop-file-utils): skipped"
fi
command -v appstreamcli >/dev/null || fail "appstreamcli missing (apt-get install appstream)"
appstreamcli validate --no-net "$root/usr/share/metainfo/io.github.strata.Strata.metainfo.xml" ||
    fail "metainfo invalid"
file "$root/usr/share/icons/hicolor/256x256/apps/io.github.strata.Strata.png" | grep -q "256 x 256" ||
    fail "the 256x256 icon is not 256 x 256"

# The installed programs, with a fresh home and no source-checkout cache: they must find what the package
# installed (the tokenizer under usr/share/strata, beside usr/bin).
home=$work/home
mkdir -p "$home" "$work/runtime"
chmod 700 "$work/runtime"
run() {
    env -u STRATA_CACHE_DIR HOME="$home" XDG_CONFIG_HOME="$home/.config" XDG_DATA_HOME="$home/.local/share" \
        XDG_CACHE_HOME="$home/.cache" XDG_RUNTIME_DIR="$work/runtime" "$@"
}
cli=$root/usr/bin/strata-cli

if command -v man >/dev/null; then
    for page in strata strata-cli; do
        # Only groff's own warnings count (a container may also complain about its locale).
        warnings=$(LC_ALL=C.UTF-8 MANWIDTH=100 man --warnings -l "$root/usr/share/man/man1/$page.1" 2>&1 >/dev/null |
            grep -i "warning" || true)
        [ -z "$warnings" ] || fail "$page.1 renders with warnings: $warnings"
    done
fi

step "strata-cli --version, --help and every command's --help"
run "$cli" --version | grep -qx "strata-cli $version" || fail "strata-cli --version is not 'strata-cli $version'"
run "$cli" --help >"$work/help.txt"
commands=$(grep -E '^  [a-z][a-z-]+( |$)' "$work/help.txt" | awk '{print $1}')
[ "$(wc -w <<<"$commands")" -ge 8 ] || fail "strata-cli --help lists too few commands: $commands"
cli_man=$root/usr/share/man/man1/strata-cli.1
for c in $commands; do
    out=$(run "$cli" "$c" --help) || fail "strata-cli $c --help failed"
    grep -q "^usage: strata-cli $c" <<<"$out" || fail "strata-cli $c --help: $out"
    grep -qF -- ".B ${c//-/\\-}" "$cli_man" || fail "strata-cli.1 does not describe $c"
done
for opt in --model --backend --device --out --tokenizer; do
    grep -q -- "$opt" "$work/help.txt" || fail "strata-cli --help does not describe $opt"
done
echo "commands: $(echo $commands)"

step "make-demo with the packaged tokenizer, then info"
run "$cli" make-demo --out "$work/demo" >"$work/make-demo.json"
run "$cli" info --model "$work/demo" >"$work/info.json"
grep -q '"trained": true' "$work/make-demo.json" || fail "make-demo did not write the trained model (is the blob embedded?)"
grep -q '"demo": true' "$work/info.json" || fail "info does not call the model a demonstration: $(head -c 400 "$work/info.json")"
grep -q '"format": "huggingface"' "$work/info.json" || grep -q '"format"' "$work/info.json" || fail "info has no format"
cmp -s "$root/usr/share/strata/tokenizer.json" "$work/demo/tokenizer.json" || fail "the demo was not made from the packaged tokenizer"

step "no Vulkan driver at all: devices says so, forward runs on the CPU"
novk=(env VK_ICD_FILENAMES=/nonexistent/icd.json VK_DRIVER_FILES=/nonexistent/icd.json)
run "${novk[@]}" "$cli" devices >"$work/devices.json" 2>"$work/devices.err" || fail "devices failed without a driver"
grep -q '^\[\]$' "$work/devices.json" || fail "devices without a driver printed $(cat "$work/devices.json")"
grep -qi "no usable Vulkan device" "$work/devices.err" || fail "devices without a driver said: $(cat "$work/devices.err")"
grep -qi "CPU" "$work/devices.err" || fail "devices without a driver does not point to the CPU backend"
run "${novk[@]}" "$cli" forward --model "$work/demo" --text "The llama" --top-k 1 >/dev/null || fail "forward on the CPU failed"
if run "${novk[@]}" "$cli" forward --model "$work/demo" --text "The llama" --backend vulkan >/dev/null 2>"$work/vk.err"; then
    fail "forward --backend vulkan without a driver did not fail"
fi
grep -q -- "--backend cpu" "$work/vk.err" || fail "forward --backend vulkan without a driver said: $(cat "$work/vk.err")"

step "strata --help, --version (no display needed) and the man page"
gui=$root/usr/bin/strata
run "$gui" --version | grep -q "$version" || fail "strata --version"
QT_QPA_PLATFORM=offscreen run "$gui" --help >"$work/strata-help.txt" || fail "strata --help failed"
for opt in --backend --device --prompt --screenshot-dir --help --version; do
    grep -q -- "$opt" "$work/strata-help.txt" || fail "strata --help lacks $opt"
    grep -qF -- "${opt//-/\\-}" "$root/usr/share/man/man1/strata.1" || fail "strata.1 lacks $opt"
done
if grep -q -- "--help-man" "$work/strata-help.txt"; then fail "strata --help shows the hidden --help-man"; fi

# On success only the package and the logs stay (a failure leaves everything to look at).
rm -rf "$root" "$work/demo" "$home" "$work/runtime"
echo "packaging: deb passed"
