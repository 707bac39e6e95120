// Instruction classification with Zydis, for the blocks libipt hands over
// without a class. Owns no state: pure functions of the bytes (and, for a
// block's end, of the section cache that holds them).
#pragma once

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>

namespace ptsnap::decode {

// The class of the x86 instruction at the start of `bytes` (decoded with
// Zydis in `mode`), as libipt names it: ptic_far_call for syscall/sysenter/
// int/far call, ptic_far_return for sysret/sysexit/iret/far ret, and so on;
// ptic_error when the bytes do not decode. Pure.
enum pt_insn_class ClassifyInstruction(const uint8_t* bytes, size_t size, enum pt_exec_mode mode);

// The class of `block`'s last instruction, read from the section of
// `iscache` that holds it (or from the block's own copy of an instruction
// that spans two sections). libipt leaves `block.iclass` at ptic_error for
// blocks it serves from its block cache that end in an indirect jump or a
// far transfer (its ptbq_indirect entries): the second `syscall` or
// `sysret` from one site. Returns ptic_error when the bytes cannot be read.
enum pt_insn_class ClassifyBlockEnd(struct pt_image_section_cache* iscache,
                                    const struct pt_block& block);

// The length in bytes of `block`'s last instruction, read as
// ClassifyBlockEnd reads it; 0 when its bytes cannot be read or decoded.
uint8_t BlockEndSize(struct pt_image_section_cache* iscache, const struct pt_block& block);

}  // namespace ptsnap::decode
