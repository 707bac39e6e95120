// PerfEvent: one perf event and its mappings (user page + data ring, and
// optionally the AUX area), owned together. Move-only; created only through
// Open(), so an instance is always fully set up. Closing order on
// destruction: AUX, data ring, fd (the kernel requires the AUX mapping to go
// before the data mapping it hangs off).
#pragma once

#include <linux/perf_event.h>
#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

#include "base/mapped_region.h"
#include "base/unique_fd.h"
#include "ptsnap/result.h"

namespace ptsnap::perf {

struct MapSpec {
  size_t data_pages = 0;  // data ring pages (a power of two); 0: do not map at all
  size_t aux_pages = 0;   // AUX pages (a power of two); 0: no AUX area
  // PROT_READ|PROT_WRITE AUX gives full-execution mode (the kernel never
  // overwrites unread data); PROT_READ gives snapshot (overwrite) mode.
  bool aux_writable = false;
};

class PerfEvent {
 public:
  // perf_event_open(attr, pid, cpu, group_fd) then the mappings in `map`.
  // `what` names the event in errors ("intel_pt event for tid 42"). Errors
  // keep errno. `group_fd` -1: its own group; else a member of that
  // leader's group (same pid and cpu as the leader, or EINVAL).
  static Result<PerfEvent> Open(const perf_event_attr& attr, pid_t pid, int cpu, const MapSpec& map,
                                std::string what, int group_fd = -1);

  PerfEvent(PerfEvent&&) noexcept = default;
  PerfEvent& operator=(PerfEvent&&) noexcept;
  ~PerfEvent();

  Result<void> Enable() const;   // PERF_EVENT_IOC_ENABLE
  Result<void> Disable() const;  // PERF_EVENT_IOC_DISABLE (synchronous: hardware stopped on return)
  // PERF_EVENT_IOC_REFRESH: enable for `count` overflows, then disable again.
  Result<void> Refresh(int count) const;
  // PERF_EVENT_IOC_SET_OUTPUT: this event's records go into `target`'s ring.
  // This event must not be mapped itself; same task (or CPU) as target.
  Result<void> SetOutput(const PerfEvent& target) const;
  // PERF_EVENT_IOC_SET_FILTER: address filters in the kernel's syntax
  // ("filter 0x1136/0x40@/usr/bin/prog"); on an AUX event before enabling.
  // Errors keep errno (EOPNOTSUPP: a per-CPU event or no IP filtering;
  // EINVAL: the kernel refused the string).
  Result<void> SetFilter(const std::string& filter) const;
  // PERF_EVENT_IOC_ID: the value in the sample_id trailer's identifier.
  Result<uint64_t> Id() const;

  [[nodiscard]] int fd() const { return fd_.get(); }
  [[nodiscard]] const std::string& what() const { return what_; }
  [[nodiscard]] bool mapped() const { return !ring_.empty(); }
  // Valid only when mapped().
  [[nodiscard]] perf_event_mmap_page* header() const {
    return reinterpret_cast<perf_event_mmap_page*>(ring_.data());
  }
  [[nodiscard]] std::span<std::byte> data() const;
  [[nodiscard]] std::span<const std::byte> aux() const { return aux_.bytes(); }

 private:
  PerfEvent(base::UniqueFd fd, std::string what) : fd_(std::move(fd)), what_(std::move(what)) {}
  base::UniqueFd fd_;
  std::string what_;
  base::MappedRegion ring_;  // user page + data ring
  base::MappedRegion aux_;
};

}  // namespace ptsnap::perf
