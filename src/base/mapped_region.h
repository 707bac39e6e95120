// MappedRegion: the one owner of an mmap()ed range. Move-only; munmaps on
// destruction. Created only through Map(), so an instance is always valid or
// empty (moved-from / default).
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <span>
#include <utility>

#include "ptsnap/result.h"

namespace ptsnap::base {

class MappedRegion {
 public:
  MappedRegion() = default;
  ~MappedRegion() { reset(); }
  MappedRegion(const MappedRegion&) = delete;
  MappedRegion& operator=(const MappedRegion&) = delete;
  MappedRegion(MappedRegion&& o) noexcept
      : addr_(std::exchange(o.addr_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  MappedRegion& operator=(MappedRegion&& o) noexcept {
    if (this != &o) {
      reset();
      addr_ = std::exchange(o.addr_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }

  // mmap(nullptr, size, prot, flags, fd, offset). Errors carry errno.
  static Result<MappedRegion> Map(size_t size, int prot, int flags, int fd, off_t offset);
  // Anonymous private read-write memory (tests, scratch buffers).
  static Result<MappedRegion> Anonymous(size_t size);

  [[nodiscard]] std::byte* data() const { return static_cast<std::byte*>(addr_); }
  [[nodiscard]] size_t size() const { return size_; }
  [[nodiscard]] std::span<std::byte> bytes() const { return {data(), size_}; }
  [[nodiscard]] bool empty() const { return addr_ == nullptr; }

  void reset();

 private:
  MappedRegion(void* addr, size_t size) : addr_(addr), size_(size) {}
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace ptsnap::base
