# The ptpmu module's own checks with the real perf core (tests/vm/ptpmu/
# guest_selftest.sh): its sysfs files against pt.c and a Kaby Lake, full and
# snapshot mode through a bare perf_event_open, the fault parameters.
t_module_selftest() {
  rmmod ptpmu 2>/dev/null
  sh /vm/ptpmu_selftest.sh /vm/ptpmu.ko ptpmu_selftest >/tmp/ms.log 2>&1
  # Each failed check with its own output (the selftest prints it as "  [NAME] ...").
  for name in $(grep 'ptpmu-guest: FAIL' /tmp/ms.log | sed 's/ptpmu-guest: FAIL \([^:]*\).*/\1/'); do
    grep -F "[$name]" /tmp/ms.log
  done
  grep 'ptpmu-guest: FAIL' /tmp/ms.log
  local last
  last=$(grep 'ptpmu-guest: .* passed, .* failed' /tmp/ms.log | tail -1)
  case "$last" in *" 0 failed"*) ;; *) fail "module selftest: ${last:-no summary line}"; return 1 ;; esac
  echo "${last#ptpmu-guest: }"
}
vm_test module-selftest t_module_selftest
