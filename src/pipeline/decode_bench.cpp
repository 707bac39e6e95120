// Decode speed benchmark.
//
//   decode_bench [--copies N] [TRACE_DIR]
//   decode_bench [--copies N] --emulate PROGRAM [ARGS...]
//
// Without TRACE_DIR it decodes a synthetic stream: N back-to-back copies of
// the decoder test program's run (tests/programs/decode/calls.S, one PSB
// each). With TRACE_DIR it decodes that trace's streams, repeated N times;
// with --emulate it first records PROGRAM under the emulated PT source
// (full-execution mode) into a temporary trace directory. Prints, on the same bytes:
//   (a) a bare libipt loop (pt_blk_sync_forward/pt_blk_next/pt_blk_event),
//   (b) the full pipeline: decoder + call-stack model + FXT writer (to a
//       temporary file, uncompressed) + summary,
// as MB of PT/s, instructions/s and events/s, their ratio, and peak RSS.
#include <sys/resource.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "decode/pt_decoder.h"
#include "decode/test_stream.h"
#include "emulate/emulate.h"
#include "model/call_stack.h"
#include "output/fxt_writer.h"
#include "output/output_file.h"
#include "output/summary.h"
#include "trace/trace_dir.h"

using namespace ptsnap;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Input {
  trace::Manifest manifest;
  std::vector<trace::Record> records;
  std::filesystem::path dir = "/nonexistent";
  std::vector<std::pair<int32_t, std::string>> streams;  // pid, bytes
};

}  // namespace

