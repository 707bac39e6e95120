// Fuzzes the sample parser and the stack builders on arbitrary bytes, with
// the layout taken from the input's first 16 bytes (sample_type, regs_user):
// nothing may crash or read outside the input, every sample's stack copy
// lies inside it, and the frames respect the depth cap.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "decode/samples.h"

namespace {

void Check(bool ok) {
  if (!ok) __builtin_trap();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptsnap::decode;
  if (size < 16) return 0;
  SampleLayout layout;
  std::memcpy(&layout.sample_type, data, 8);
  std::memcpy(&layout.regs_user, data + 8, 8);
  layout.read_format = layout.regs_user >> 48;
  layout.branch_hw_index = (layout.sample_type >> 63) != 0;
  std::span<const std::byte> bytes(reinterpret_cast<const std::byte*>(data) + 16, size - 16);
  SampleReader reader(bytes, layout);
  Sample s;
  uint64_t n = 0;
  while (reader.Next(&s)) {
    ++n;
    Check(s.stack_dyn_size <= s.stack.size());
    if (!s.stack.empty()) {
      Check(s.stack.data() >= bytes.data() &&
            s.stack.data() + s.stack.size() <= bytes.data() + bytes.size());
    }
    Check(CallchainFrames(s, false, 16).size() <= 16);
    Check(CallchainFrames(s, true, 16).size() <= 16);
    Check(LbrFrames(s, 16).size() <= 16);
  }
  const SampleStreamStats& st = reader.stats();
  Check(st.samples == n);
  Check(st.torn_bytes <= bytes.size());
  return 0;
}
