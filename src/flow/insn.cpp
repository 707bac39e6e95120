// Instruction decoding for the flow decoder (insn.h): Zydis, with the
// encodings libipt's length decoder sizes and Zydis refuses.
#include "flow/insn.h"

#include <Zydis/Zydis.h>

#include <array>
#include <cstring>

namespace ptsnap::flow {

namespace {

const ZydisDecoder& ZydisFor(ExecMode mode) {
  static const std::array<ZydisDecoder, 4> decoders = [] {
    std::array<ZydisDecoder, 4> d{};
    // libipt's length decoder treats an unknown mode like 16-bit code.
    ZydisDecoderInit(&d[0], ZYDIS_MACHINE_MODE_LEGACY_16, ZYDIS_STACK_WIDTH_16);
    ZydisDecoderInit(&d[1], ZYDIS_MACHINE_MODE_LEGACY_16, ZYDIS_STACK_WIDTH_16);
    ZydisDecoderInit(&d[2], ZYDIS_MACHINE_MODE_LEGACY_32, ZYDIS_STACK_WIDTH_32);
    ZydisDecoderInit(&d[3], ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    return d;
  }();
  return decoders[static_cast<size_t>(mode) & 3];
}

// Encodings Zydis refuses that libipt's table-driven length decoder
// (pt_ild) still sizes: in 64-bit mode the one-byte opcodes of 32-bit mode;
// in every mode group opcodes with an undefined ModRM.reg (sized like
// their /0 form, but C7 /1-/6 have no immediate) and 0f ae with a register
// operand and an undefined ModRM.reg (PTWRITE's /4 without its f3).
// Returns the length (0: not such an instruction).
size_t UndefinedLength(const uint8_t* bytes, size_t n, ExecMode mode, InsnClass* iclass) {
  const bool long_mode = mode == ExecMode::k64;
  size_t i = 0;
  while (i < n && i < 14) {
    const uint8_t b = bytes[i];
    const bool legacy = b == 0x66 || b == 0x67 || b == 0xf2 || b == 0xf3 || b == 0xf0 ||
                        b == 0x2e || b == 0x36 || b == 0x3e || b == 0x26 || b == 0x64 || b == 0x65;
    if (!legacy && !(long_mode && (b & 0xf0) == 0x40)) break;
    ++i;
  }
  if (i >= n) return 0;
  *iclass = InsnClass::kOther;
  if (bytes[i] == 0x0f) {
    return i + 2 < n && bytes[i + 1] == 0xae && (bytes[i + 2] >> 6) == 3 ? i + 3 : 0;
  }
  if (long_mode) {
    switch (bytes[i]) {
      case 0x06:
      case 0x07:
      case 0x0e:
      case 0x16:
      case 0x17:
      case 0x1e:
      case 0x1f:
      case 0x27:
      case 0x2f:
      case 0x37:
      case 0x3f:
      case 0x60:
      case 0x61:
      case 0xd6: return i + 1;
      case 0xce: *iclass = InsnClass::kFarCall; return i + 1;  // INTO
      case 0xd4:
      case 0xd5: return i + 2 <= n ? i + 2 : 0;                                 // AAM, AAD
      case 0x9a: *iclass = InsnClass::kFarCall; return i + 7 <= n ? i + 7 : 0;  // CALL ptr16:32
      case 0xea: *iclass = InsnClass::kFarJump; return i + 7 <= n ? i + 7 : 0;  // JMP ptr16:32
      default: break;
    }
  }
  switch (bytes[i]) {
    case 0x82:
    case 0x8f:
    case 0xc6:
    case 0xc7:
    case 0xfe:
    case 0xff: {
      if (i + 1 >= n) return 0;
      uint8_t tmp[15];
      const size_t m = n < sizeof tmp ? n : sizeof tmp;
      std::memcpy(tmp, bytes, m);
      const unsigned reg = (tmp[i + 1] >> 3) & 7;
      if (tmp[i] == 0x82) {
        tmp[i] = 0x80;
      } else if (tmp[i] == 0xc7 && reg != 0 && reg != 7) {
        tmp[i] = 0x8b;  // the same ModRM, SIB and displacement, no immediate
      } else {
        tmp[i + 1] = static_cast<uint8_t>(tmp[i + 1] & ~0x38);  // ModRM.reg = 0
      }
      ZydisDecodedInstruction zi;
      if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&ZydisFor(mode), nullptr, tmp, m, &zi)))
        return 0;
      return zi.length;
    }
    default: return 0;
  }
}

}  // namespace

