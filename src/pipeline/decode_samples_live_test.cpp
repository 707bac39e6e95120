// The sampled decode on real samples: this test opens a PERF_COUNT_SW_CPU_CLOCK
// sampling event itself (no PT, no hardware PMU needed) on a child running
// tests/programs/hot_paths.c, writes what the ring held into a trace
// directory as the sampled recorder does (docs/trace-format.md: samples
// streams, sideband), decodes it, and checks that the program's hot paths
// come out: main -> outer -> hot_leaf and main -> side -> cold_leaf.
// Callgraph fp on the frame-pointer build, dwarf (user registers and stack,
// unwound with libdwfl) on the -fomit-frame-pointer -O2 build. fp samples
// carry what `ptsnap run --sampling --callgraph-mode fp` records with them
// (perf/attr.h: BP, SP, IP and a 512-byte stack copy), so that a sample in a
// frameless leaf gets its caller back (decode/fp_mend.h):
// tests/programs/fp_leaf.c's hot_leaf under driver.
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "decode/samples.h"
#include "perf/attr.h"
#include "pipeline/pipeline.h"
#include "tests/support/temp_dir.h"
#include "trace/trace_dir.h"

namespace ptsnap::pipeline {
namespace {

constexpr uint64_t kFrequency = 4000;
constexpr uint32_t kStackUser = 8192;
constexpr size_t kDataPages = 4096;  // 16 MiB: dwarf samples are ~8.5 KB each

// Per thread, each frame's path from the outermost ("main;outer;hot_leaf")
// and the time spent under it.
class PathSink : public model::SliceSink {
 public:
  void OnProcess(int32_t, const std::string&) override {}
  void OnThread(int32_t, int32_t, const std::string&) override {}
  void OnSlice(const model::Slice& s) override {
    auto& stack = stacks_[s.tid];
    if (s.kind == model::Slice::kBegin) {
      stack.push_back(*s.name);
    } else if (s.kind == model::Slice::kEnd && !stack.empty()) {
      std::string path;
      for (const auto& n : stack) path += (path.empty() ? "" : ";") + n;
      ns[path] += s.ts - s.begin_ts;
      stack.pop_back();
    }
  }
  Result<void> Finish() override { return Ok(); }
  // Time under every path that ends with `suffix` (";main;outer;hot_leaf"
  // matches whatever libc frames lie above main).
  [[nodiscard]] uint64_t Under(const std::string& suffix) const {
    uint64_t t = 0;
    for (const auto& [path, n] : ns) {
      if (path == suffix.substr(1) || path.ends_with(suffix)) t += n;
    }
    return t;
  }
  std::map<std::string, uint64_t> ns;

