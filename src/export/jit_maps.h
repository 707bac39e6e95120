// JIT code for the perf.data export (docs/perf-interop.md, "JIT code"), as
// `perf inject --jit` would add it: every piece of JIT code the decoder
// uses (the emulator's capture, DIR/jit/code-PID.bin, and on hardware
// traces the code loads and moves of the runtime's jitdump,
// DIR/jit/jit-PID.dump) becomes a small ELF file (jit_elf.h) named from
// the same perf map and jitdump names the decoder uses, and a
// PERF_RECORD_MMAP2 that maps it into the process at the code's address,
// early enough that perf's decoder has it before the code runs.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "ptsnap/result.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

namespace ptsnap::exporter {

// One mapping of JIT code.
struct JitMap {
  int32_t pid = 0;
  uint32_t tid = 0;
  uint64_t time = 0;  // the code's first run (capture) or load (jitdump), perf clock
  uint64_t addr = 0, len = 0;
  // The rewritten code of a capture (jit_code.h's kJitCodeReplaces): the
  // emulator put a PSB+ at its first instruction, and the old bytes ran
  // until then, so it is mapped at `time` exactly.
  bool replaces = false;
  // A jitdump's load or move: mapped at the runtime's time, as perf inject
  // does.
  bool runtime_time = false;
  size_t file = 0;        // index into JitCode::files (a move maps its load's file)
  uint64_t map_time = 0;  // set by PlaceJitMaps
};

// One ELF file to write: DIR/jitted-PID-SEQ.so.
struct JitFile {
  int32_t pid = 0;
  uint32_t seq = 0;
  std::string bytes;
  std::string build_id;  // raw, jit_elf.h's JitBuildId
};

struct JitCode {
  std::vector<JitMap> maps;  // in time order
  std::vector<JitFile> files;
  std::vector<std::string> warnings;  // files of the trace that could not be used
};

// Reads `trace`'s JIT code for its manifest's pids. Files that are absent
// give nothing; unreadable or malformed ones give a warning (what parsed
// before the problem is kept). Emulated traces take only names from a
// jitdump (its times are the host's, the capture has the bytes), as the
// decoder does (decode/address_spaces.h).
JitCode ReadJitCode(const trace::TraceReader& trace);

// Sets each map's map_time, given the sideband (time-ordered, times as the
// export writes them; `maps` in the same clock): a runtime's load at its
// time; rewritten code at its first run; any other captured code as early
// as nothing can be hurt by it: right after the latest of the process's
// exec or fork, the last mapping of the process that overlaps the code,
// and the placement of earlier code overlapping it. perf decodes the trace
// up to each sideband record's time before it applies the record, with
// timestamps that lag the instructions (the last timing packet), so a map
// at the code's first run would come after perf needs it.
void PlaceJitMaps(std::vector<JitMap>* maps, const std::vector<trace::Record>& sideband);

// The file name of `f` (jitted-PID-SEQ.so, as perf inject names its own).
std::string JitFileName(const JitFile& f);

}  // namespace ptsnap::exporter