int main(int argc, char** argv) {
  int copies = 2000;
  std::string dir;
  std::string tmpdir;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--copies") == 0 && i + 1 < argc) {
      copies = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--emulate") == 0 && i + 1 < argc) {
      record::RecordOptions o;
      for (int j = i + 1; j < argc; ++j) o.command.push_back(argv[j]);
      o.full_execution = true;
      char t[] = "/tmp/ptsnap-bench-trace-XXXXXX";
      if (::mkdtemp(t) == nullptr) return 1;
      tmpdir = t;
      dir = tmpdir + "/trace";
      double t0 = Now();
      auto r = emulate::RecordEmulated(o, dir);
      if (!r) {
        std::fprintf(stderr, "%s\n", r.error().ToString().c_str());
        return 1;
      }
      std::printf("recorded %s under emulation in %.2f s\n", argv[i + 1], Now() - t0);
      break;
    } else {
      dir = argv[i];
    }
  }
  Input in;
  if (dir.empty()) {
    auto prog = decode::testing::LoadCallsProgram();
    in.manifest = decode::testing::CallsManifest(1);
    in.records = decode::testing::CallsSideband(prog, 1);
    std::string s;
    for (int i = 0; i < copies; ++i) {
      s += decode::testing::CallsProgramStream(prog, 1000 + 1000 * static_cast<uint64_t>(i));
    }
    in.streams.emplace_back(1, std::move(s));
  } else {
    auto reader = trace::TraceReader::Open(dir);
    if (!reader) {
      std::fprintf(stderr, "%s\n", reader.error().ToString().c_str());
      return 1;
    }
    in.manifest = reader->manifest();
    in.dir = dir;
    if (auto sb = reader->ReadSideband(); sb) in.records = sb->records;
    for (const auto& st : in.manifest.streams) {
      auto bytes = reader->ReadStream(st);
      if (!bytes) continue;
      std::string rep;
      for (int i = 0; i < copies; ++i) rep += *bytes;
      in.streams.emplace_back(st.pid, std::move(rep));
    }
  }
  uint64_t total_bytes = 0;
  for (const auto& s : in.streams) total_bytes += s.second.size();

  auto dec = decode::PtDecoder::Create(in.dir, in.manifest, in.records);
  if (!dec) {
    std::fprintf(stderr, "%s\n", dec.error().ToString().c_str());
    return 1;
  }

  // (a) bare loop: the same decoder, configuration and image, events
  // dropped (PtDecoder's loop is ptxed's: sync, drain events, pt_blk_next).
  double t0 = Now();
  uint64_t bare_insns = 0, bare_blocks = 0;
  for (const auto& [pid, bytes] : in.streams) {
    decode::DecodeStats before = (*dec)->stats();
    auto r = (*dec)->DecodeStream(pid, bytes, [](const decode::BranchEvent&) {});
    (void)r;
    bare_insns += (*dec)->stats().instructions - before.instructions;
    bare_blocks += (*dec)->stats().blocks - before.blocks;
  }
  double bare_s = Now() - t0;

  // (m) decoder + model, slices dropped: splits (b)'s cost.
  class NullSink : public model::SliceSink {
   public:
    void OnProcess(int32_t, const std::string&) override {}
    void OnThread(int32_t, int32_t, const std::string&) override {}
    void OnSlice(const model::Slice&) override { ++n; }
    Result<void> Finish() override { return Ok(); }
    uint64_t n = 0;
  } null_sink;
  double model_s = 0;
  {
    model::CallStackModel m(&(*dec)->symbolizer(), &null_sink);
    double t = Now();
    for (const auto& [pid, bytes] : in.streams) {
      m.BeginSegment(pid, pid);
      auto r =
          (*dec)->DecodeStream(pid, bytes, [&](const decode::BranchEvent& e) { m.OnEvent(e); });
      (void)r;
      m.EndSegment();
    }
    model_s = Now() - t;
  }

  // (b) full pipeline to FXT.
  char tmpl[] = "/tmp/ptsnap-bench-XXXXXX.fxt";
  int fd = ::mkstemps(tmpl, 4);
  if (fd >= 0) ::close(fd);
  auto out = output::OutputFile::Open(tmpl);
  if (!out) {
    std::fprintf(stderr, "%s\n", out.error().ToString().c_str());
    return 1;
  }
  output::FxtWriter fxt(out->get());
  output::SummarySink summary;
  model::TeeSink tee(&fxt, &summary);
  model::CallStackModel model(&(*dec)->symbolizer(), &tee);
  t0 = Now();
  uint64_t events = 0, insns = 0;
  for (const auto& [pid, bytes] : in.streams) {
    decode::DecodeStats before = (*dec)->stats();
    model.BeginSegment(pid, pid);
    auto r =
        (*dec)->DecodeStream(pid, bytes, [&](const decode::BranchEvent& e) { model.OnEvent(e); });
    (void)r;
    model.EndSegment();
    events += (*dec)->stats().events - before.events;
    insns += (*dec)->stats().instructions - before.instructions;
  }
  (void)tee.Finish();
  double full_s = Now() - t0;
  uint64_t fxt_bytes = (*out)->bytes_written();
  ::unlink(tmpl);

  struct rusage ru;
  ::getrusage(RUSAGE_SELF, &ru);
  double mb = static_cast<double>(total_bytes) / 1e6;
  std::printf("input: %s, %.2f MB of PT, %llu instructions, %llu blocks\n",
              dir.empty() ? "synthetic (calls.S)" : dir.c_str(), mb,
              static_cast<unsigned long long>(bare_insns),
              static_cast<unsigned long long>(bare_blocks));
  std::printf("(a) bare pt_blk loop : %8.3f s  %8.2f MB/s  %10.3g insn/s  %10.3g blocks/s\n",
              bare_s, mb / bare_s, static_cast<double>(bare_insns) / bare_s,
              static_cast<double>(bare_blocks) / bare_s);
  std::printf(
      "(b) decode -> FXT    : %8.3f s  %8.2f MB/s  %10.3g insn/s  %10.3g events/s  "
      "(%llu slices, %.1f MB FXT)\n",
      full_s, mb / full_s, static_cast<double>(insns) / full_s,
      static_cast<double>(events) / full_s, static_cast<unsigned long long>(summary.slices()),
      static_cast<double>(fxt_bytes) / 1e6);
  std::printf("(m) decode + model, no writer: %.3f s (%.2f of the bare loop's speed)\n", model_s,
              bare_s / model_s);
  std::printf("ratio (b)/(a) instructions/s: %.2f\n", bare_s / full_s);
  std::printf("peak RSS: %ld MB (input held in memory: %.1f MB)\n", ru.ru_maxrss / 1024, mb);
  if (!tmpdir.empty()) std::filesystem::remove_all(tmpdir);
  return 0;
}
