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
#include <memory>
#include <span>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "decode/image_view.h"
#include "decode/jit_memory.h"
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
  // manifest's list (build-ids, copies). `views` (optional, must outlive
  // it) mirrors every image's sections (image_view.h).
  AddressSpaces(std::filesystem::path dir, std::vector<trace::Binary> binaries,
                struct pt_image_section_cache* iscache, const KernelImage& kernel,
                Symbolizer& symbolizer, DecodeStats& stats, ImageViews* views = nullptr);
  AddressSpaces(const AddressSpaces&) = delete;
  AddressSpaces& operator=(const AddressSpaces&) = delete;

  // Takes one sideband record, in time order: MMAP2 (of executable pages)
  // and MMAP add a mapping, COMM with the exec flag starts an empty space,
  // FORK copies the parent's current space, KSYMBOL of a BPF program or
  // out-of-line kernel code names its addresses from then on (or, with the
  // unregister flag, no longer: Symbolizer::AddKernelSymbol); every other
  // record is ignored.
  // Missing or changed files are counted and warned about in the stats.
  //
  // Code loads queued by LoadJit are applied first, each before the first
  // record later than it.
  void Apply(const trace::Record& rec);

  // JIT code (docs/decoding.md, "JIT code") of each of the manifest's
  // pids, queued to be added at its time: the code the emulator captured
  // (DIR/jit/code-PID.bin, trace/jit_code.h) and, on hardware traces, the
  // code loads of the runtime's jitdump (DIR/jit/jit-PID.dump,
  // trace/jitdump.h; timestamps TSC or CLOCK_MONOTONIC, taken as the perf
  // clock). Emulated traces take only names from a jitdump: its timestamps
  // are the host's, not the virtual clock, and the capture has the bytes.
  // A load's JIT_CODE_DEBUG_INFO gives its source lines (the Symbolizer's
  // SetJitLines): on hardware traces in the space the load went into, at
  // its time; in emulated ones, like the names, in every space the process
  // had (the file's last load at an address wins).
  // Unreadable or malformed files are warnings in the stats (what parsed
  // before the problem is kept); a torn last record is dropped.
  void LoadJit(const trace::Manifest& manifest);
  // After the last Apply: the code loads still queued, then the JIT symbol
  // maps of `pids` (DIR/jit/perf-PID.map, the recording host's as recording
  // ended) for every address space each process had.
  void FinishSideband(const std::vector<int32_t>& pids);
  // `code` ran from memory at `addr` in process `pid` from `time` on: held
  // in the space's JitMemory (read by libipt where no section maps the
  // address: a file section over the same addresses wins) and named "[jit]"
  // for the Symbolizer. Bytes that differ from code held there start a new
  // space (a copy) at `time`, as an mmap replacing code does.
  void AddCode(int32_t pid, uint64_t time, uint64_t addr, std::span<const uint8_t> code);

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
  // The space's JIT memory, created (and served to its image) on first use.
  JitMemory& Jit(int32_t space);
  // Serves the space's JIT memory, when it has one, to `image`.
  void AttachJit(int32_t space, struct pt_image* image);
  void ApplyQueuedCode(uint64_t before);
  void ApplyKsymbol(uint64_t time, const trace::Ksymbol& k);

  std::filesystem::path dir_;
  std::vector<trace::Binary> binaries_;
  struct pt_image_section_cache* iscache_;
  const KernelImage& kernel_;
  Symbolizer& symbolizer_;
  DecodeStats& stats_;
  ImageViews* views_;
  // pt_image_copy and pt_image_add_cached, mirrored in views_.
  void CopyImage(struct pt_image* dst, const struct pt_image* src);
  void AddSection(struct pt_image* image, int isid);

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
  std::unordered_map<int32_t, std::unique_ptr<JitMemory>> jit_;         // by space
  // LoadJit's queue, in time order (stable: file order within a time), and
  // the files' contents the loads point into.
  struct QueuedCode {
    int32_t pid = 0;
    uint64_t time = 0, addr = 0;
    std::span<const uint8_t> code;
    bool jitdump = false;             // a jitdump load: sets the code's source lines
    const JitLines* lines = nullptr;  // its JIT_CODE_DEBUG_INFO (kept by the Symbolizer)
  };
  std::vector<QueuedCode> queued_code_;
  size_t next_code_ = 0;
  std::vector<std::unique_ptr<std::string>> jit_files_;
  std::unordered_map<int32_t, std::vector<elf::SymbolTable>> jit_names_;  // by pid: jitdump names
  // By pid, emulated traces: a jitdump's loads and moves with their source
  // lines, in file order, set in every space at FinishSideband.
  struct UntimedLines {
    uint64_t addr = 0, len = 0;
    const JitLines* lines = nullptr;
  };
  std::unordered_map<int32_t, std::vector<UntimedLines>> jit_lines_;
  void LoadJitdump(const trace::Manifest& manifest, int32_t pid);
  // The file `rel`, kept for the decode (nullptr: absent, or a warning).
  const std::string* KeepJitFile(const std::filesystem::path& rel);
};

}  // namespace ptsnap::decode
