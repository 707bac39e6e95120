# Recording as an unprivileged user (tracer, uid 1000, no capabilities):
# what perf_event_paranoid allows, and the messages where it does not.

# urec DIR ARGS...: `ptsnap run --no-decode --trace-dir DIR ARGS` as tracer.
urec() {
  local dir=$1; shift
  rm -rf "$dir" "$dir.log"
  as_user "ptsnap run --no-decode --trace-dir $dir $*" >"$dir.log" 2>&1
}

t_user_record() {
  load_pmu || return 1
  sysctl_set kernel.perf_event_paranoid 2
  urec /tmp/ut -- vm_spin 200 || { fail "paranoid 2, user scope: $(tail -3 /tmp/ut.log)"; return 1; }
  scan "$(streams /tmp/ut)" || return 1
  [ "$SCAN_LAST" = "$(module_seq)" ] || { fail "ends at PTW $SCAN_LAST, the module wrote up to $(module_seq)"; return 1; }
  [ "$(stat -c %u /tmp/ut/manifest.json)" = 1000 ] || { fail "the trace is not the user's"; return 1; }
  echo "paranoid 2: the user records user scope, PTW $SCAN_FIRST..$SCAN_LAST in $SCAN_BYTES bytes"
}
vm_test user-record t_user_record

t_user_refused() {
  load_pmu || return 1
  sysctl_set kernel.perf_event_paranoid 3
  urec /tmp/ur -- vm_spin 100 && { fail "paranoid 3 (Debian's default): the user recorded"; return 1; }
  grep -q 'perf_event_paranoid' /tmp/ur.log || { fail "paranoid 3: the error does not name perf_event_paranoid: $(tail -3 /tmp/ur.log)"; return 1; }
  local said
  said=$(grep -m1 'ptsnap: error' /tmp/ur.log | cut -c1-140)
  sysctl_set kernel.perf_event_paranoid 2
  urec /tmp/ur --trace-include-kernel -- vm_spin 100 && { fail "paranoid 2: the user recorded kernel scope"; return 1; }
  grep -q 'CAP_PERFMON' /tmp/ur.log || { fail "paranoid 2, kernel scope: the error does not say what is needed: $(tail -3 /tmp/ur.log)"; return 1; }
  echo "paranoid 3: $said..."
}
vm_test user-refused t_user_refused

t_user_kernel_scope() {
  load_pmu || return 1
  sysctl_set kernel.perf_event_paranoid 1
  urec /tmp/uk --trace-include-kernel -- vm_spin 200 || { fail "paranoid 1, kernel scope: $(tail -3 /tmp/uk.log)"; return 1; }
  scan "$(streams /tmp/uk)" || return 1
  # The user cannot read /proc/kcore: no copy, and the manifest says why.
  grep -q '"status": *"unavailable"' /tmp/uk/manifest.json || { fail "kcore status: $(grep -A3 '"kcore"' /tmp/uk/manifest.json)"; return 1; }
  [ ! -e /tmp/uk/kcore/kcore ] || { fail "a user's recording holds a kcore copy"; return 1; }
  echo "paranoid 1: kernel scope recorded, PTW $SCAN_FIRST..$SCAN_LAST, no kcore copy ($(grep -A4 '"kcore"' /tmp/uk/manifest.json | grep -o '"reason": *"[^"]*' | cut -c1-100))"
}
vm_test user-kernel-scope t_user_kernel_scope
