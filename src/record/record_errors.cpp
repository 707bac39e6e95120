#include "record/record_errors.h"

#include <cerrno>

#include "probe/explain.h"

namespace ptsnap::record {

Error ExplainThreadError(const Error& e, const Prepared& p) {
  const bool mmap = e.kind() == ErrorKind::kBufferMapping;
  ErrorKind kind = e.kind();
  if (e.errnum() == ESRCH) kind = ErrorKind::kProcessGone;
  if (!mmap && (e.errnum() == EACCES || e.errnum() == EPERM)) kind = ErrorKind::kPrivilege;
  if (e.errnum() == 0) return Error(e).WithKind(kind);
  return Error(probe::ExplainOpenFailure(e.errnum(), p.scope != trace::Scope::kUser, p.privileges,
                                         mmap, (p.hw.aux_pages + p.hw.data_pages + 1) * 4096,
                                         !p.cpus.empty()) +
               " (" + e.ToString() + ")")
      .WithKind(kind);
}

Error ExplainUprobeError(const Error& e) {
  if (e.errnum() == EACCES || e.errnum() == EPERM)
    return Error(std::string("--slower-than's entry and return probes are uprobes, which need ") +
                 kUprobePrivilege + ": " + e.ToString())
        .WithKind(ErrorKind::kPrivilege);
  return Error(e).WithKind(ErrorKind::kTrigger);
}

}  // namespace ptsnap::record
