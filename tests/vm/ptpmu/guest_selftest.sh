#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
# Runs inside the guest (busybox sh, as root): loads the ptpmu module, checks
# the intel_pt PMU's sysfs files against pt.c and Kaby Lake, records with
# ptpmu_selftest in full and snapshot mode, user/kernel/both scopes, per task
# and per CPU, and drives the fault-injection parameters. Ends with one line
# "ptpmu-guest: N passed, M failed (KERNEL)".
#
#   guest_selftest.sh [KO] [SELFTEST] [ONLY]
# (defaults: /ptpmu.ko, ptpmu_selftest on PATH; ONLY: a grep pattern, the
# recording and fault tests whose names do not match it are skipped)
ko=${1:-/ptpmu.ko}
st=${2:-ptpmu_selftest}
only=${3:-.}
pmu=/sys/bus/event_source/devices/intel_pt
par=/sys/module/ptpmu/parameters
kernel=$(uname -r)
pass=0
fail=0

ok() { pass=$((pass + 1)); echo "ptpmu-guest: ok $*"; }
bad() { fail=$((fail + 1)); echo "ptpmu-guest: FAIL $*"; }
# expect NAME WANT GOT
expect() { if [ "$2" = "$3" ]; then ok "$1"; else bad "$1: want '$2', got '$3'"; fi; }
# run NAME ARGS...: ptpmu_selftest must print "result PASS"
run() {
  name=$1
  shift
  echo "$name" | grep -q -- "$only" || return 0
  # A drop an earlier run left unspent (it ended before N more PTWs were
  # written, as under load) would land in this one.
  echo 0 > $par/drop_ptws
  out=$("$st" "$@" 2>&1)
  echo "$out" | sed "s/^/  [$name] /"
  if echo "$out" | grep -q '^result PASS'; then ok "$name"; else bad "$name"; fi
}
# refused NAME WANT_LINE ARGS...: the selftest must print WANT_LINE
refused() {
  name=$1
  want=$2
  shift 2
  echo "$name" | grep -q -- "$only" || return 0
  out=$("$st" "$@" 2>&1)
  echo "$out" | sed "s/^/  [$name] /"
  if echo "$out" | grep -q "^$want"; then ok "$name"; else bad "$name: no '$want'"; fi
}

mountpoint -q /sys/kernel/debug 2>/dev/null || mount -t debugfs none /sys/kernel/debug 2>/dev/null
if insmod "$ko"; then ok "insmod"; else bad "insmod $ko"; echo "ptpmu-guest: $pass passed, $fail failed ($kernel)"; exit 1; fi

# sysfs: type, format/ as pt.c declares, caps/ as a Kaby Lake reports.
[ -r $pmu/type ] && ok "type $(cat $pmu/type)" || bad "no $pmu/type"
for f in pt:config:0 cyc:config:1 pwr_evt:config:4 fup_on_ptw:config:5 mtc:config:9 \
    tsc:config:10 noretcomp:config:11 ptw:config:12 branch:config:13 event:config:31 \
    notnt:config:55 mtc_period:config:14-17 cyc_thresh:config:19-22 psb_period:config:24-27; do
  expect "format/${f%%:*}" "${f#*:}" "$(cat $pmu/format/${f%%:*} 2>/dev/null)"
done
expect "format count" 14 "$(ls $pmu/format | wc -l)"
for c in max_subleaf:1 cr3_filtering:1 psb_cyc:1 ip_filtering:1 mtc:1 ptwrite:0 \
    power_event_trace:0 event_trace:0 tnt_disable:0 topa_output:1 topa_multiple_entries:1 \
    single_range_output:1 output_subsys:0 payloads_lip:0 num_address_ranges:2 \
    mtc_periods:249 cycle_thresholds:3fff psb_periods:3f; do
  expect "caps/${c%%:*}" "${c#*:}" "$(cat $pmu/caps/${c%%:*} 2>/dev/null)"
done
expect "caps count" 18 "$(ls $pmu/caps | wc -l)"
expect nr_addr_filters 2 "$(cat $pmu/nr_addr_filters 2>/dev/null)"
expect max_nonturbo_ratio 36 "$(cat $pmu/max_nonturbo_ratio 2>/dev/null)"
expect tsc_art_ratio 300:2 "$(cat $pmu/tsc_art_ratio 2>/dev/null)"

# Recording.
run full-user --aux-kib 1024 --ms 50
run full-user-psb0 --aux-kib 1024 --ms 50 --psb-period 0
run full-small-drained --aux-kib 16 --ms 300
run full-kernel --kernel --aux-kib 1024 --ms 50
run full-both --both --aux-kib 1024 --ms 50
run full-cpu0 --cpu 0 --both --aux-kib 1024 --ms 50
# A snapshot must be larger than the PSB period (2^(psb_period+11) bytes)
# to be sure to hold a PSB, as on hardware: psb_period 1 (4 KiB) for 16 KiB.
run snapshot-16k --snapshot --aux-kib 16 --ms 400 --psb-period 1 --expect-wrap
run snapshot-32k-psb3 --snapshot --aux-kib 32 --ms 1000 --expect-wrap
run snapshot-1m --snapshot --aux-kib 1024 --ms 50
run snapshot-cpu1 --snapshot --cpu 1 --aux-kib 16 --ms 500 --psb-period 1 --expect-wrap
run full-switching --aux-kib 1024 --ms 100 --sleep-us 300 --psb-period 0 --both --dump
run snapshot-switching --snapshot --aux-kib 16 --ms 400 --sleep-us 300 --psb-period 1 --expect-wrap --dump

# Fault injection.
run full-drop5 --aux-kib 1024 --ms 100 --drop 5
# Not a check: whether ENABLE alone restarts the event after TRUNCATED on
# each CPU (it depends on the kernel's pending_disable handling).
for c in 0 1; do
  if echo "plain-reenable" | grep -q -- "$only"; then
    "$st" --cpu $c --aux-kib 1024 --ms 100 --drop 5 --plain-reenable |
      sed -n "s/^ptw .* after_gap \([0-9]*\)/ptpmu-guest: info plain ENABLE after TRUNCATED, cpu $c: \1 PTWs after the drop/p"
  fi
done
echo 4 > $par/drop_aux_flags
run full-drop5-partial --aux-kib 1024 --ms 100 --drop 5
echo 1 > $par/drop_aux_flags
refused ptw-refused "open_errno 22" --term ptw=1
refused mtc-period-refused "open_errno 22" --term mtc=1 --term mtc_period=1
echo 95 > $par/refuse_event_init
refused init-refused "open_errno 95" --ms 1
echo 0 > $par/refuse_event_init
echo 1 > $par/refuse_setup_aux
refused setup-aux-refused "mmap_aux_errno" --ms 1
echo 0 > $par/refuse_setup_aux
echo 65536 > $par/max_aux_bytes
refused max-aux-refused "mmap_aux_errno" --aux-kib 128 --ms 1
run max-aux-fits --aux-kib 64 --ms 20
echo 0 > $par/max_aux_bytes
seq=$(cat $par/last_seq)
[ "$seq" -gt 0 ] && ok "last_seq $seq" || bad "last_seq $seq"

if rmmod ptpmu; then ok rmmod; else bad rmmod; fi
echo "ptpmu-guest: $pass passed, $fail failed ($kernel)"
