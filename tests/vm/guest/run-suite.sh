# Runs every registered test whose name matches /vm/filter (shell globs,
# separated by commas),
# each in its own shell under a time limit, with the sysctls reset before
# each. Prints VMTEST PASS|FAIL NAME [KERNEL] DETAIL, one line a test.
. /vm/suite/lib.sh
for t in /vm/suite/t_*.sh; do . "$t"; done
filter=$(cat /vm/filter)
for entry in $VM_TESTS; do
  name=${entry%%:*}
  fn=${entry#*:}
  match=
  set -f
  for pat in $(echo "$filter" | tr "," " "); do
    case "$name" in $pat) match=1 ;; esac
  done
  set +f
  [ -n "$match" ] || continue
  sysctl_set kernel.perf_event_paranoid 3
  sysctl_set kernel.kptr_restrict 0
  log=/tmp/vmtest-$name.log
  start=$(date +%s)
  if timeout "${VM_TEST_TIMEOUT:-240}" sh -c ". /vm/suite/lib.sh; for t in /vm/suite/t_*.sh; do . \$t; done; cd /tmp; $fn" >"$log" 2>&1; then
    echo "VMTEST PASS $name [$KVER] $(tail -1 "$log") ($(($(date +%s) - start)) s)"
  else
    rc=$?
    [ $rc -eq 124 ] && echo "timed out after ${VM_TEST_TIMEOUT:-240} s" >>"$log"
    echo "VMTEST FAIL $name [$KVER] $(tail -3 "$log" | tr '\n' '|')"
    sed 's/^/    | /' "$log" | tail -40
  fi
done
