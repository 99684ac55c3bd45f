#!/bin/sh
# Builds the .deb packages from the build tree (cpack), unpacks them into a temporary root
# (dpkg -x: no root needed), and runs what was installed: `switchyard serve` from the unpacked
# path against a made model (curl /health and a completion), a sim demo that needs the
# installed assets, no source-tree path in the binaries, and the desktop entry validated.
# Usage: test_deb.sh BUILD_DIR SOURCE_DIR
set -eu
build=$1
src=$2
work=$(mktemp -d "${TMPDIR:-/tmp}/sy_test_deb.XXXXXX")
server=""
cleanup() {
  [ -n "$server" ] && kill "$server" 2>/dev/null && wait "$server" 2>/dev/null
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

for tool in cpack dpkg curl strings desktop-file-validate; do
  command -v $tool >/dev/null || fail "$tool is missing (scripts/build.sh installs it)"
done

(cd "$work" && cpack -G DEB --config "$build/CPackConfig.cmake" -B "$work/out" >"$work/cpack.log" 2>&1) ||
  { cat "$work/cpack.log"; fail "cpack"; }
deb=$(ls "$work"/out/switchyard_*.deb) || fail "no switchyard .deb"
console_deb=$(ls "$work"/out/switchyard-console_*.deb) || fail "no switchyard-console .deb"
dpkg-deb --info "$deb" | grep -q "Depends:" || fail "the switchyard package declares no dependencies"
root="$work/root"
dpkg -x "$deb" "$root"
dpkg -x "$console_deb" "$root"
bin="$root/usr/bin/switchyard"
[ -x "$bin" ] || fail "no usr/bin/switchyard in the package"
[ -x "$root/usr/bin/switchyard-console" ] || fail "no usr/bin/switchyard-console in the package"
[ -f "$root/usr/share/switchyard/assets/hardware/h100.toml" ] || ls "$root/usr/share/switchyard/assets/hardware" >/dev/null ||
  fail "no assets under usr/share/switchyard"
[ -d "$root/usr/share/switchyard/layouts" ] || fail "no layouts under usr/share/switchyard"

for b in "$bin" "$root/usr/bin/switchyard-console"; do
  if strings "$b" | grep -F "$src" >/dev/null; then
    strings "$b" | grep -F "$src" | head -5
    fail "$(basename "$b") holds a path of the source tree"
  fi
done

desktop-file-validate "$root/usr/share/applications/switchyard-console.desktop" || fail "desktop entry"
[ -f "$root/usr/share/icons/hicolor/scalable/apps/switchyard.svg" ] || fail "no icon"

# The installed binary finds its own assets (named model shape and hardware profile) and layouts.
unset SWITCHYARD_ASSETS SWITCHYARD_LAYOUTS
"$bin" --threads 1 demo --backend sim --duration 0.5 --pace 0 --no-telemetry --no-console \
  --layout colocated-4 >"$work/demo.log" 2>&1 || { cat "$work/demo.log"; fail "sim demo from the installed path"; }

"$bin" --threads 1 make-model --arch mixtral --preset tiny --seed 1 --dtype f32 --out "$work/model" >/dev/null
# The log exists before the server starts: the loop below may read it before the background
# shell has opened it (under load it did, and set -e ended the test on sed's error).
: >"$work/serve.log"
"$bin" --threads 1 serve --model "$work/model" --port 0 --no-telemetry --no-console >>"$work/serve.log" 2>&1 &
server=$!
url=""
for _ in $(seq 1 300); do
  url=$(sed -n 's|.*API at \(http://[^ ]*\)/v1 .*|\1|p' "$work/serve.log")
  [ -n "$url" ] && break
  kill -0 "$server" 2>/dev/null || { cat "$work/serve.log"; fail "serve exited"; }
  sleep 0.1
done
[ -n "$url" ] || { cat "$work/serve.log"; fail "serve did not say where it listens"; }
curl -sf "$url/health" | grep -q '"ok"' || fail "GET /health"
answer=$(curl -sf "$url/v1/completions" -H 'Content-Type: application/json' \
  -d '{"prompt": [1, 2, 3, 4], "max_tokens": 8, "temperature": 0}') || fail "POST /v1/completions"
expected=$("$bin" --threads 1 generate --model "$work/model" --tokens 1,2,3,4 --max-new-tokens 8)
echo "$answer" | grep -qF "\"token_ids\":$expected" || fail "completion $answer does not hold the greedy tokens $expected"
kill -TERM "$server"
wait "$server" || fail "serve did not end cleanly on SIGTERM"
server=""
grep -q "interrupted:" "$work/serve.log" || fail "no summary after SIGTERM"
echo "ok: packages $(basename "$deb") and $(basename "$console_deb") install and serve"
