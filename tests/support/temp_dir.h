// TempDir: a fresh directory removed (recursively) on destruction, with
// helpers to lay out fake /sys and /proc trees.
#pragma once

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>

namespace ptsnap::testing {

class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base ? base : "/tmp") + "/ptsnap-test-XXXXXX";
    char* p = ::mkdtemp(tmpl.data());
    if (p == nullptr) std::abort();
    path_ = p;
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  [[nodiscard]] const std::filesystem::path& path() const { return path_; }

  // Writes `content` to path()/relative, creating parent directories.
  std::filesystem::path Write(std::string_view relative, std::string_view content,
                              mode_t mode = 0644) const {
    std::filesystem::path p = path_ / std::filesystem::path(relative);
    std::filesystem::create_directories(p.parent_path());
    {
      std::ofstream out(p, std::ios::binary | std::ios::trunc);
      out.write(content.data(), static_cast<std::streamsize>(content.size()));
    }
    ::chmod(p.c_str(), mode);
    return p;
  }

  std::filesystem::path Mkdir(std::string_view relative) const {
    std::filesystem::path p = path_ / std::filesystem::path(relative);
    std::filesystem::create_directories(p);
    return p;
  }

 private:
  std::filesystem::path path_;
};

// A tmpfs of `size` (mount's syntax: "1m", "8m") mounted at `at` (created)
// for disk-full tests, unmounted (lazily) on destruction. Needs root:
// mounted() is false, and the test should skip saying so, without it.
class SmallTmpfs {
 public:
  SmallTmpfs(std::filesystem::path at, const std::string& size) : at_(std::move(at)) {
    std::filesystem::create_directories(at_);
    mounted_ =
        std::system(("mount -t tmpfs -o size=" + size + " tmpfs '" + at_.string() + "' 2>/dev/null")
                        .c_str()) == 0;
  }
  ~SmallTmpfs() {
    if (mounted_) (void)std::system(("umount -l '" + at_.string() + "'").c_str());
  }
  SmallTmpfs(const SmallTmpfs&) = delete;
  SmallTmpfs& operator=(const SmallTmpfs&) = delete;

  [[nodiscard]] bool mounted() const { return mounted_; }
  [[nodiscard]] const std::filesystem::path& path() const { return at_; }

 private:
  std::filesystem::path at_;
  bool mounted_ = false;
};

}  // namespace ptsnap::testing
