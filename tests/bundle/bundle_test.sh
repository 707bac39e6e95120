#!/usr/bin/env bash
# The production bundle (tools/make-bundle) runs where nothing else exists:
# record a trace with the build tree's ptsnap under the emulator, then probe
# and decode it with the bundle's ptsnap in a chroot that holds only the
# unpacked bundle, the trace, and bind mounts of /proc and /sys. Also records
# once with the bundle itself (outside the chroot: qemu is not bundled) to
# check that its wrapper hands ptsnap the bundled emulator plugin.
#   bundle_test.sh MAKE_BUNDLE BUILD_DIR PTSNAP PROGRAM
# PROGRAM is tests/programs/emulate/emu_fib: its fib and deep must be decoded.
# Exit 77 (skipped) with the reason when not root or mounts are refused.
set -euo pipefail
make_bundle=$1 build_dir=$2 ptsnap=$3 program=$4

skip() { echo "SKIP: $*"; exit 77; }
fail() { echo "FAIL: $*"; exit 1; }
[ "$(id -u)" -eq 0 ] || skip "needs root for chroot and bind mounts (run the suite as root)"
command -v qemu-x86_64 >/dev/null || skip "qemu-x86_64 not found: the trace is recorded with --emulate (apt-get install qemu-user)"
unshare -m --propagation private true 2>/dev/null ||
  skip "unshare -m refused even as root (a container without CAP_SYS_ADMIN?)"

tmp=$(mktemp -d)
# --one-file-system: never follow a bind mount of /proc or /sys, should one outlive its namespace.
trap 'rm -rf --one-file-system "$tmp"' EXIT

"$make_bundle" "$build_dir" "$tmp/ptsnap.tar.gz"
root=$tmp/root
mkdir "$root"
tar -C "$root" -xzf "$tmp/ptsnap.tar.gz"
name=$(cd "$root" && echo ptsnap-*)
[ -x "$root/$name/bin/ptsnap" ] || fail "the bundle has no $name/bin/ptsnap"
echo "bundle $name: $(numfmt --to=iec --suffix=B "$(stat -c %s "$tmp/ptsnap.tar.gz")") compressed," \
  "$(numfmt --to=iec --suffix=B "$(du -sb "$root/$name" | cut -f1)") unpacked"

"$ptsnap" run --emulate --copy-binaries --no-decode --trace-dir "$tmp/T" -- "$program"
cp -a "$tmp/T" "$root/T"
mkdir "$root/proc" "$root/sys"
echo "chroot holds: $(cd "$root" && echo *)"

# The namespace's mounts go with it when its last process exits.
rc=0
# shellcheck disable=SC2016  # expanded by the inner bash, from its arguments
unshare -m --propagation private bash -euo pipefail -c '
  root=$1 bin=/$2/bin/ptsnap
  mount --bind /proc "$root/proc"
  mount --bind /sys "$root/sys"
  chroot "$root" "$bin" --version
  probe=0
  chroot "$root" "$bin" probe || probe=$?
  if [ "$probe" -ne 0 ] && [ "$probe" -ne 3 ]; then
    echo "FAIL: ptsnap probe in the chroot exited $probe (0 or 3 expected)"
    exit 1
  fi
  echo "probe exited $probe (3: no Intel PT here)"
  chroot "$root" "$bin" decode /T -o /out.json
' _ "$root" "$name" || rc=$?
[ "$rc" -eq 0 ] || fail "the bundle failed in the chroot (exit $rc)"

[ -s "$root/out.json" ] || fail "decode in the chroot wrote no /out.json"
for f in fib deep; do
  grep -q "\"ph\":\"X\",\"name\":\"$f\"" "$root/out.json" ||
    fail "/out.json has no slice of $f"
done
echo "decoded in the chroot: $(grep -c '"ph":"X"' "$root/out.json") slices, fib and deep among them"

# The wrapper sets PTSNAP_QEMU_PLUGIN (ptsnap cannot find its plugin through
# /proc/self/exe, which is the loader); the emulated printenv shows it.
want=$root/$name/lib/ptsnap/libptsnap_qemu.so
got=$(env -u PTSNAP_QEMU_PLUGIN "$root/$name/bin/ptsnap" run --emulate --no-decode \
  --trace-dir "$tmp/T2" -- printenv PTSNAP_QEMU_PLUGIN 2>/dev/null | head -1)
[ "$got" = "$want" ] || fail "the bundle's emulator plugin is '$got', not $want"
[ -s "$tmp/T2/manifest.json" ] || fail "the bundle's own emulated recording wrote no trace"
echo "PASS: the bundle probes and decodes in an empty chroot and records with its own plugin"
