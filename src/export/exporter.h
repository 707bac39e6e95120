// Exports a ptsnap trace directory as perf.data, so that `perf script`,
// `perf report` and hotspot read ptsnap recordings with perf's own Intel PT
// decoder (which does not use libipt).
//
// What is written (shared/reference/perf-data.md lists what perf 6.1 needs):
//  - attrs: the intel_pt event (recorded type and config) with one id per
//    AUX stream, and a tracking dummy event that owns the sideband;
//  - AUXTRACE_INFO with Intel PT's private fields from the manifest, TIME_CONV;
//  - the sideband records (COMM, MMAP/MMAP2, FORK, EXIT, ITRACE_START,
//    SWITCH, ...) with their sample ids rewritten to the dummy event; vdso
//    mappings point at the dumped vdso when the trace directory has one;
//  - one AUXTRACE record per stream (split only at PSBs, and only when a
//    stream exceeds the split limit), queue index per thread (per-thread
//    recordings) or per CPU;
//  - features: AUXTRACE index, event description, build-ids, OS release,
//    command line;
//  - JIT code (jit_maps.h), when ExportOptions::jit_dir is set: one small
//    ELF file per code load, to be written into jit_dir, and an MMAP2 of it
//    at the code's address and time; the processes' anonymous executable
//    mappings (//anon, [anon:, /memfd:) are left out, as perf inject --jit
//    leaves them out, so they do not cover the code.
//
// Sampled traces (source "sampled", docs/perf-interop.md "Sampled traces")
// are written as `perf record` writes its samples: one attr, the recorded
// sampling event (type, config, sample_type, freq and sample_freq or the
// period, regs/stack/branch settings), holding the samples, with their ids
// rewritten to its one id, and the sideband (COMM, MMAP2, FORK, EXIT, ...)
// in time order, plus (dwarf) the read-only segments of every mapped ELF
// file (DataSegmentMappings); features: build-ids, event description, OS release,
// command line. Overlapping samples of --multi-snapshot rings are written
// once.
//
// Kernel-scope recordings with a copied kernel image are written in perf's
// directory format: OUT/data plus OUT/kcore_dir/{kallsyms,modules,kcore},
// with the kernel map (up to _etext) and one map per module, as perf record
// --kcore writes them.
//
// Crash traps perf 6.1 has on timed streams are avoided: every AUXTRACE
// `reference` is non-zero, ITRACE_START/COMM records are never later than
// the first TSC of their thread's first stream, and a stream whose TSC starts
// at 0 (perf SIGSEGVs on it) has its whole timeline, PT and sideband, moved
// by a constant (ExportReport::tsc_shift).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include "elf/segments.h"
#include "export/jit_maps.h"
#include "ptsnap/result.h"
#include "sys/kallsyms.h"
#include "trace/trace_dir.h"

namespace ptsnap::exporter {

// PMU type written for emulated recordings (whose manifest has none): a
// dynamic PMU number, as intel_pt gets on real machines.
inline constexpr uint32_t kEmulatedPmuType = 8;
// Streams larger than this are cut into several AUXTRACE records at PSBs.
inline constexpr uint64_t kDefaultSplitLimit = 1ULL << 30;

struct ExportOptions {
  uint64_t split_limit = kDefaultSplitLimit;
  bool force = false;  // overwrite an existing output
  // Where the JIT code's ELF files will lie (absolute; ExportTrace: OUT.jit
  // beside a file, OUT/jit in perf's directory format). Empty: JIT code is
  // not exported.
  std::filesystem::path jit_dir;
};

struct ExportReport {
  std::filesystem::path data_file;  // the perf.data file itself
  bool directory = false;           // perf's directory format (kcore_dir)
  uint64_t auxtrace_records = 0;
  bool sampled = false;     // a sampled trace: samples, no AUXTRACE
  uint64_t samples = 0;     // sampled traces: PERF_RECORD_SAMPLE records written
  uint64_t torn_bytes = 0;  // sampled traces: cut-short stream tails left out
  uint64_t sideband_records = 0;
  // Sideband types perf has no use for (AUX, LOST); fp samples whose fields
  // do not fit their size (the decoder skips them too).
  uint64_t skipped_records = 0;
  uint64_t build_ids = 0;
  uint64_t bytes = 0;
  // TSC ticks added to every TSC packet and sideband time, because perf
  // crashes on a TSC of 0 (emulated recordings start their virtual TSC there).
  uint64_t tsc_shift = 0;
  uint64_t time_shift_ns = 0;  // the same shift on the perf clock
  // JIT code: ELF files written into jit_dir and MMAP2 records of them
  // (a jitdump's moves map a file again).
  std::filesystem::path jit_dir;
  uint64_t jit_files = 0, jit_maps = 0;
  std::vector<std::string> warnings;  // JIT files of the trace that could not be used
};

// The mappings of `layout`'s other (non-executable) load segments, as the
// kernel would have reported them with `mmap_data` for the file that
// `exec` maps executable code of: same process, time and file, the same
// load bias, whole pages, PROT_READ. perf's dwarf unwinder reads
// .eh_frame_hdr and .eh_frame through the process's maps, and those lie in
// a read-only segment that ptsnap's recording (which reads the file itself)
// never asks the kernel about. Empty when `exec`'s offset lies in no segment.
std::vector<trace::Mmap2> DataSegmentMappings(const trace::Mmap2& exec,
                                              const elf::LoadLayout& layout, uint64_t page_size);

// The attr.config perf needs: the recorded config, with the bits the
// manifest's booleans name set (emulated recordings record config 0).
uint64_t EffectiveConfig(const trace::PtConfig& pt);

// Pure: the perf.data bytes for an opened trace (reads stream files and the
// sideband through `trace`, and ELF files for build-ids). With
// options.jit_dir set and `jit_files` given, the JIT code's ELF files (to
// be written into jit_dir under JitFileName) go to `jit_files`.
Result<std::string> BuildPerfData(const trace::TraceReader& trace, const ExportOptions& options,
                                  ExportReport* report, std::vector<JitFile>* jit_files = nullptr);

// Writes `out` (a file, or a directory for kernel scopes with kcore), and
// the JIT code's ELF files into OUT.jit (a file) or OUT/jit (a directory)
// when the trace has JIT code. Errors: not a trace directory, a stream
// missing, `out` or OUT.jit exists (without force), not writable.
Result<ExportReport> ExportTrace(const std::filesystem::path& trace_dir,
                                 const std::filesystem::path& out, const ExportOptions& options);

}  // namespace ptsnap::exporter
