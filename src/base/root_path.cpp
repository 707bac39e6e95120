#include "base/root_path.h"

namespace ptsnap::base {

std::filesystem::path RootPath::Resolve(std::string_view absolute) const {
  while (!absolute.empty() && absolute.front() == '/') absolute.remove_prefix(1);
  return root_ / std::filesystem::path(absolute);
}

}  // namespace ptsnap::base
