#include "decode/classify.h"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <cstring>

namespace ptsnap::decode {

enum pt_insn_class ClassifyInstruction(const uint8_t* bytes, size_t size, enum pt_exec_mode mode) {
  ZydisMachineMode machine = ZYDIS_MACHINE_MODE_LONG_64;
  ZydisStackWidth width = ZYDIS_STACK_WIDTH_64;
  if (mode == ptem_32bit) {
    machine = ZYDIS_MACHINE_MODE_LEGACY_32;
    width = ZYDIS_STACK_WIDTH_32;
  } else if (mode == ptem_16bit) {
    machine = ZYDIS_MACHINE_MODE_LEGACY_16;
    width = ZYDIS_STACK_WIDTH_16;
  }
  ZydisDecoder decoder;
  ZydisDecodedInstruction insn;
  if (ZYAN_FAILED(ZydisDecoderInit(&decoder, machine, width)) ||
      ZYAN_FAILED(ZydisDecoderDecodeInstruction(&decoder, nullptr, bytes, size, &insn))) {
    return ptic_error;
  }
  bool far = insn.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
  switch (insn.mnemonic) {
    case ZYDIS_MNEMONIC_SYSCALL:
    case ZYDIS_MNEMONIC_SYSENTER:
    case ZYDIS_MNEMONIC_INT:
    case ZYDIS_MNEMONIC_INT1:
    case ZYDIS_MNEMONIC_INT3:
    case ZYDIS_MNEMONIC_INTO: return ptic_far_call;
    case ZYDIS_MNEMONIC_SYSRET:
    case ZYDIS_MNEMONIC_SYSEXIT:
    case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD:
    case ZYDIS_MNEMONIC_IRETQ: return ptic_far_return;
    case ZYDIS_MNEMONIC_CALL: return far ? ptic_far_call : ptic_call;
    case ZYDIS_MNEMONIC_RET: return far ? ptic_far_return : ptic_return;
    case ZYDIS_MNEMONIC_JMP: return far ? ptic_far_jump : ptic_jump;
    default: break;
  }
  return insn.meta.category == ZYDIS_CATEGORY_COND_BR ? ptic_cond_jump : ptic_other;
}

enum pt_insn_class ClassifyBlockEnd(struct pt_image_section_cache* iscache,
                                    const struct pt_block& block) {
  uint8_t buf[16];
  size_t n = 0;
  if (block.truncated) {
    // The instruction spans two sections; libipt kept its bytes.
    n = std::min<size_t>(block.size, sizeof block.raw);
    std::memcpy(buf, block.raw, n);
  } else {
    int r = pt_iscache_read(iscache, buf, sizeof buf, block.isid, block.end_ip);
    if (r <= 0) return ptic_error;
    n = static_cast<size_t>(r);
  }
  return ClassifyInstruction(buf, n, block.mode);
}

}  // namespace ptsnap::decode
