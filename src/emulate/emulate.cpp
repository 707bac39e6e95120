// Placeholder until the emulated source lands; replaced by the emulator work.
#include "emulate/emulate.h"

namespace ptsnap::emulate {

Result<int> RecordEmulated(const record::RecordOptions&, const std::filesystem::path&) {
  return Error("--emulate is not available in this build");
}

}  // namespace ptsnap::emulate