 private:
  std::map<int32_t, std::vector<std::string>> stacks_;
};

struct Recorded {
  std::string samples, sideband;
  pid_t pid = 0;
  uint64_t sample_type = 0, regs_user = 0;
  uint32_t stack_user = 0;
};

// Copies the ring's new records out: samples to one buffer, everything
// else (mmap2, comm, exit, lost) to the sideband.
void Drain(perf_event_mmap_page* page, const std::byte* data, Recorded& out) {
  uint64_t head = __atomic_load_n(&page->data_head, __ATOMIC_ACQUIRE);
  uint64_t tail = page->data_tail;
  const uint64_t size = page->data_size;
  std::string rec;
  while (tail < head) {
    perf_event_header h;
    for (size_t i = 0; i < sizeof h; ++i) {
      reinterpret_cast<std::byte*>(&h)[i] = data[(tail + i) % size];
    }
    if (h.size == 0) break;
    rec.resize(h.size);
    for (size_t i = 0; i < h.size; ++i) rec[i] = static_cast<char>(data[(tail + i) % size]);
    (h.type == PERF_RECORD_SAMPLE ? out.samples : out.sideband) += rec;
    tail += h.size;
  }
  __atomic_store_n(&page->data_tail, tail, __ATOMIC_RELEASE);
}

// Runs `program` under a cpu-clock sampling event with `callgraph` "fp" or
// "dwarf" and returns what the ring held.
Recorded Record(const std::string& program, const std::string& callgraph) {
  Recorded out;
  int go[2];
  EXPECT_EQ(::pipe(go), 0);
  pid_t child = ::fork();
  if (child == 0) {
    ::close(go[1]);
    char c;
    if (::read(go[0], &c, 1) != 1) ::_exit(127);
    ::execl(program.c_str(), program.c_str(), nullptr);
    ::_exit(127);
  }
  ::close(go[0]);
  out.pid = child;
  perf_event_attr attr{};
  attr.size = sizeof attr;
  attr.type = PERF_TYPE_SOFTWARE;
  attr.config = PERF_COUNT_SW_CPU_CLOCK;
  attr.freq = 1;
  attr.sample_freq = kFrequency;
  attr.sample_type = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME |
                     PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD | PERF_SAMPLE_CALLCHAIN;
  if (callgraph == "dwarf") {
    attr.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    attr.exclude_callchain_user = 1;
    attr.sample_regs_user = decode::kPerfRegsUser;
    attr.sample_stack_user = kStackUser;
  } else {
    attr.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
    attr.sample_regs_user = perf::kFpUserRegsMask;
    attr.sample_stack_user = perf::kFpStackBytes;
  }
  out.sample_type = attr.sample_type;
  out.regs_user = attr.sample_regs_user;
  out.stack_user = attr.sample_stack_user;
  attr.disabled = 1;
  attr.enable_on_exec = 1;
  attr.exclude_kernel = 1;
  attr.exclude_hv = 1;
  attr.sample_id_all = 1;
  attr.mmap = 1;
  attr.mmap2 = 1;
  attr.comm = 1;
  attr.comm_exec = 1;
  attr.task = 1;
  int fd =
      static_cast<int>(::syscall(SYS_perf_event_open, &attr, child, -1, -1, PERF_FLAG_FD_CLOEXEC));
  if (fd < 0) {
    ADD_FAILURE() << "perf_event_open(cpu-clock sampling, " << callgraph
                  << "): " << std::strerror(errno)
                  << " (software events need perf_event_paranoid <= 2 for one's own child)";
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return out;
  }
  const size_t page_size = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  size_t len = (1 + kDataPages) * page_size;
  void* map = ::mmap(nullptr, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (map == MAP_FAILED) {
    ADD_FAILURE() << "mmap of the sampling ring: " << std::strerror(errno);
    ::close(fd);
    ::kill(child, SIGKILL);
    ::waitpid(child, nullptr, 0);
    return out;
  }
  auto* page = static_cast<perf_event_mmap_page*>(map);
  const auto* data = static_cast<const std::byte*>(map) + page->data_offset;
  EXPECT_EQ(::write(go[1], "g", 1), 1);
  ::close(go[1]);
  int status = 0;
  for (;;) {
    Drain(page, data, out);
    pid_t w = ::waitpid(child, &status, WNOHANG);
    if (w == child) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  Drain(page, data, out);
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << program << " status " << status;
  ::munmap(map, len);
  ::close(fd);
  return out;
}

std::filesystem::path WriteTrace(const std::filesystem::path& dir, const Recorded& r,
                                 const std::string& program, const std::string& callgraph) {
  trace::Manifest m;
  m.source = trace::Source::kSampled;
  m.mode = trace::Mode::kFull;
  m.scope = trace::Scope::kUser;
  m.command = {program};
  m.pids = {r.pid};
  trace::Sampling sa;
  sa.event = "cpu-clock";
  sa.type = PERF_TYPE_SOFTWARE;
  sa.config = PERF_COUNT_SW_CPU_CLOCK;
  sa.sample_type = r.sample_type;
  sa.frequency = kFrequency;
  sa.callgraph = callgraph;
  sa.regs_user = r.regs_user;
  sa.stack_user = r.stack_user;
  m.sampling = sa;
  std::filesystem::path trace_dir = dir / ("trace-" + callgraph);
  auto w = trace::TraceWriter::Create(trace_dir, m);
  EXPECT_TRUE(w) << w.error().ToString();
  if (!w) return trace_dir;
  auto as_bytes = [](const std::string& s) {
    return std::span<const std::byte>(reinterpret_cast<const std::byte*>(s.data()), s.size());
  };
  EXPECT_TRUE(w->AppendSideband(as_bytes(r.sideband)));
  trace::Stream st;
  st.kind = trace::StreamKind::kSamples;
  st.pid = r.pid;
  st.tid = r.pid;
  EXPECT_TRUE(w->AddStream(st, as_bytes(r.samples)));
  EXPECT_TRUE(w->Finish());
  return trace_dir;
}

// Records `program` with `callgraph` and decodes it into `paths`; the
// decode's report, or nullopt (with a failure).
std::optional<DecodeReport> RecordAndDecode(const std::string& program,
                                            const std::string& callgraph,
                                            ::ptsnap::testing::TempDir& tmp, PathSink& paths) {
  Recorded r = Record(program, callgraph);
  EXPECT_FALSE(r.samples.empty()) << "no samples recorded";
  if (r.samples.empty()) return std::nullopt;
  std::filesystem::path dir = WriteTrace(tmp.path(), r, program, callgraph);
  // PTSNAP_KEEP_SAMPLED_TRACES=DIR keeps a copy of each trace directory
  // (DIR/trace-fp, DIR/trace-dwarf) to try `ptsnap decode`/`info` on.
  if (const char* keep = std::getenv("PTSNAP_KEEP_SAMPLED_TRACES"); keep != nullptr) {
    std::filesystem::remove_all(std::filesystem::path(keep) / dir.filename());
    std::filesystem::create_directories(keep);
    std::filesystem::copy(dir, std::filesystem::path(keep) / dir.filename(),
                          std::filesystem::copy_options::recursive);
  }
  DecodeOptions o;
  o.output = tmp.path() / "trace.json";
  o.sink = &paths;
  auto start = std::chrono::steady_clock::now();
  auto report = DecodeTraceDir(dir, o);
  double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_TRUE(report) << report.error().ToString();
  if (!report) return std::nullopt;
  const auto& sp = report->sampled;
  std::printf(
      "%s: %llu samples decoded in %.3f s: %.0f samples/s (%llu complete, %llu truncated)\n",
      callgraph.c_str(), static_cast<unsigned long long>(sp.samples), secs,
      static_cast<double>(sp.samples) / secs, static_cast<unsigned long long>(sp.unwound),
      static_cast<unsigned long long>(sp.truncated));
  std::printf("%s", FormatReport(*report).c_str());
  return std::move(*report);
}

void CheckHotPaths(const std::string& program, const std::string& callgraph) {
  ::ptsnap::testing::TempDir tmp;
  PathSink paths;
  const std::optional<DecodeReport> report = RecordAndDecode(program, callgraph, tmp, paths);
  ASSERT_TRUE(report.has_value());
  const auto& sp = report->sampled;
  EXPECT_TRUE(sp.sampled);
  EXPECT_EQ(sp.callgraph, callgraph);
  EXPECT_EQ(sp.period_ns, 1'000'000'000 / kFrequency);
  // ~0.5 s of CPU at 4 kHz; a loaded machine runs it slower, never faster.
  EXPECT_GT(sp.samples, 300u);
  EXPECT_EQ(sp.bad_records, 0u);
  EXPECT_EQ(sp.torn_bytes, 0u);
  EXPECT_LT(sp.truncated, sp.samples / 10) << "more than 10% of the stacks were cut short";

  uint64_t hot = paths.Under(";main;outer;hot_leaf");
  uint64_t cold = paths.Under(";main;side;cold_leaf");
  uint64_t in_main = paths.Under(";main");
  for (const auto& [path, ns] : paths.ns) {
    if (ns * 50 > in_main)
      std::printf("  %10llu ns  %s\n", static_cast<unsigned long long>(ns), path.c_str());
  }
  ASSERT_GT(in_main, 0u) << "no frame named main";
  // hot_leaf does three times cold_leaf's work; both under their own callers.
  EXPECT_GT(hot, in_main / 2);
  EXPECT_GT(cold, in_main / 10);
  EXPECT_GT(hot, cold);
  // Neither leaf under the other's caller.
  EXPECT_EQ(paths.Under(";outer;cold_leaf") + paths.Under(";side;hot_leaf"), 0u);
  // The written file has them too.
  std::ifstream f(tmp.path() / "trace.json");
  std::string json((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  EXPECT_THAT(json, ::testing::HasSubstr("\"hot_leaf\""));
}

TEST(DecodeSamplesLive, FramePointerCallchains) { CheckHotPaths(PTSNAP_HOT_PATHS_FP, "fp"); }

// A true leaf: the kernel's frame-pointer walk from a sample in hot_leaf
// reads driver's frame and skips driver; the mend puts it back from the
// sample's stack copy, so hot_leaf shows under driver, never under main.
TEST(DecodeSamplesLive, FramePointerLeafGetsItsCallerBack) {
  ::ptsnap::testing::TempDir tmp;
  PathSink paths;
  const std::optional<DecodeReport> report = RecordAndDecode(PTSNAP_FP_LEAF, "fp", tmp, paths);
  ASSERT_TRUE(report.has_value());
  const auto& sp = report->sampled;
  EXPECT_GT(sp.samples, 200u);
  EXPECT_TRUE(sp.fp_checked);
  const uint64_t under_driver = paths.Under(";main;driver;hot_leaf");
  const uint64_t under_main = paths.Under(";main;hot_leaf");
  const uint64_t in_main = paths.Under(";main");
  for (const auto& [path, ns] : paths.ns) {
    if (ns * 50 > in_main)
      std::printf("  %10llu ns  %s\n", static_cast<unsigned long long>(ns), path.c_str());
  }
  // Nearly every sample is in hot_leaf's loop, frameless: mended.
  EXPECT_GT(sp.fp_mended, sp.samples / 2);
  EXPECT_LT(sp.fp_unmendable, sp.samples / 20);
  // driver keeps its frame: the walk above it is right.
  EXPECT_LT(sp.fp_caller_no_frame, sp.samples / 20);
  EXPECT_GT(under_driver, in_main / 2);
  EXPECT_EQ(under_main, 0u) << "hot_leaf under main: its caller driver was skipped";
}

// Frame pointers asked of a program built without them (as Debian builds
// its own: perl and xz sampled so had nearly every stack "mended" on top of
// a walk through %rbp values that were no frames): the mend puts back the
// leaf's caller, finds that caller frameless too, and the summary says
// that the frames above it are not to be trusted.
TEST(DecodeSamplesLive, FramePointerStacksOfCodeWithoutThemAreFlagged) {
  ::ptsnap::testing::TempDir tmp;
  PathSink paths;
  const std::optional<DecodeReport> report =
      RecordAndDecode(PTSNAP_HOT_PATHS_NOFP, "fp", tmp, paths);
  ASSERT_TRUE(report.has_value());
  const auto& sp = report->sampled;
  EXPECT_GT(sp.samples, 200u);
  EXPECT_TRUE(sp.fp_checked);
  EXPECT_GT(sp.fp_caller_no_frame, sp.samples / 2);
  EXPECT_LE(sp.fp_caller_no_frame, sp.fp_mended);
  EXPECT_THAT(FormatReport(*report), ::testing::HasSubstr("not to be trusted"));
}

TEST(DecodeSamplesLive, DwarfUnwoundUserStacks) { CheckHotPaths(PTSNAP_HOT_PATHS_NOFP, "dwarf"); }

}  // namespace
}  // namespace ptsnap::pipeline
