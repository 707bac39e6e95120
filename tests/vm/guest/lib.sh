# The VM suite's helpers, sourced by run-suite.sh and by every test (each runs
# in its own shell under a timeout). A test is a shell function; it fails by
# returning non-zero, and what it printed last says why. `vm_test NAME FN`
# registers one.
KVER=$(cat /vm/kernel)
VM_TESTS=${VM_TESTS:-}
vm_test() { VM_TESTS="$VM_TESTS $1:$2"; }

# fail MESSAGE: print it and return 1 (use as `cond || fail "why"`; the test stops
# on `|| return 1` or `set -e`-like chains written out).
fail() { echo "$*"; return 1; }

# as_user CMD...: run CMD as the unprivileged user tracer (uid 1000, no capabilities).
as_user() { su -s /bin/sh tracer -c "cd /tmp && PATH=$PATH $*"; }

# json_field FILE KEY: the scalar value of "KEY": in a JSON file ptsnap wrote (first match).
json_field() { grep -o "\"$2\": *[^,}]*" "$1" | head -1 | sed 's/^[^:]*: *//; s/"//g'; }

# probe_check FILE ID: the status of check ID in `ptsnap probe --json` output.
probe_check() {
  awk -v id="\"$2\"" '$0 ~ "\"id\": " id {f=1} f && /"status"/ {gsub(/[",]/,""); print $2; exit}' "$1"
}

# load_pmu [PARAM=VALUE...]: (re)load the intel_pt-shaped module with these parameters.
load_pmu() {
  rmmod ptpmu 2>/dev/null
  insmod /vm/ptpmu.ko "$@" || fail "insmod ptpmu.ko $* failed"
}

# sysctl_set NAME VALUE: write /proc/sys/NAME (dots as slashes).
sysctl_set() { echo "$2" >"/proc/sys/$(echo "$1" | tr . /)"; }

# rec DIR ARGS...: `ptsnap run --no-decode --trace-dir DIR ARGS...`, its output in DIR.log;
# returns ptsnap's status.
rec() {
  local dir=$1; shift
  rm -rf "$dir" "$dir.log"
  ptsnap run --no-decode --trace-dir "$dir" "$@" >"$dir.log" 2>&1
}

# rec_bg DIR ARGS...: rec in the background; its pid in REC_PID.
rec_bg() {
  local dir=$1; shift
  rm -rf "$dir" "$dir.log"
  ptsnap run --no-decode --trace-dir "$dir" "$@" >"$dir.log" 2>&1 &
  REC_PID=$!
}

# scan FILE: libipt's reading of one PT stream file (aux_scan) into SCAN_BYTES,
# SCAN_PSB, SCAN_PTW, SCAN_FIRST, SCAN_LAST; fails unless it decodes without
# error and its PTW sequence runs without a gap or a repeat.
scan() {
  local s
  s=$(aux_scan "$1")
  local rc=$?
  set -- $s
  SCAN_BYTES=$2 SCAN_PSB=$4 SCAN_PTW=$6 SCAN_FIRST=$8 SCAN_LAST=${10}
  [ $rc -eq 0 ] || { fail "libipt found errors in $1: $s"; return 1; }
  [ "${12}" = 0 ] && [ "${14}" = 0 ] || { fail "$1: the counted payload is torn: $s"; return 1; }
  [ "$SCAN_PTW" -gt 0 ] || { fail "$1 holds no payload: $s"; return 1; }
}

# streams DIR: the PT stream files of a trace directory.
streams() { ls "$1"/pt/*.pt 2>/dev/null; }

# module_seq: the last PTW sequence number the ptpmu module wrote (of the last event).
module_seq() { cat /sys/module/ptpmu/parameters/last_seq; }
# wait_traced [N]: until the module has written N PTWs (default 100) since
# it was loaded, at most 60 s: the trace is under way. A fixed sleep is not
# enough on a loaded host, where the guest may not have begun.
wait_traced() {
  local n=0
  while [ "$(module_seq)" -lt "${1:-100}" ] && [ $n -lt 600 ]; do sleep 0.1; n=$((n + 1)); done
}
