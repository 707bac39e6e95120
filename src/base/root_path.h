// RootPath: where `/sys` and `/proc` live. Production code uses the real root
// ("/"); tests and `ptsnap probe --root DIR` point it at a captured tree, so
// every reader of kernel files takes a RootPath instead of a literal path.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

namespace ptsnap::base {

class RootPath {
 public:
  // The live system.
  RootPath() : root_("/") {}
  explicit RootPath(std::filesystem::path root) : root_(std::move(root)) {}

  // Maps an absolute system path ("/proc/kcore") into this root.
  [[nodiscard]] std::filesystem::path Resolve(std::string_view absolute) const;
  [[nodiscard]] const std::filesystem::path& root() const { return root_; }
  [[nodiscard]] bool IsLive() const { return root_ == "/"; }

 private:
  std::filesystem::path root_;
};

}  // namespace ptsnap::base
