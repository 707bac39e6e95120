#include "perf/perf_event.h"

#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

#include "sys/perf_event.h"

namespace ptsnap::perf {
namespace {

Result<void> Ioctl(int fd, unsigned long req, unsigned long arg, const char* name,
                   const std::string& what) {
  if (::ioctl(fd, req, arg) != 0) return Error::FromErrno(std::string(name) + " on " + what);
  return Ok();
}

bool IsPowerOfTwo(size_t n) { return n != 0 && (n & (n - 1)) == 0; }

// A refused mmap of a perf buffer, whose EPERM/ENOMEM mean the locked-memory
// limits, not privilege: the recorder explains it by this kind.
Error MappingFailed(Error e, const std::string& what) {
  return std::move(e).AddContext("mapping " + what).WithKind(ErrorKind::kBufferMapping);
}

}  // namespace

PerfEvent& PerfEvent::operator=(PerfEvent&& o) noexcept {
  if (this != &o) {
    aux_.reset();
    ring_.reset();
    aux_ = std::move(o.aux_);
    ring_ = std::move(o.ring_);
    fd_ = std::move(o.fd_);
    what_ = std::move(o.what_);
  }
  return *this;
}

PerfEvent::~PerfEvent() {
  aux_.reset();
  ring_.reset();
}

Result<PerfEvent> PerfEvent::Open(const perf_event_attr& attr, pid_t pid, int cpu,
                                  const MapSpec& map, std::string what, int group_fd) {
  auto fd = sys::PerfEventOpen(attr, pid, cpu, group_fd);
  if (!fd) return std::move(fd).error().AddContext("opening " + what);
  PerfEvent ev(std::move(*fd), std::move(what));
  if (map.data_pages == 0) return ev;
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  if (!IsPowerOfTwo(map.data_pages))
    return Error("data ring of " + std::to_string(map.data_pages) + " pages is not a power of two");
  // uapi: the data mapping is 1 + 2^n pages; it must be writable so that
  // data_tail (and aux_offset/aux_size) can be written.
  auto ring = base::MappedRegion::Map((1 + map.data_pages) * page, PROT_READ | PROT_WRITE,
                                      MAP_SHARED, ev.fd(), 0);
  if (!ring) return MappingFailed(std::move(ring).error(), "the data ring of " + ev.what_);
  ev.ring_ = std::move(*ring);
  if (map.aux_pages == 0) return ev;
  if (!IsPowerOfTwo(map.aux_pages))
    return Error("AUX area of " + std::to_string(map.aux_pages) + " pages is not a power of two");
  perf_event_mmap_page* h = ev.header();
  // howto_capture.md: aux_offset = data_offset + data_size, aux_size = 2^m
  // pages, then map at that offset. Pre-4.1 kernels left data_offset 0.
  const uint64_t data_offset = h->data_offset != 0 ? h->data_offset : page;
  const uint64_t data_size = h->data_size != 0 ? h->data_size : map.data_pages * page;
  h->aux_offset = data_offset + data_size;
  h->aux_size = map.aux_pages * page;
  const int prot = map.aux_writable ? PROT_READ | PROT_WRITE : PROT_READ;
  auto aux = base::MappedRegion::Map(map.aux_pages * page, prot, MAP_SHARED, ev.fd(),
                                     static_cast<off_t>(h->aux_offset));
  if (!aux) return MappingFailed(std::move(aux).error(), "the AUX area of " + ev.what_);
  ev.aux_ = std::move(*aux);
  return ev;
}

std::span<std::byte> PerfEvent::data() const {
  if (ring_.empty()) return {};
  const perf_event_mmap_page* h = header();
  const size_t page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  const size_t off = h->data_offset != 0 ? h->data_offset : page;
  const size_t size = h->data_size != 0 ? h->data_size : ring_.size() - page;
  return ring_.bytes().subspan(off, size);
}

Result<void> PerfEvent::Enable() const {
  return Ioctl(fd(), PERF_EVENT_IOC_ENABLE, 0, "PERF_EVENT_IOC_ENABLE", what_);
}
Result<void> PerfEvent::SetFilter(const std::string& filter) const {
  if (::ioctl(fd(), PERF_EVENT_IOC_SET_FILTER, filter.c_str()) != 0)
    return Error::FromErrno("PERF_EVENT_IOC_SET_FILTER \"" + filter + "\" on " + what_);
  return Ok();
}
Result<void> PerfEvent::Disable() const {
  return Ioctl(fd(), PERF_EVENT_IOC_DISABLE, 0, "PERF_EVENT_IOC_DISABLE", what_);
}
Result<void> PerfEvent::Refresh(int count) const {
  return Ioctl(fd(), PERF_EVENT_IOC_REFRESH, static_cast<unsigned long>(count),
               "PERF_EVENT_IOC_REFRESH", what_);
}
Result<void> PerfEvent::SetOutput(const PerfEvent& target) const {
  return Ioctl(fd(), PERF_EVENT_IOC_SET_OUTPUT, static_cast<unsigned long>(target.fd()),
               "PERF_EVENT_IOC_SET_OUTPUT", what_);
}
Result<uint64_t> PerfEvent::Id() const {
  uint64_t id = 0;
  if (::ioctl(fd(), PERF_EVENT_IOC_ID, &id) != 0)
    return Error::FromErrno("PERF_EVENT_IOC_ID on " + what_);
  return id;
}

}  // namespace ptsnap::perf
