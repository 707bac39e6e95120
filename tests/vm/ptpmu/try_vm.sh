#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Developer's loop for the ptpmu module, outside the VM suite: builds the
# module (build.sh) and ptpmu_selftest (gcc -static), boots KERNEL under QEMU
# with a busybox initramfs that runs guest_selftest.sh, prints the serial
# console. Needs qemu-system-x86_64 and a static busybox.
#
#   tests/vm/ptpmu/try_vm.sh VMLINUZ HEADERS_AMD64_DIR [BUSYBOX [ONLY]]
# ONLY: run only the guest tests whose names match this grep pattern.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
vmlinuz=$1
hdr=$2
busybox=${3:-/bin/busybox}
only=${4:-.}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/ptpmu-vm.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

ko=$("$here/build.sh" "$hdr" "$tmp/out")
mkdir -p "$tmp/root/bin" "$tmp/root/proc" "$tmp/root/sys" "$tmp/root/dev"
cp "$busybox" "$tmp/root/bin/busybox"
gcc -static -O2 -o "$tmp/root/bin/ptpmu_selftest" "$here/ptpmu_selftest.c"
cp "$here/guest_selftest.sh" "$tmp/root/bin/guest_selftest.sh"
cp "$ko" "$tmp/root/ptpmu.ko"
cat > "$tmp/root/init" <<'INIT'
#!/bin/busybox sh
/bin/busybox --install -s /bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
only=$(sed -n 's/.*ptpmu_only=\([^ ]*\).*/\1/p' /proc/cmdline)
sh /bin/guest_selftest.sh /ptpmu.ko /bin/ptpmu_selftest "${only:-.}"
poweroff -f
INIT
chmod +x "$tmp/root/init"
(cd "$tmp/root" && find . | cpio -o -H newc 2>/dev/null | gzip -1) > "$tmp/initrd.gz"
timeout 300 qemu-system-x86_64 -cpu max,vendor=GenuineIntel -m 1024 -smp 2 -nographic \
  -no-reboot -kernel "$vmlinuz" -initrd "$tmp/initrd.gz" \
  -append "console=ttyS0 panic=-1 quiet ptpmu_only=$only"
