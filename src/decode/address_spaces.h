// Address spaces over time (docs/decoding.md, "Images"): each process's
// spaces in time order, built by applying the sideband (fork copies the
// parent's space, exec starts an empty one, an mmap of code adds a section
// or, over code from other bytes, starts a copy), each with its libipt image
// (the kernel's sections first) and its versions with text pokes applied,
// and the Symbolizer's mappings to match. Owns those images and the
// choice of file behind each mapping (copy in the trace, path on this
// machine, build-id check); the section cache, the kernel image, the
// Symbolizer and the stats are the caller's and must outlive it.
#pragma once

#include <intel-pt.h>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "decode/kernel_image.h"
#include "decode/libipt.h"
#include "decode/stats.h"
#include "decode/symbols.h"
#include "trace/manifest.h"
#include "trace/perf_record.h"

namespace ptsnap::decode {

// Symbolizer keys of address spaces after a process's first (which is the
// pid itself).
inline constexpr int32_t kFirstSpaceId = 0x20000000;

// A file mapping of code in an address space: [start, end) maps `file`
// (the path on this machine, after the build-id check) from offset `pgoff`.
struct CodeMapping {
  uint64_t start = 0, end = 0, pgoff = 0;
  std::filesystem::path file;
};

// Which file provides a mapping's bytes, after the build-id check.
struct MappedFile {
  std::filesystem::path path;  // on this machine; empty: none usable
  std::string why_not;         // when empty path: "build-id mismatch", "missing", "anonymous"
};

class AddressSpaces {
 public:
  // `dir` is the trace directory (binaries/, vdso/); `binaries` the
  // manifest's list (build-ids, copies).
  AddressSpaces(std::filesystem::path dir, std::vector<trace::Binary> binaries,
                struct pt_image_section_cache* iscache, const KernelImage& kernel,
                Symbolizer& symbolizer, DecodeStats& stats);
  AddressSpaces(const AddressSpaces&) = delete;
  AddressSpaces& operator=(const AddressSpaces&) = delete;

  // Takes one sideband record, in time order: MMAP2 (of executable pages)
  // and MMAP add a mapping, COMM with the exec flag starts an empty space,
  // FORK copies the parent's current space; every other record is ignored.
  // Missing or changed files are counted and warned about in the stats.
  void Apply(const trace::Record& rec);

  // The space `pid` had at `time`, and the time its next one starts
  // (UINT64_MAX: none). LastSpace: the one at the end of the recording.
  // A process the sideband never named has one space, its pid.
  [[nodiscard]] int32_t SpaceAt(int32_t pid, uint64_t time) const;
  [[nodiscard]] uint64_t NextSpaceChange(int32_t pid, uint64_t time) const;
  [[nodiscard]] int32_t LastSpace(int32_t pid) const;
  // Whether `space` began with an exec (a new program, not a copy).
  [[nodiscard]] bool IsExec(int32_t space) const { return exec_spaces_.count(space) != 0; }

  // The file mappings of code in `space` (every one the sideband added to
  // it, in address order): the modules a stack unwinder reports.
  [[nodiscard]] std::vector<CodeMapping> CodeMappings(int32_t space) const;

  // Space `space`'s image with the first `pokes` of the kernel's text pokes
  // applied (0: the space's own image), created on first use.
  struct pt_image* Image(int32_t space, size_t pokes);

 private:
  void AddMmap(int32_t pid, uint64_t time, uint64_t addr, uint64_t len, uint64_t pgoff,
               const std::string& filename, const std::string& build_id);
  // The space `pid` is in now (while walking the sideband), created on
  // first use with id `pid`.
  int32_t CurrentSpace(int32_t pid);
  // Starts a new address space for `pid` at `time`: a copy of the current
  // one (an mmap replaced mapped code) or an empty one (exec).
  int32_t NewSpace(int32_t pid, uint64_t time, bool copy);
  // The space's image (kernel sections copied in on creation).
  struct pt_image* Image(int32_t space);
  MappedFile Resolve(int32_t pid, const std::string& filename, const std::string& build_id);

  std::filesystem::path dir_;
  std::vector<trace::Binary> binaries_;
  struct pt_image_section_cache* iscache_;
  const KernelImage& kernel_;
  Symbolizer& symbolizer_;
  DecodeStats& stats_;

  std::unordered_map<int32_t, UniqueImage> images_;  // by space
  // Each process's address spaces in time order: {start time, space}.
  struct Epoch {
    uint64_t start = 0;
    int32_t space = 0;
  };
  std::unordered_map<int32_t, std::vector<Epoch>> epochs_;
  // The file mappings with code of each space, to tell a replacement (new
  // space) from an addition: [start, end) maps `file` at offset
  // address + delta (modular).
  struct CodeMap {
    uint64_t start = 0, end = 0;
    std::string file;  // path on this machine
    uint64_t delta = 0;
  };
  std::unordered_map<int32_t, std::vector<CodeMap>> code_maps_;
  int32_t next_space_ = kFirstSpaceId;
  std::unordered_set<int32_t> exec_spaces_;
  std::unordered_map<std::string, int> isids_;  // "path@off+size@vaddr" -> isid
  std::unordered_map<int32_t, std::vector<UniqueImage>> poked_images_;  // by space: [k - 1]
};

}  // namespace ptsnap::decode
