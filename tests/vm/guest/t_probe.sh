# `ptsnap probe` on a real kernel: each verdict against what the kernel
# actually allows (perf_try opens an event; /proc/kcore and /proc/kallsyms
# are read directly).

# probe_json FILE [as_user] [ENV=VALUE...]: ptsnap probe --json into FILE.
probe_json() {
  local out=$1; shift
  if [ "${1:-}" = as_user ]; then
    shift
    as_user "env $* ptsnap probe --json" >"$out" 2>/dev/null
  else
    env "$@" ptsnap probe --json >"$out" 2>/dev/null
  fi
  grep -q '"schema": "ptsnap-probe/1"' "$out" || fail "ptsnap probe --json printed no report: $(head -3 "$out")"
}

# scope FILE NAME: true/false for scopes.NAME.
scope() { sed -n '/"scopes"/,/}/p' "$1" | grep "\"$2\"" | sed 's/.*: *//; s/,//'; }

t_probe_kernel_version() {
  probe_json /tmp/p.json || return 1
  local v
  v=$(awk '/"id": "kernel.version"/{f=1} f&&/"value"/{sub(/.*"value": "/,""); sub(/".*/,""); print; exit}' /tmp/p.json)
  case "$v" in "$(uname -r) "*) ;; *) fail "probe says kernel '$v', uname -r says $(uname -r)" ;; esac || return 1
  [ "$(probe_check /tmp/p.json kernel.features)" = ok ] || fail "kernel.features not ok"
  echo "kernel release $(uname -r) as uname says"
}
vm_test probe-kernel-version t_probe_kernel_version

t_probe_pmu() {
  rmmod ptpmu 2>/dev/null
  probe_json /tmp/none.json || return 1
  [ "$(probe_check /tmp/none.json pmu.intel_pt)" = fail ] || fail "no module loaded, yet pmu.intel_pt is not fail"
  load_pmu || return 1
  probe_json /tmp/p.json || return 1
  [ "$(probe_check /tmp/p.json pmu.intel_pt)" = ok ] || fail "module loaded, pmu.intel_pt: $(probe_check /tmp/p.json pmu.intel_pt)"
  for c in pmu.format pmu.caps; do
    s=$(probe_check /tmp/p.json $c)
    [ "$s" = ok ] || { fail "module loaded, $c is '$s', not ok"; return 1; }
  done
  echo "intel_pt type $(cat /sys/bus/event_source/devices/intel_pt/type), pt_available $(json_field /tmp/p.json pt_available)"
}
vm_test probe-pmu t_probe_pmu

# The kernel text address kallsyms shows the caller (0 when masked).
kallsyms_text() { grep -m1 -E ' [tT] (_text|_stext)$' /proc/kallsyms | cut -d' ' -f1; }

t_probe_kcore_root() {
  load_pmu || return 1
  [ "$(head -c 4 /proc/kcore | od -An -c | tr -d ' ')" = '177ELF' ] || fail "root cannot read /proc/kcore"
  probe_json /tmp/p.json || return 1
  [ "$(json_field /tmp/p.json kcore_usable)" = true ] || fail "root, paranoid $(cat /proc/sys/kernel/perf_event_paranoid): kcore_usable is not true"
  echo "root passes the kcore gate with perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid), text at 0x$(kallsyms_text)"
}
vm_test probe-kcore-root t_probe_kcore_root

t_probe_kcore_matrix() {
  load_pmu || return 1
  local seen=""
  for kptr in 0 1 2; do
    sysctl_set kernel.kptr_restrict $kptr
    # root: kcore readable; usable exactly when kallsyms shows real addresses.
    probe_json /tmp/p.json || return 1
    want=true
    case "$(kallsyms_text)" in ''|0000000000000000) want=false ;; esac
    got=$(json_field /tmp/p.json kcore_usable)
    [ "$got" = "$want" ] || { fail "root, kptr_restrict $kptr: kcore_usable $got, but kallsyms text is '$(kallsyms_text)'"; return 1; }
    seen="$seen root/kptr$kptr=$got"
  done
  sysctl_set kernel.kptr_restrict 0
  for par in 2 1 0 -1; do
    sysctl_set kernel.perf_event_paranoid $par
    probe_json /tmp/u.json as_user || return 1
    want=false
    as_user "head -c 1 /proc/kcore" >/dev/null 2>&1 && want=true
    got=$(json_field /tmp/u.json kcore_usable)
    [ "$got" = "$want" ] || { fail "user, paranoid $par: kcore_usable $got, /proc/kcore readable: $want"; return 1; }
    seen="$seen user/paranoid$par=$got"
  done
  echo "kcore_usable:$seen"
}
vm_test probe-kcore-matrix t_probe_kcore_matrix

t_probe_kcore_env() {
  load_pmu || return 1
  for var in PTSNAP_NO_KCORE MAGIC_TRACE_PERF_NO_KCORE; do
    probe_json /tmp/p.json "$var=1" || return 1
    [ "$(json_field /tmp/p.json kcore_usable)" = false ] || { fail "$var=1: kcore_usable is not false"; return 1; }
    grep -q "$var=1" /tmp/p.json || { fail "$var=1: the report does not name it"; return 1; }
  done
  echo "PTSNAP_NO_KCORE and MAGIC_TRACE_PERF_NO_KCORE turn the kcore copy off and are named"
}
vm_test probe-kcore-env t_probe_kcore_env

t_probe_scopes() {
  load_pmu || return 1
  local seen=""
  for par in 3 2 1 0 -1; do
    sysctl_set kernel.perf_event_paranoid $par
    probe_json /tmp/u.json as_user || return 1
    for pair in user:user kernel:kernel cpu:system_wide; do
      try=${pair%%:*} key=${pair#*:}
      want=false
      [ "$(as_user perf_try $try intel_pt)" = ok ] && want=true
      got=$(scope /tmp/u.json $key)
      [ "$got" = "$want" ] || { fail "user, paranoid $par: probe says $key=$got, perf_event_open of intel_pt ($try) says $want"; return 1; }
      seen="$seen p$par/$key=$got"
    done
  done
  echo "scopes agree with perf_event_open:$seen"
}
vm_test probe-scopes t_probe_scopes
