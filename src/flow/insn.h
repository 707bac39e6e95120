// Instructions: what libipt's instruction length decoder (pt_ild) tells the
// flow decoder's block layer (block_decoder.cpp), from Zydis: the length, the
// class (libipt's pt_insn_class) and what binds PIP, VMCS and PTW events.
// Private to src/flow.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flow/flow_decoder.h"

namespace ptsnap::flow {

struct Insn {
  uint64_t ip = 0;
  uint8_t size = 0;
  InsnClass iclass = InsnClass::kError;
  bool is_direct = false;  // near call/jump/jcc with a relative target
  bool changes_cr3 = false;
  bool vm_entry = false;  // VMLAUNCH/VMRESUME
  bool vmptrld = false;   // what libipt's pt_ild calls VMPTRLD: 0f c7 /6 with a memory operand
  int64_t disp = 0;       // relative branches: target = ip + size + disp
};

// Decodes the instruction at `ip` from `bytes` (n of them). False when it
// cannot be decoded (libipt: -pte_bad_insn).
bool DecodeInsn(const uint8_t* bytes, size_t n, uint64_t ip, ExecMode mode, Insn* out);

[[nodiscard]] inline bool IsFarBranch(const Insn& insn) {
  return insn.iclass == InsnClass::kFarCall || insn.iclass == InsnClass::kFarReturn ||
         insn.iclass == InsnClass::kFarJump;
}
// pt_insn_binds_to_pip: where a PIP (a CR3 write) outside PSB+ binds.
[[nodiscard]] inline bool BindsToPip(const Insn& insn) {
  return insn.changes_cr3 || insn.vm_entry || IsFarBranch(insn);
}
// pt_insn_binds_to_vmcs: where a VMCS packet outside PSB+ binds.
[[nodiscard]] inline bool BindsToVmcs(const Insn& insn) {
  return insn.vmptrld || insn.vm_entry || IsFarBranch(insn);
}

// libipt's pt_insn_next_ip: the next IP without trace, or -pte_bad_query.
inline int NextIpNoTrace(const Insn& insn, uint64_t* ip) {
  switch (insn.iclass) {
    case InsnClass::kOther:
    case InsnClass::kPtwrite: *ip = insn.ip + insn.size; return 0;
    case InsnClass::kCall:
    case InsnClass::kJump:
      if (insn.is_direct) {
        *ip = insn.ip + insn.size + static_cast<uint64_t>(insn.disp);
        return 0;
      }
      return kErrBadQuery;
    case InsnClass::kError: return kErrBadInsn;
    default: return kErrBadQuery;
  }
}

}  // namespace ptsnap::flow
