#!/bin/bash
# The installed library as its users see it: `meson install` into a scratch
# root, then the examples (examples/) built out of tree with pkg-config and
# run against it, the exported symbols and the SONAME checked.
# Env (tests/api/meson.build): MESON_BUILD_ROOT, MESON_SOURCE_ROOT, EMU_FIB.
# Exit 77 (skip, with the reason) when a tool it needs is missing.
set -euo pipefail

skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*"
  exit 1
}

: "${MESON_BUILD_ROOT:?}" "${MESON_SOURCE_ROOT:?}" "${EMU_FIB:?}"
for tool in meson pkg-config cc c++ nm readelf c++filt; do
  command -v "$tool" >/dev/null || skip "$tool not found in PATH"
done
command -v "${PTSNAP_QEMU:-qemu-x86_64}" >/dev/null ||
  skip "qemu-x86_64 not found: the examples record under the emulator"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptsnap-install.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
dest=$tmp/dest

echo "== meson install --destdir $dest"
meson install -C "$MESON_BUILD_ROOT" --destdir "$dest" --no-rebuild --quiet >"$tmp/install.log" 2>&1 ||
  { cat "$tmp/install.log"; fail "meson install"; }

pc=$(find "$dest" -name ptsnap.pc | head -n 1)
[ -n "$pc" ] || fail "no ptsnap.pc installed"
# The .pc names the real prefix; the sysroot prepends the scratch root to
# its -I and -L paths.
export PKG_CONFIG_PATH=$(dirname "$pc")
export PKG_CONFIG_SYSROOT_DIR=$dest
libdir=$(pkg-config --variable=libdir ptsnap)
case $libdir in "$dest"/*) ;; *) libdir=$dest$libdir ;; esac  # pkgconf adds the sysroot, pkg-config not
so=$libdir/libptsnap.so.0
[ -e "$so" ] || fail "$so not installed"
[ -e "$libdir/ptsnap/libptsnap_qemu.so" ] || fail "the emulator plugin is not in $libdir/ptsnap"
echo "cflags: $(pkg-config --cflags ptsnap)"
echo "libs:   $(pkg-config --libs ptsnap)"

echo "== SONAME and exported symbols"
readelf -d "$so" | grep -q 'SONAME.*\[libptsnap\.so\.0\]' || fail "SONAME is not libptsnap.so.0"
# nm -D prints versioned names (ptsnap_version@@PTSNAP_0): drop the version.
nm -D --defined-only "$so" | awk '{print $3}' | sed 's/@.*//' | c++filt >"$tmp/symbols"
grep -q '^ptsnap_recording_create$' "$tmp/symbols" || fail "ptsnap_recording_create not exported"
grep -q '^ptsnap::Recording::Create(' "$tmp/symbols" || fail "ptsnap::Recording::Create not exported"
if grep -Ev '^(PTSNAP_0$|ptsnap_[a-z_0-9]+$|ptsnap::(Probe|ProbeCheck|ProbeResult|Version|Recording|Decoder|DecodeSummary|Error)(\(|::))' \
  "$tmp/symbols" >"$tmp/stray"; then
  head -n 20 "$tmp/stray"
  fail "libptsnap.so exports $(wc -l <"$tmp/stray") symbol(s) outside the API (above)"
fi
grep -q '^ptsnap::\(record\|decode\|session\|base\|emulate\|capi\)::' "$tmp/symbols" &&
  fail "internal namespaces exported"
echo "$(wc -l <"$tmp/symbols") symbols, all ptsnap_* or the public classes"

echo "== C header alone as C99"
cc -std=c99 -Wall -Wextra -pedantic -Werror -fsyntax-only $(pkg-config --cflags ptsnap) \
  -x c - <<<'#include <ptsnap/ptsnap.h>' || fail "ptsnap/ptsnap.h is not C99"

echo "== each installed C++ header on its own"
for h in "$dest"$(pkg-config --variable=includedir ptsnap | sed "s|^$dest||")/ptsnap/*.h; do
  c++ -std=c++20 -Wall -Werror -fsyntax-only $(pkg-config --cflags ptsnap) -x c++ - \
    <<<"#include <ptsnap/$(basename "$h")>" || fail "ptsnap/$(basename "$h") does not compile alone"
done

# Copies of the examples, built outside the source tree.
cp -r "$MESON_SOURCE_ROOT/examples" "$tmp/examples"
unset PTSNAP_QEMU_PLUGIN  # the library finds its plugin beside itself
cd "$tmp"                 # the examples' default trace directory lands here
export LD_LIBRARY_PATH=$libdir
run_with_snap() {  # out-file command...: feeds "snap" once the program runs
  local out=$1
  shift
  local rc=0
  { sleep 2; echo snap; } | timeout 240 "$@" >"$out" 2>&1 || rc=$?
  [ "$rc" = 0 ] || { cat "$out"; fail "$* exited $rc"; }
  cat "$out"
}
expect_fib() {
  grep -Eq '^ +fib +[0-9]+ calls' "$1" || fail "$1: fib is not among the hottest functions"
}

echo "== C++ agent (shared)"
"$tmp/examples/agent/build.sh"
AGENT_TRACE_DIR=$tmp/agent.ptsnap run_with_snap "$tmp/agent.out" "$tmp/examples/agent/agent" "$EMU_FIB" 40
expect_fib "$tmp/agent.out"

echo "== C example"
"$tmp/examples/c/build.sh"
run_with_snap "$tmp/c.out" "$tmp/examples/c/top" "$EMU_FIB" 40
expect_fib "$tmp/c.out"

echo "== C++ agent (static, pkg-config --static)"
rm -f "$tmp/examples/agent/agent"
"$tmp/examples/agent/build.sh" --static
readelf -d "$tmp/examples/agent/agent" | grep -q 'NEEDED.*libptsnap' &&
  fail "the static agent still needs libptsnap.so"
# Statically linked, the library looks for its plugin beside the agent.
PTSNAP_QEMU_PLUGIN=$libdir/ptsnap/libptsnap_qemu.so LD_LIBRARY_PATH= \
  run_with_snap "$tmp/static.out" "$tmp/examples/agent/agent" "$EMU_FIB" 40
expect_fib "$tmp/static.out"

echo "== Python (ctypes)"
if command -v python3 >/dev/null; then
  PTSNAP_LIB=$so timeout 240 python3 "$tmp/examples/python/ptsnap_example.py" "$EMU_FIB" 22 \
    >"$tmp/py.out" 2>&1 || { cat "$tmp/py.out"; fail "python example"; }
  cat "$tmp/py.out"
  expect_fib "$tmp/py.out"
else
  skip "python3 not found (the C and C++ examples passed)"
fi
echo "PASS"
