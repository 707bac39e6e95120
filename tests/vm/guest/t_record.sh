# Recording through the intel_pt-shaped module (ptpmu) with the real perf
# core: the snapshot must hold exactly the newest bytes up to it. The module's
# payload counts (PTW packets numbered 1, 2, ...), so libipt's reading of a
# stream (aux_scan) tells what is there: contiguous, and ending where it must.

t_rec_user_exit() {
  load_pmu || return 1
  rec /tmp/t -- vm_spin 300 || { fail "ptsnap run failed: $(tail -3 /tmp/t.log)"; return 1; }
  [ "$(streams /tmp/t | wc -l)" = 1 ] || { fail "expected one stream: $(streams /tmp/t)"; return 1; }
  scan "$(streams /tmp/t)" || return 1
  [ "$SCAN_LAST" = "$(module_seq)" ] || { fail "snapshot at exit ends at PTW $SCAN_LAST, the module wrote up to $(module_seq)"; return 1; }
  [ "$SCAN_FIRST" = 1 ] || { fail "a 4 MiB ring lost the start of a 300 ms run: first PTW $SCAN_FIRST"; return 1; }
  grep -q '"aux_truncated": *0' /tmp/t/manifest.json || grep -vq aux_truncated /tmp/t/manifest.json ||
    { fail "manifest reports truncated AUX"; return 1; }
  ptsnap info /tmp/t --records >/tmp/r.txt 2>&1
  grep -q "ITRACE_START pid" /tmp/r.txt || { fail "no ITRACE_START record among the sideband: $(head -5 /tmp/r.txt)"; return 1; }
  # Snapshot mode: the kernel's AUX records carry OVERWRITE, the whole ring as size.
  grep -q "AUX offset 0x[0-9a-f]* size 0x400000 OVERWRITE" /tmp/r.txt ||
    { fail "no AUX record with OVERWRITE and the 4 MiB ring as its size: $(grep -m3 'AUX' /tmp/r.txt)"; return 1; }
  ptsnap decode /tmp/t -o /tmp/t.fxt >/tmp/d.log 2>&1 || { fail "decode failed: $(tail -3 /tmp/d.log)"; return 1; }
  echo "PTW $SCAN_FIRST..$SCAN_LAST in $SCAN_BYTES bytes, $SCAN_PSB PSBs, ITRACE_START recorded; decodes"
}
vm_test rec-user-exit t_rec_user_exit

t_rec_sizes() {
  load_pmu || return 1
  local seen=""
  # A 4 KiB ring is smaller than the default PSB period: ptsnap must say so,
  # and a 2 KiB period (psb_period=0) gives it a sync point.
  rec /tmp/s -snapshot-size 4K -- vm_spin 100 || { fail "--snapshot-size 4K: $(tail -3 /tmp/s.log)"; return 1; }
  grep -q 'psb_period' /tmp/s.log || { fail "a 4 KiB ring without a PSB period warning: $(cat /tmp/s.log)"; return 1; }
  for size in 4K 64K 1M 64M; do
    local psb=""
    [ $size = 4K ] && psb="--timer-resolution custom:psb_period=0"
    rec /tmp/s -snapshot-size $size $psb -- vm_spin 400 || { fail "--snapshot-size $size: $(tail -3 /tmp/s.log)"; return 1; }
    scan "$(streams /tmp/s)" || return 1
    [ "$SCAN_LAST" = "$(module_seq)" ] || { fail "$size: ends at PTW $SCAN_LAST, the module wrote up to $(module_seq)"; return 1; }
    case $size in
      4K) [ "$SCAN_FIRST" -gt 1 ] && [ "$SCAN_BYTES" -le 4096 ] || { fail "4K: first PTW $SCAN_FIRST in $SCAN_BYTES bytes: the ring should have wrapped"; return 1; } ;;
      64M) [ "$SCAN_FIRST" = 1 ] || { fail "64M: first PTW $SCAN_FIRST"; return 1; } ;;
    esac
    seen="$seen $size:$SCAN_FIRST..$SCAN_LAST/${SCAN_BYTES}B"
  done
  echo "newest bytes kept, contiguous:$seen"
}
vm_test rec-sizes t_rec_sizes

t_rec_kernel_scopes() {
  load_pmu || return 1
  local seen=""
  for scope in --trace-include-kernel --trace-kernel-only; do
    rec /tmp/k $scope -- vm_spin 200 || { fail "$scope: $(tail -3 /tmp/k.log)"; return 1; }
    scan "$(streams /tmp/k)" || return 1
    grep -q '"status": *"copied"' /tmp/k/manifest.json || { fail "$scope: kcore not copied: $(grep -A2 '"kcore"' /tmp/k/manifest.json)"; return 1; }
    seen="$seen $scope:$SCAN_FIRST..$SCAN_LAST"
  done
  echo "kernel scopes record with the kcore copy:$seen"
}
vm_test rec-kernel-scopes t_rec_kernel_scopes

t_rec_sigusr2() {
  load_pmu || return 1
  rec /tmp/u --after wait -- vm_spin 600 usr2 || { fail "ptsnap run failed: $(tail -3 /tmp/u.log)"; return 1; }
  scan "$(streams /tmp/u)" || return 1
  [ "$SCAN_LAST" = "$(module_seq)" ] || { fail "SIGUSR2 snapshot ends at PTW $SCAN_LAST, the module wrote up to $(module_seq) before the event closed"; return 1; }
  echo "SIGUSR2 snapshot: PTW $SCAN_FIRST..$SCAN_LAST"
}
vm_test rec-sigusr2 t_rec_sigusr2

