#include "emulate/exit_class.h"

#include <Zydis/Zydis.h>

namespace ptsnap::emulate {

const char* ToString(ExitKind kind) {
  switch (kind) {
    case ExitKind::kNone: return "none";
    case ExitKind::kCond: return "cond";
    case ExitKind::kDirect: return "direct";
    case ExitKind::kDirectCall: return "direct-call";
    case ExitKind::kIndirect: return "indirect";
    case ExitKind::kIndirectCall: return "indirect-call";
    case ExitKind::kRet: return "ret";
    case ExitKind::kFar: return "far";
    case ExitKind::kRep: return "rep";
  }
  return "?";
}

namespace {

const ZydisDecoder& Decoder() {
  static const ZydisDecoder decoder = [] {
    ZydisDecoder d;
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    return d;
  }();
  return decoder;
}

bool IsRelative(const ZydisDecodedInstruction& insn, const ZydisDecodedOperand& op) {
  return op.type == ZYDIS_OPERAND_TYPE_IMMEDIATE && op.imm.is_relative &&
         (insn.attributes & ZYDIS_ATTRIB_IS_RELATIVE) != 0;
}

}  // namespace

std::optional<InsnExit> ClassifyInstruction(std::span<const uint8_t> bytes, uint64_t ip) {
  ZydisDecodedInstruction insn;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&Decoder(), bytes.data(), bytes.size(), &insn, ops)))
    return std::nullopt;
  if (insn.length != bytes.size()) return std::nullopt;

  InsnExit e;
  e.length = insn.length;
  e.fallthrough = ip + insn.length;
  auto direct_target = [&](ExitKind direct, ExitKind indirect) {
    if (insn.operand_count_visible > 0 && IsRelative(insn, ops[0])) {
      ZyanU64 abs = 0;
      ZydisCalcAbsoluteAddress(&insn, &ops[0], ip, &abs);
      e.kind = direct;
      e.target = abs;
      return true;
    }
    e.kind = indirect;
    return false;
  };

  switch (insn.meta.category) {
    case ZYDIS_CATEGORY_COND_BR: {
      ZyanU64 abs = 0;
      ZydisCalcAbsoluteAddress(&insn, &ops[0], ip, &abs);
      e.kind = ExitKind::kCond;
      e.target = abs;
      return e;
    }
    case ZYDIS_CATEGORY_UNCOND_BR:
      // Far jumps (ptr16:32, m16:64) are not relative: TIP, like indirect.
      direct_target(ExitKind::kDirect, ExitKind::kIndirect);
      return e;
    case ZYDIS_CATEGORY_CALL: {
      if (insn.mnemonic != ZYDIS_MNEMONIC_CALL) {
        e.kind = ExitKind::kIndirect;
        return e;
      }
      const bool far = insn.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
      bool direct = direct_target(ExitKind::kDirectCall, ExitKind::kIndirectCall);
      if (far) {
        e.kind = ExitKind::kIndirect;
        return e;
      }
      // libipt does not push a direct call with zero displacement (call next
      // instruction, the PIC idiom to read the IP).
      e.pushes = !direct || e.target != e.fallthrough;
      return e;
    }
    case ZYDIS_CATEGORY_RET:
      if (insn.mnemonic == ZYDIS_MNEMONIC_RET && insn.meta.branch_type != ZYDIS_BRANCH_TYPE_FAR) {
        e.kind = ExitKind::kRet;
      } else {
        e.kind = ExitKind::kIndirect;  // far return, IRET
      }
      return e;
    case ZYDIS_CATEGORY_SYSCALL:
    case ZYDIS_CATEGORY_INTERRUPT:  // INT n, INT3, INTO, INT1
      e.kind = ExitKind::kFar;
      return e;
    default: break;
  }
  switch (insn.mnemonic) {
    case ZYDIS_MNEMONIC_SYSENTER:
    case ZYDIS_MNEMONIC_SYSCALL: e.kind = ExitKind::kFar; return e;
    case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD:
    case ZYDIS_MNEMONIC_IRETQ:
    case ZYDIS_MNEMONIC_SYSEXIT:
    case ZYDIS_MNEMONIC_SYSRET: e.kind = ExitKind::kIndirect; return e;
    default: break;
  }
  if (insn.meta.category == ZYDIS_CATEGORY_STRINGOP &&
      (insn.attributes & (ZYDIS_ATTRIB_HAS_REP | ZYDIS_ATTRIB_HAS_REPE | ZYDIS_ATTRIB_HAS_REPNE)) !=
          0) {
    e.kind = ExitKind::kRep;
  }
  return e;
}

}  // namespace ptsnap::emulate
