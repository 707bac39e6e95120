# Faults the module injects, and what ptsnap says of them.

t_fault_refuse_open() {
  load_pmu refuse_event_init=95 || return 1
  rec /tmp/e -- vm_spin 100 && { fail "ptsnap run succeeded although the PMU refuses every event"; return 1; }
  grep -q 'ptsnap: error' /tmp/e.log || { fail "no error line: $(tail -3 /tmp/e.log)"; return 1; }
  pidof vm_spin >/dev/null && { fail "vm_spin left running"; return 1; }
  echo "$(grep -m1 'ptsnap: error' /tmp/e.log)"
}
vm_test fault-refuse-open t_fault_refuse_open

t_fault_refuse_mmap() {
  load_pmu refuse_setup_aux=1 || return 1
  rec /tmp/e -- vm_spin 100 && { fail "ptsnap run succeeded although the AUX mmap fails"; return 1; }
  grep -qi 'aux' /tmp/e.log || { fail "the error does not name the AUX buffer: $(tail -3 /tmp/e.log)"; return 1; }
  echo "$(grep -m1 'ptsnap: error' /tmp/e.log)"
}
vm_test fault-refuse-mmap t_fault_refuse_mmap

t_fault_buffer_size() {
  load_pmu max_aux_bytes=65536 || return 1
  rec /tmp/e --snapshot-size 1M -- vm_spin 100 && { fail "a 1 MiB AUX buffer the PMU refuses was accepted"; return 1; }
  grep -q 'snapshot-size' /tmp/e.log || { fail "the error does not point at --snapshot-size: $(tail -3 /tmp/e.log)"; return 1; }
  local said
  said=$(grep -m1 'ptsnap: error' /tmp/e.log)
  rec /tmp/e --snapshot-size 64K -- vm_spin 100 || { fail "64K within the limit failed: $(tail -3 /tmp/e.log)"; return 1; }
  echo "1M refused with: $said"
}
vm_test fault-buffer-size t_fault_buffer_size

# Full mode, the module drops 20 PTWs midway and marks the AUX record
# TRUNCATED, as the hardware does when the buffer fills: ptsnap must count the
# loss and go on recording to the end (on 6.1 and 6.12 a TRUNCATED event
# restarts only after IOC_DISABLE + IOC_ENABLE: tests/vm/ptpmu/README.md).
t_fault_drop_full() {
  load_pmu || return 1
  rec_bg /tmp/d --full-execution -- vm_spin 1500
  local pid=$REC_PID
  # Drop once the trace is under way, not after a fixed 0.7 s: on a loaded
  # host the guest had only begun, the first 20 PTWs were the ones dropped,
  # and the payload had no gap to find.
  wait_traced
  echo 20 >/sys/module/ptpmu/parameters/drop_ptws
  wait $pid || { fail "run failed: $(tail -3 /tmp/d.log)"; return 1; }
  local s
  s=$(aux_scan "$(streams /tmp/d)")
  set -- $s
  grep -q 'PT data was lost' /tmp/d.log || { fail "no loss warning: $(tail -3 /tmp/d.log); scan: $s"; return 1; }
  [ "${12}" -ge 1 ] || { fail "no gap in the payload, yet 20 PTWs were dropped: $s"; return 1; }
  [ "${10}" = "$(module_seq)" ] || { fail "recording stopped at the loss: PTW up to ${10}, the module wrote up to $(module_seq) ($s)"; return 1; }
  echo "loss reported, recording went on to PTW ${10}: $s"
}
vm_test fault-drop-full t_fault_drop_full