// Decodes the instruction at `ip` from `bytes` (n of them). False when it
// cannot be decoded (libipt: -pte_bad_insn).
bool DecodeInsn(const uint8_t* bytes, size_t n, uint64_t ip, ExecMode mode, Insn* out) {
  ZydisDecodedInstruction zi;
  out->ip = ip;
  out->is_direct = false;
  out->disp = 0;
  out->changes_cr3 = false;
  out->vm_entry = false;
  out->vmptrld = false;
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeInstruction(&ZydisFor(mode), nullptr, bytes, n, &zi))) {
    InsnClass c = InsnClass::kOther;
    const size_t len = UndefinedLength(bytes, n, mode, &c);
    if (len == 0) return false;
    out->size = static_cast<uint8_t>(len);
    out->iclass = c;
    return true;
  }
  out->size = zi.length;
  out->vm_entry = zi.mnemonic == ZYDIS_MNEMONIC_VMLAUNCH || zi.mnemonic == ZYDIS_MNEMONIC_VMRESUME;
  // pt_ild looks at the opcode and ModRM only, so VMCLEAR (66) and VMXON
  // (f3) count too.
  out->vmptrld = zi.opcode_map == ZYDIS_OPCODE_MAP_0F && zi.opcode == 0xc7 &&
                 zi.raw.modrm.mod != 3 && zi.raw.modrm.reg == 6;
  const bool far = zi.meta.branch_type == ZYDIS_BRANCH_TYPE_FAR;
  const bool relative = (zi.attributes & ZYDIS_ATTRIB_IS_RELATIVE) != 0;
  auto set_rel = [&] {
    if (relative && zi.raw.imm[0].is_relative) {
      out->is_direct = true;
      out->disp = zi.raw.imm[0].value.s;
    }
  };
  switch (zi.mnemonic) {
    case ZYDIS_MNEMONIC_SYSCALL:
    case ZYDIS_MNEMONIC_SYSENTER:
    case ZYDIS_MNEMONIC_INT:
    case ZYDIS_MNEMONIC_INT1:
    case ZYDIS_MNEMONIC_INT3:
    case ZYDIS_MNEMONIC_INTO:
    case ZYDIS_MNEMONIC_VMCALL:
    case ZYDIS_MNEMONIC_VMMCALL: out->iclass = InsnClass::kFarCall; return true;
    case ZYDIS_MNEMONIC_SYSRET:
    case ZYDIS_MNEMONIC_SYSEXIT:
    case ZYDIS_MNEMONIC_IRET:
    case ZYDIS_MNEMONIC_IRETD:
    case ZYDIS_MNEMONIC_IRETQ:
    case ZYDIS_MNEMONIC_VMLAUNCH:
    case ZYDIS_MNEMONIC_VMRESUME: out->iclass = InsnClass::kFarReturn; return true;
    case ZYDIS_MNEMONIC_CALL:
      out->iclass = far ? InsnClass::kFarCall : InsnClass::kCall;
      if (!far) set_rel();
      return true;
    case ZYDIS_MNEMONIC_RET:
      out->iclass = far ? InsnClass::kFarReturn : InsnClass::kReturn;
      return true;
    case ZYDIS_MNEMONIC_JMP:
      out->iclass = far ? InsnClass::kFarJump : InsnClass::kJump;
      if (!far) set_rel();
      return true;
    case ZYDIS_MNEMONIC_PTWRITE: out->iclass = InsnClass::kPtwrite; return true;
    case ZYDIS_MNEMONIC_MOV:
      // MOV CR3, r64 (0f 22 /3).
      if (zi.opcode_map == ZYDIS_OPCODE_MAP_0F && zi.opcode == 0x22 && zi.raw.modrm.reg == 3)
        out->changes_cr3 = true;
      break;
    default: break;
  }
  if (zi.meta.category == ZYDIS_CATEGORY_COND_BR) {
    out->iclass = InsnClass::kCondJump;
    set_rel();
    return true;
  }
  out->iclass = InsnClass::kOther;
  return true;
}

}  // namespace ptsnap::flow
