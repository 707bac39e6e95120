#include "decode/classify.h"

#include <Zydis/Zydis.h>

#include <algorithm>
#include <cstring>

namespace ptsnap::decode {

namespace {

// The bytes of `block`'s last instruction (up to 16) into `buf`; how many.
size_t ReadBlockEnd(struct pt_image_section_cache* iscache, const struct pt_block& block,
                    uint8_t (&buf)[16]) {
  if (block.truncated) {
    // The instruction spans two sections; libipt kept its bytes.
    const size_t n = std::min<size_t>(block.size, sizeof block.raw);
    std::memcpy(buf, block.raw, n);
    return n;
  }
  const int r = pt_iscache_read(iscache, buf, sizeof buf, block.isid, block.end_ip);
  return r <= 0 ? 0 : static_cast<size_t>(r);
}

bool Decode(const uint8_t* bytes, size_t size, enum pt_exec_mode mode,
            ZydisDecodedInstruction* insn) {
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
  return ZYAN_SUCCESS(ZydisDecoderInit(&decoder, machine, width)) &&
         ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&decoder, nullptr, bytes, size, insn));
}

}  // namespace

enum pt_insn_class ClassifyInstruction(const uint8_t* bytes, size_t size, enum pt_exec_mode mode) {
  ZydisDecodedInstruction insn;
  if (!Decode(bytes, size, mode, &insn)) return ptic_error;
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
  const size_t n = ReadBlockEnd(iscache, block, buf);
  return n == 0 ? ptic_error : ClassifyInstruction(buf, n, block.mode);
}

uint8_t BlockEndSize(struct pt_image_section_cache* iscache, const struct pt_block& block) {
  uint8_t buf[16];
  const size_t n = ReadBlockEnd(iscache, block, buf);
  ZydisDecodedInstruction insn;
  return n != 0 && Decode(buf, n, block.mode, &insn) ? insn.length : 0;
}

}  // namespace ptsnap::decode
