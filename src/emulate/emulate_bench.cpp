// emulate_bench: measures the emulated PT source end to end (RecordEmulated:
// QEMU + plugin + trace directory). For each workload and mode it prints
// guest instructions per second and PT bytes per second, and with --verify
// decodes the streams with libipt and checks the counts. Run through
// tools/bench-emulate.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "base/file_util.h"
#include "emulate/decode_check.h"
#include "emulate/emulate.h"
#include "trace/trace_dir.h"

using namespace ptsnap;
namespace fs = std::filesystem;

namespace {

struct Figures {
  double seconds = 0;
  uint64_t insns = 0, bytes = 0, decoded = 0;
  bool exact = true;
};

Figures Run(const std::vector<std::string>& cmd, bool full, bool verify, const fs::path& dir) {
  record::RecordOptions o;
  o.command = cmd;
  o.full_execution = full;
  fs::remove_all(dir);
  auto t0 = std::chrono::steady_clock::now();
  auto r = emulate::RecordEmulated(o, dir);
  auto t1 = std::chrono::steady_clock::now();
  Figures f;
  f.seconds = std::chrono::duration<double>(t1 - t0).count();
  if (!r) {
    std::fprintf(stderr, "bench: %s\n", r.error().ToString().c_str());
    std::exit(1);
  }
  auto reader = trace::TraceReader::Open(dir);
  for (const auto& s : reader->manifest().streams) f.bytes += s.size;
  std::istringstream in(*base::ReadFile(dir / "emulator-stats.txt"));
  std::string kind;
  uint64_t id, tid, insns, hash;
  std::map<uint64_t, uint64_t> per_stream;
  while (in >> kind >> id >> tid >> insns >> hash) {
    f.insns += insns;
    per_stream[id] = insns;
  }
  if (verify) {
    std::vector<emulate::ImageSection> sections;
    auto sb = reader->ReadSideband();
    for (const auto& rec : sb->records)
      if (rec.type == PERF_RECORD_MMAP2) {
        const auto& m = std::get<trace::Mmap2>(rec.body);
        sections.push_back({m.filename, m.pgoff, m.len, m.addr});
      }
    for (const auto& s : reader->manifest().streams) {
      auto data = *reader->ReadStream(s);
      emulate::DecodeCheckOptions opts;
      opts.hash = false;
      auto d = emulate::DecodeCheck({reinterpret_cast<const uint8_t*>(data.data()), data.size()},
                                    sections, opts);
      f.decoded += d ? d->insns : 0;
      if (!d || d->errors != 0 || (full && d->insns != per_stream[s.id])) f.exact = false;
    }
  }
  return f;
}

}  // namespace

int main(int argc, char** argv) {
  bool verify = false;
  std::vector<std::string> cmd;
  std::string label = "workload";
  std::string keep;  // --keep DIR: record once (snapshot mode) into DIR and stop
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--verify") == 0) {
      verify = true;
    } else if (std::strcmp(argv[i], "--keep") == 0 && i + 1 < argc) {
      keep = argv[++i];
    } else if (std::strcmp(argv[i], "--label") == 0 && i + 1 < argc) {
      label = argv[++i];
    } else if (std::strcmp(argv[i], "--") == 0) {
      for (++i; i < argc; ++i) cmd.push_back(argv[i]);
    }
  }
  if (cmd.empty()) {
    std::fprintf(stderr,
                 "usage: emulate_bench [--verify] [--label L] [--keep DIR] -- CMD ARGS...\n");
    return 2;
  }
  // The workload's own output goes to /dev/null; figures to the real stdout.
  std::fflush(stdout);
  int saved = ::dup(1);
  int null = ::open("/dev/null", O_WRONLY);
  ::dup2(null, 1);
  ::close(null);
  FILE* out = ::fdopen(saved, "w");
  fs::path dir = fs::temp_directory_path() / ("ptsnap-bench-" + std::to_string(::getpid()));
  if (!keep.empty()) {
    record::RecordOptions o;
    o.command = cmd;
    auto r = emulate::RecordEmulated(o, keep);
    if (!r) {
      std::fprintf(stderr, "bench: %s\n", r.error().ToString().c_str());
      return 1;
    }
    std::fprintf(out, "trace directory: %s (program exit status %d)\n", keep.c_str(), *r);
    return 0;
  }
  for (bool full : {false, true}) {
    Figures f = Run(cmd, full, verify, dir);
    std::fprintf(out,
                 "%-12s %-9s %8.3f s  %12llu insns  %7.1f M insn/s  %10llu PT bytes  %7.2f MB/s  "
                 "%.3f bits/insn%s\n",
                 label.c_str(), full ? "full" : "snapshot", f.seconds,
                 static_cast<unsigned long long>(f.insns), f.insns / f.seconds / 1e6,
                 static_cast<unsigned long long>(f.bytes), f.bytes / f.seconds / 1e6,
                 f.insns ? 8.0 * f.bytes / f.insns : 0.0,
                 verify ? (f.exact ? "  decode: exact" : "  decode: MISMATCH") : "");
    std::fflush(out);
  }
  fs::remove_all(dir);
  return 0;
}
