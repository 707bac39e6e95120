#include "ptsnap/result.h"

#include <cstring>

namespace ptsnap {

std::string Error::ToString() const {
  std::string out;
  for (auto it = context_.rbegin(); it != context_.rend(); ++it) {
    out += *it;
    out += ": ";
  }
  out += message_;
  if (errnum_ != 0) {
    out += ": ";
    out += std::strerror(errnum_);
  }
  return out;
}

}  // namespace ptsnap
