#include "base/mapped_region.h"

#include <cerrno>
#include <string>

namespace ptsnap::base {

Result<MappedRegion> MappedRegion::Map(size_t size, int prot, int flags, int fd, off_t offset) {
  void* addr = ::mmap(nullptr, size, prot, flags, fd, offset);
  if (addr == MAP_FAILED) {
    return Error::FromErrno("mmap of " + std::to_string(size) + " bytes");
  }
  return MappedRegion(addr, size);
}

Result<MappedRegion> MappedRegion::Anonymous(size_t size) {
  return Map(size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
}

void MappedRegion::reset() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
  addr_ = nullptr;
  size_ = 0;
}

}  // namespace ptsnap::base
