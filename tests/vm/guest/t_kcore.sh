# The kcore copy from the real /proc/kcore, and the sideband that keeps it
# true (TEXT_POKE for static keys and tracepoints, KSYMBOL for BPF), read
# independently of ptsnap with kcore_peek.

# ksym NAME: the address kallsyms gives NAME, as 0x...
ksym() { echo "0x$(grep -m1 -E " [A-Za-z] $1\$" /proc/kallsyms | cut -d' ' -f1)"; }

# read_live DIR: write the live bytes of every segment of DIR's kcore copy to
# /tmp/live.VADDR (run by the traced program itself, as its last act, so that
# nothing the recording's own teardown changes is read).
read_live() {
  kcore_peek "$1/kcore/kcore" segments | while read va sz off; do
    kcore_peek /proc/kcore raw $va $sz >/tmp/live.$va
  done
}

# check_copy DIR: the copy's segments are kernel text or the module area only,
# and each, with every TEXT_POKE the recording holds applied in time order,
# equals the live bytes read_live saved. Sets POKES_APPLIED, BYTES_POKED.
check_copy() {
  local dir=$1 stext etext mlo mhi
  stext=$(($(ksym _stext) & ~4095)) etext=$(( ($(ksym _etext) + 4095) & ~4095 ))
  # The module area: the PT_LOAD of /proc/kcore that holds the first module
  # (on 6.4+ a module's text, data and rodata are separate allocations in it).
  local mod
  mod=$(awk '{print $6; exit}' /proc/modules)
  mlo= mhi=
  [ -n "$mod" ] && while read va sz off; do
    [ $((mod)) -ge $((va)) ] && [ $((mod)) -lt $((va + sz)) ] && { mlo=$((va)); mhi=$((va + sz)); }
  done <<EOT
$(kcore_peek /proc/kcore segments)
EOT
  ptsnap info "$dir" --records 2>/dev/null | grep -o 'TEXT_POKE 0x[0-9a-f]* old [0-9a-f]* new [0-9a-f]*' >/tmp/pokes
  POKES_APPLIED=0 BYTES_POKED=0
  kcore_peek "$dir/kcore/kcore" segments >/tmp/segs || { fail "the copy is no ELF kcore"; return 1; }
  [ -s /tmp/segs ] || { fail "the copy has no segment"; return 1; }
  while read va sz off; do
    local lo=$((va)) hi=$((va + sz))
    if [ $lo -ge $stext ] && [ $hi -le $etext ]; then :
    elif [ -n "$mlo" ] && [ $lo -ge $mlo ] && [ $hi -le $mhi ]; then :
    else fail "copied segment $va+$sz is neither kernel text nor in the module area"; return 1
    fi
    kcore_peek "$dir/kcore/kcore" raw $va $sz >/tmp/copy.bin || { fail "reading the copy at $va"; return 1; }
    [ -f /tmp/live.$va ] || { fail "no live read of $va"; return 1; }
    while read _ addr _ old _ new; do
      local at=$(( addr - lo ))
      [ $at -ge 0 ] && [ $at -lt $((sz)) ] || continue
      printf "$(echo $new | sed 's/../\\x&/g')" | dd of=/tmp/copy.bin bs=1 seek=$at conv=notrunc 2>/dev/null
      POKES_APPLIED=$((POKES_APPLIED + 1)) BYTES_POKED=$((BYTES_POKED + ${#new} / 2))
    done </tmp/pokes
    # Every byte must be equal but a module's data (the module area's copy
    # reaches from its lowest to its highest symbol, data included, and data
    # changes: ptpmu's own last_seq): there the symbol at or below the byte
    # is a data symbol (b, d, r).
    cmp -l /tmp/copy.bin /tmp/live.$va | while read at _ _; do
      printf '%x\n' $((lo + at - 1))
    done >/tmp/diffs
    if [ -s /tmp/diffs ]; then
      bad=$( (sed 's/$/ ~/' /tmp/diffs; cut -d' ' -f1,2 /proc/kallsyms) | sort |
        awk '$2 != "~" {type=$2; next} type !~ /^[bBdDrR]$/ {print $1; exit}')
      [ -z "$bad" ] || {
        fail "copy + $POKES_APPLIED TEXT_POKEs differs from the live text at 0x$bad ($(wc -l </tmp/diffs) bytes differ in $va+$sz)"
        return 1
      }
      DATA_BYTES=$(( ${DATA_BYTES:-0} + $(wc -l </tmp/diffs) ))
    fi
    rm -f /tmp/copy.bin /tmp/live.$va
  done </tmp/segs
}

t_kcore_copy() {
  load_pmu || return 1
  rec /tmp/k --trace-include-kernel -- sh -c '. /vm/suite/t_kcore.sh; vm_spin 100; read_live /tmp/k' ||
    { fail "run failed: $(tail -3 /tmp/k.log)"; return 1; }
  for f in kcore kallsyms modules; do
    [ "$(stat -c %a /tmp/k/kcore/$f)" = 600 ] || { fail "kcore/$f has mode $(stat -c %a /tmp/k/kcore/$f), not 0600"; return 1; }
  done
  check_copy /tmp/k || return 1
  echo "$(wc -l </tmp/segs) segments ($(awk '{s+=$2} END {print s}' /tmp/segs) bytes): kernel text and modules only, equal to /proc/kcore with $POKES_APPLIED TEXT_POKEs applied (module data that changed: ${DATA_BYTES:-0} bytes); mode 0600"
}
vm_test kcore-copy t_kcore_copy

# The traced program of text-poke: changes a static key, a tracepoint and loads
# a BPF program while it is traced, then reads the live text.
poke_and_read() {
  local ev=/sys/kernel/tracing/events/sched/sched_switch/enable
  vm_spin 200
  echo 1 >/proc/sys/kernel/sched_schedstats
  echo 1 >$ev
  bpf_load 1 >/tmp/bpf.log 2>&1
  echo 0 >$ev
  echo 0 >/proc/sys/kernel/sched_schedstats
  vm_spin 200
  read_live /tmp/p
}

t_text_poke() {
  load_pmu || return 1
  [ -w /sys/kernel/tracing/events/sched/sched_switch/enable ] || { fail "no tracefs at /sys/kernel/tracing"; return 1; }
  rec /tmp/p --trace-include-kernel -- sh -c '. /vm/suite/lib.sh; . /vm/suite/t_kcore.sh; poke_and_read' ||
    { fail "run failed: $(tail -3 /tmp/p.log)"; return 1; }
  grep -q 'loaded bpf program' /tmp/bpf.log || { fail "loading a BPF program: $(cat /tmp/bpf.log)"; return 1; }
  ptsnap info /tmp/p --records >/tmp/r.txt 2>&1 || { fail "info --records failed: $(tail -3 /tmp/r.txt)"; return 1; }
  local pokes ksyms
  pokes=$(grep -c 'TEXT_POKE ' /tmp/r.txt)
  ksyms=$(grep 'KSYMBOL ' /tmp/r.txt | grep -c ptsnap_vm)
  [ "$pokes" -gt 0 ] || { fail "no TEXT_POKE record although a static key and a tracepoint changed"; return 1; }
  [ "$ksyms" -gt 0 ] || { fail "no KSYMBOL record for the BPF program ptsnap_vm"; return 1; }
  check_copy /tmp/p || return 1
  echo "$pokes TEXT_POKE records ($BYTES_POKED bytes) make the copy equal the live text; $ksyms KSYMBOL for the BPF program"
}
vm_test text-poke t_text_poke

# Debian's perf records the same program with --kcore: its kcore_dir and
# ptsnap's kcore/ hold the same kernel text (but where either recording's
# TEXT_POKE records say the text changed, and in module data).
t_perf_kcore() {
  load_pmu || return 1
  command -v perf >/dev/null || { fail "perf is not in the guest (the host has no /usr/bin/perf: tools/dev installs linux-perf)"; return 1; }
  rm -rf /tmp/pd
  perf record -q -e intel_pt//u --kcore -o /tmp/pd -- vm_spin 100 >/tmp/pd.log 2>&1 ||
    { fail "perf record --kcore failed: $(tail -3 /tmp/pd.log)"; return 1; }
  [ -f /tmp/pd/kcore_dir/kcore ] || { fail "perf wrote no kcore_dir/kcore: $(ls /tmp/pd)"; return 1; }
  rec /tmp/k --trace-include-kernel -- vm_spin 100 || { fail "run failed: $(tail -3 /tmp/k.log)"; return 1; }
  ptsnap info /tmp/k --records 2>/dev/null | grep -o 'TEXT_POKE 0x[0-9a-f]*' | cut -d' ' -f2 | sort -u >/tmp/poked
  local total=0 same=0 excused=0
  while read va sz off; do
    kcore_peek /tmp/pd/kcore_dir/kcore raw $va $sz >/tmp/perf.bin 2>/dev/null || continue
    kcore_peek /tmp/k/kcore/kcore raw $va $sz >/tmp/ours.bin
    total=$((total + sz))
    cmp -l /tmp/ours.bin /tmp/perf.bin | while read at _ _; do printf '%x\n' $((va + at - 1)); done >/tmp/diffs
    # A byte may differ within 8 bytes after a poked address, or in module
    # data (hex strings throughout: awk's numbers are doubles).
    while read a; do
      for i in 0 1 2 3 4 5 6 7; do printf '%x P\n' $((a + i)); done
    done </tmp/poked >/tmp/excused
    bad=$( (sed 's/$/ ~/' /tmp/diffs; cat /tmp/excused; cut -d' ' -f1,2 /proc/kallsyms) | sort |
      awk '$2 == "P" {p = $1; next}
           $2 != "~" {type = $2; next}
           $1 == p || type ~ /^[bBdDrR]$/ {next}
           {print $1; exit}')
    [ -z "$bad" ] || { fail "perf's kcore_dir and ptsnap's kcore/ differ at 0x$bad ($(wc -l </tmp/diffs) bytes in $va+$sz)"; return 1; }
    excused=$((excused + $(wc -l </tmp/diffs)))
  done <<EOT
$(kcore_peek /tmp/k/kcore/kcore segments)
EOT
  [ $total -gt 0 ] || { fail "no segment of ptsnap's copy is in perf's"; return 1; }
  echo "perf's kcore_dir and ptsnap's kcore/ agree on $total bytes ($excused differ at poked sites or in module data)"
}
vm_test perf-kcore t_perf_kcore
