#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Builds the ptpmu module for one kernel from an unpacked Debian headers
# tree, and prints the path of the .ko.
#
#   tests/vm/ptpmu/build.sh HEADERS_AMD64_DIR OUTDIR
#
# HEADERS_AMD64_DIR: an unpacked linux-headers-KVER-amd64 directory, with its
#   linux-headers-KVER-common sibling and, for the relative scripts/ and
#   tools/ links, usr/lib/linux-kbuild-* where dpkg-deb -x put them.
# OUTDIR: where ptpmu.ko goes (created); the build happens in a temporary
#   copy, so neither the source tree nor the headers tree is written.
#
# Debian's amd64 Makefile is one line, "include /usr/src/linux-headers-
# KVER-common/Makefile", an absolute path: the copy's Makefile includes the
# unpacked -common tree instead. Kbuild then takes srctree from that
# Makefile's own directory and objtree from the copy. One job (make -j1).
set -eu

if [ $# -ne 2 ]; then
  echo "usage: $0 HEADERS_AMD64_DIR OUTDIR" >&2
  exit 2
fi
src=$(cd "$(dirname "$0")" && pwd)
hdr=$(cd "$1" && pwd)
mkdir -p "$2"
out=$(cd "$2" && pwd)

# The -common tree the Makefile names: as installed if it exists there,
# else the sibling of the amd64 tree with the same name.
inc=$(sed -n 's/^include[[:space:]]*//p' "$hdr/Makefile" | head -n 1)
if [ -z "$inc" ]; then
  echo "$0: $hdr/Makefile has no include line" >&2
  exit 1
fi
common_name=$(basename "$(dirname "$inc")")
if [ -f "$(dirname "$hdr")/$common_name/Makefile" ]; then
  common=$(cd "$(dirname "$hdr")/$common_name" && pwd)
elif [ -f "$inc" ]; then
  common=$(dirname "$inc")
else
  echo "$0: cannot find $common_name beside $hdr" >&2
  exit 1
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptpmu-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The amd64 tree with its links made absolute (they are relative to it).
mkdir "$tmp/kdir"
for f in "$hdr"/* "$hdr"/.config "$hdr"/.kernelvariables; do
  [ -e "$f" ] || continue
  name=$(basename "$f")
  if [ "$name" = Makefile ]; then
    continue
  elif [ "$name" = vmlinux ] && ! command -v pahole > /dev/null; then
    # 6.12 ships vmlinux for the modules' BTF, which needs pahole
    # (dwarves); without it Kbuild skips BTF when vmlinux is absent.
    continue
  elif [ -L "$f" ] || [ -d "$f" ]; then
    ln -s "$(readlink -f "$f")" "$tmp/kdir/$name"
  else
    cp "$f" "$tmp/kdir/$name"
  fi
done
echo "include $common/Makefile" > "$tmp/kdir/Makefile"

mkdir "$tmp/mod"
cp "$src/Kbuild" "$src/ptpmu.c" "$src/pt_packets.h" "$tmp/mod/"
make -j1 -C "$tmp/kdir" M="$tmp/mod" modules > "$tmp/build.log" 2>&1 || {
  cat "$tmp/build.log" >&2
  exit 1
}
# Warnings stay visible.
grep -E 'warning|error' "$tmp/build.log" >&2 || true
cp "$tmp/mod/ptpmu.ko" "$out/ptpmu.ko"
echo "$out/ptpmu.ko"