t_rec_trigger() {
  load_pmu || return 1
  rec /tmp/g --after wait --trigger middle -- vm_spin 300 || { fail "ptsnap run --trigger failed: $(tail -3 /tmp/g.log)"; return 1; }
  grep -q '"reason": *"trigger"' /tmp/g/manifest.json ||
    { fail "no snapshot with reason trigger: $(grep -o '"reason": *"[^"]*"' /tmp/g/manifest.json)"; return 1; }
  grep -q 'never fired' /tmp/g.log && { fail "the trigger fired, yet ptsnap says it never did"; return 1; }
  scan "$(streams /tmp/g)" || return 1
  echo "trigger snapshot: PTW $SCAN_FIRST..$SCAN_LAST"
}
vm_test rec-trigger t_rec_trigger

t_rec_multi_snapshot() {
  load_pmu || return 1
  rec_bg /tmp/m --multi-snapshot -- vm_spin 2500
  local pid=$REC_PID
  wait_traced; kill -USR2 $pid; sleep 0.5; kill -USR2 $pid
  wait $pid || { fail "ptsnap run --multi-snapshot failed: $(tail -3 /tmp/m.log)"; return 1; }
  local n=0 prev=0 seen=""
  for f in $(streams /tmp/m); do
    scan "$f" || return 1
    n=$((n + 1))
    seen="$seen $SCAN_FIRST..$SCAN_LAST"
  done
  ptsnap info /tmp/m >/tmp/mi.log 2>&1 || { fail "info failed: $(tail -3 /tmp/mi.log)"; return 1; }
  snaps=$(grep -c '"seq"' /tmp/m/manifest.json)
  [ "$snaps" -ge 3 ] || { fail "expected 3 snapshots (2 signals + exit), manifest lists $snaps"; return 1; }
  echo "$snaps snapshots, streams:$seen"
}
vm_test rec-multi-snapshot t_rec_multi_snapshot

t_rec_full() {
  load_pmu || return 1
  rec /tmp/f --full-execution -- vm_spin 500 || { fail "--full-execution failed: $(tail -3 /tmp/f.log)"; return 1; }
  scan "$(streams /tmp/f)" || return 1
  [ "$SCAN_FIRST" = 1 ] && [ "$SCAN_LAST" = "$(module_seq)" ] ||
    { fail "full mode lost payload: PTW $SCAN_FIRST..$SCAN_LAST, the module wrote 1..$(module_seq)"; return 1; }
  # Full mode: AUX records without OVERWRITE whose sizes add up to the stream.
  local sum
  sum=$(ptsnap info /tmp/f --records 2>/dev/null | grep -o 'AUX offset 0x[0-9a-f]* size 0x[0-9a-f]*.*' |
    { t=0; while read _ _ _ _ size flags; do
        [ -z "$flags" ] || { echo "flags $flags"; exit; }; t=$((t + size)); done; echo $t; })
  [ "$sum" = "$SCAN_BYTES" ] || { fail "full mode: the AUX records add up to '$sum', the stream holds $SCAN_BYTES bytes"; return 1; }
  echo "full execution: PTW 1..$SCAN_LAST, nothing lost ($SCAN_BYTES bytes)"
}
vm_test rec-full t_rec_full

t_rec_attach_threads() {
  load_pmu || return 1
  # Long enough to outlive a slow attach on a loaded host (it once exited
  # mid-attach after 6 s); killed below.
  vm_threads 3 60 >/tmp/th.out &
  local tpid=$!
  sleep 1
  rm -rf /tmp/a
  ptsnap attach -p $tpid --multi-thread --duration 1s --no-decode --trace-dir /tmp/a >/tmp/a.log 2>&1 ||
    { fail "attach failed: $(tail -3 /tmp/a.log)"; kill $tpid; return 1; }
  kill $tpid 2>/dev/null
  local n=0 seen=""
  for f in $(streams /tmp/a); do
    scan "$f" || return 1
    n=$((n + 1)); seen="$seen $SCAN_FIRST..$SCAN_LAST"
  done
  [ $n = 4 ] || { fail "attach -p to 4 threads gave $n streams"; return 1; }
  echo "4 threads, each contiguous:$seen"
}
vm_test rec-attach-threads t_rec_attach_threads

t_rec_all_cpus() {
  load_pmu || return 1
  rec /tmp/c -a -- vm_spin 300 || { fail "run -a failed: $(tail -3 /tmp/c.log)"; return 1; }
  local n=0 seen=""
  for f in $(streams /tmp/c); do
    scan "$f" || return 1
    n=$((n + 1)); seen="$seen $SCAN_FIRST..$SCAN_LAST"
  done
  [ $n = "$(nproc)" ] || { fail "-a on $(nproc) CPUs gave $n streams"; return 1; }
  echo "one stream per CPU, each contiguous:$seen"
}
vm_test rec-all-cpus t_rec_all_cpus

t_rec_kill9() {
  load_pmu || return 1
  rec_bg /tmp/x --multi-snapshot -- vm_spin 5000
  local pid=$REC_PID
  wait_traced; kill -USR2 $pid; sleep 1
  kill -9 $pid; wait $pid 2>/dev/null
  sleep 0.5
  for p in /proc/[0-9]*; do
    ls -l $p/fd 2>/dev/null | grep -q 'perf_event' && { fail "$(cat $p/comm) ($p) still holds a perf event"; return 1; }
  done
  pidof vm_spin >/dev/null && { fail "the traced vm_spin outlived ptsnap's kill -9"; return 1; }
  grep -q '"state": *"recording"' /tmp/x/manifest.json || { fail "state is not recording after kill -9"; return 1; }
  ptsnap decode /tmp/x -o /tmp/x.fxt >/tmp/xd.log 2>&1 || { fail "the killed recording does not decode: $(tail -3 /tmp/xd.log)"; return 1; }
  echo "kill -9: no event left open, the trace decodes"
}
vm_test rec-kill9 t_rec_kill9
