// Inside the elf module only: libelf handles and the readers every libelf
// reader of the module shares.
#pragma once

#include <gelf.h>
#include <libelf.h>

#include <memory>
#include <string>
#include <vector>

#include "elf/segments.h"

namespace ptsnap::elf::internal {

struct ElfCloser {
  void operator()(Elf* e) const { elf_end(e); }
};
using ElfHandle = std::unique_ptr<Elf, ElfCloser>;

// The PT_LOAD program headers, in file order.
std::vector<Segment> LoadSegments(Elf* elf);

// The NT_GNU_BUILD_ID note as lowercase hex, or "" when there is none.
std::string BuildIdNote(Elf* elf);

}  // namespace ptsnap::elf::internal
