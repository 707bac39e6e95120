// Flow decoder speed against libipt's bare block loop, on the same streams.
//
//   flow_bench [--repeat N] [--timer-resolution PRESET] TRACE_DIR
//   flow_bench [--repeat N] [--timer-resolution PRESET] [--keep DIR] --emulate PROGRAM [ARGS...]
//
// With --emulate it first records PROGRAM under the emulated PT source (full
// execution, the given timer preset) into a temporary trace directory (or
// DIR with --keep, left in place for later runs on TRACE_DIR). For
// every stream of the trace it runs (a) libipt's bare loop as src/decode
// drives it (pt_blk_sync_forward, pt_blk_event, pt_blk_next; nothing done
// with the blocks), its block cache warm after the first run, and (b) the
// flow decoder (src/flow) with a cold cache each run, items dropped. Prints
// the best of N runs as instructions/s for both and their ratio, and checks
// that both saw the same instructions. Then what `ptsnap decode TRACE_DIR`
// does end to end (pipeline::DecodeTraceDir to an uncompressed .fxt file,
// and the summary; the default trace.fxt.gz adds zlib's time, the same for
// both decoders), (c) with --decoder libipt and (d)
// with --decoder ours, both -j 1, and (e) --decoder ours -j 2 (decoding and
// the writer on threads of their own, docs/decoding.md "Parallel decode"),
// best of N each, as instructions/s and as ratios to (a), (e) also as a
// ratio to (d); then (f) what a user waits for by default, `ptsnap decode`
// to trace.fxt.gz with --decoder ours, -j 1 and -j 2 (zlib's deflate on
// the second thread), as seconds and the ratio. --row LABEL prints one
// table row of those figures too (tools/decode-speed).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "emulate/emulate.h"
#include "flow/flow_decoder.h"
#include "flow/libipt_oracle.h"
#include "perf/attr.h"
#include "pipeline/pipeline.h"
#include "tests/flow/trace_input.h"

using namespace ptsnap;

namespace {

double Now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// libipt's loop with nothing done per block: instructions decoded.
uint64_t LibiptLoop(const struct pt_config& cfg, struct pt_image* image) {
  struct pt_block_decoder* dec = pt_blk_alloc_decoder(&cfg);
  if (dec == nullptr) return 0;
  pt_blk_set_image(dec, image);
  uint64_t insns = 0;
  for (;;) {
    int status = pt_blk_sync_forward(dec);
    if (status < 0) break;
    for (;;) {
      while ((status & pts_event_pending) != 0) {
        struct pt_event ev;
        status = pt_blk_event(dec, &ev, sizeof ev);
        if (status < 0) break;
      }
      if (status < 0 || (status & pts_eos) != 0) break;
      struct pt_block block;
      status = pt_blk_next(dec, &block, sizeof block);
      insns += block.ninsn;
      if (status < 0) break;
    }
    if (status == -pte_eos || (status >= 0 && (status & pts_eos) != 0)) break;
  }
  pt_blk_free_decoder(dec);
  return insns;
}

uint64_t FlowLoop(const struct pt_config& cfg, flow::CodeReader* code) {
  flow::FlowDecoder dec(flow::FlowConfig(cfg), code);
  flow::Item items[512];
  while (dec.Decode(items, 512) != 0) {
  }
  return dec.instructions();
}

}  // namespace

int main(int argc, char** argv) {
  int repeat = 3;
  std::string dir, label, keep, only, timer = "normal", row;
  std::string tmpdir;
  std::vector<std::string> command;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--repeat") == 0 && i + 1 < argc) {
      repeat = std::atoi(argv[++i]);
    } else if (std::strcmp(argv[i], "--only") == 0 && i + 1 < argc) {
      only = argv[++i];  // "flow" or "libipt": one decoder (for profiles)
    } else if (std::strcmp(argv[i], "--row") == 0 && i + 1 < argc) {
      row = argv[++i];
    } else if (std::strcmp(argv[i], "--keep") == 0 && i + 1 < argc) {
      keep = argv[++i];
    } else if (std::strcmp(argv[i], "--timer-resolution") == 0 && i + 1 < argc) {
      timer = argv[++i];
    } else if (std::strcmp(argv[i], "--emulate") == 0 && i + 1 < argc) {
      for (int j = i + 1; j < argc; ++j) command.push_back(argv[j]);
      break;
    } else {
      dir = argv[i];
    }
  }
  if (!command.empty()) {
    record::RecordOptions o;
    o.command = command;
    o.full_execution = true;
    auto t = perf::ParseTiming(timer);
    if (!t) {
      std::fprintf(stderr, "%s\n", t.error().ToString().c_str());
      return 2;
    }
    o.timer = *t;
    if (keep.empty()) {
      char tmpl[] = "/tmp/ptsnap-flow-bench-XXXXXX";
      if (::mkdtemp(tmpl) == nullptr) return 1;
      tmpdir = tmpl;
      dir = tmpdir + "/trace";
    } else {
      dir = keep;
    }
    const double t0 = Now();
    auto r = emulate::RecordEmulated(o, dir);
    if (!r) {
      std::fprintf(stderr, "%s\n", r.error().ToString().c_str());
      return 1;
    }
    label = command[0];
    std::printf("recorded %s (--timer-resolution %s) in %.2f s\n", label.c_str(), timer.c_str(),
                Now() - t0);
  }
  if (dir.empty()) {
    std::fprintf(
        stderr,
        "usage: flow_bench [--repeat N] [--timer-resolution P] TRACE_DIR | --emulate CMD...\n");
    return 2;
  }
  auto in = flow::testing::LoadTrace(dir);
  if (!in) {
    std::fprintf(stderr, "%s\n", in.error().ToString().c_str());
    return 1;
  }
  uint64_t bytes = 0;
  for (const auto& s : in->streams) bytes += s.bytes.size();
  double lib_best = 1e30, flow_best = 1e30;
  uint64_t lib_insns = 0, flow_insns = 0;
  std::vector<struct pt_image*> images;
  for (auto& s : in->streams) images.push_back(s.code->NewLibiptImage());
  for (int r = 0; r < repeat + 1; ++r) {  // the first run warms libipt's block cache
    double t = Now();
    uint64_t n = 0;
    for (size_t k = 0; k < in->streams.size() && only != "flow"; ++k)
      n += LibiptLoop(in->streams[k].config, images[k]);
    const double lib_s = Now() - t;
    t = Now();
    uint64_t m = 0;
    for (size_t k = 0; k < in->streams.size() && only != "libipt"; ++k)
      m += FlowLoop(in->streams[k].config, in->streams[k].code.get());
    const double flow_s = Now() - t;
    if (r == 0) continue;
    lib_best = std::min(lib_best, lib_s);
    flow_best = std::min(flow_best, flow_s);
    lib_insns = n;
    flow_insns = m;
  }
  std::printf("%s: %zu streams, %.2f MB of PT, %.1f M instructions\n",
              label.empty() ? dir.c_str() : label.c_str(), in->streams.size(), bytes / 1e6,
              lib_insns / 1e6);
  std::printf("  libipt pt_blk loop: %.3f s  %.1f M insn/s\n", lib_best,
              lib_insns / lib_best / 1e6);
  std::printf("  flow decoder:       %.3f s  %.1f M insn/s  (%.2fx libipt)\n", flow_best,
              flow_insns / flow_best / 1e6, (flow_insns / flow_best) / (lib_insns / lib_best));
  if (lib_insns != flow_insns && only.empty()) {
    std::printf("  MISMATCH: libipt %llu instructions, flow %llu\n",
                static_cast<unsigned long long>(lib_insns),
                static_cast<unsigned long long>(flow_insns));
  }
  // ptsnap decode end to end: (c), (d), (e) to trace.fxt; (f) to
  // trace.fxt.gz, -j 1 and -j 2.
  struct Run {
    decode::PtDecoder::Engine engine;
    const char* output;
    unsigned jobs;
  };
  constexpr decode::PtDecoder::Engine kLibipt = decode::PtDecoder::Engine::kLibipt;
  constexpr decode::PtDecoder::Engine kOurs = decode::PtDecoder::Engine::kOurs;
  const Run runs[] = {{kLibipt, "/trace.fxt", 1},
                      {kOurs, "/trace.fxt", 1},
                      {kOurs, "/trace.fxt", 2},
                      {kOurs, "/trace.fxt.gz", 1},
                      {kOurs, "/trace.fxt.gz", 2}};
  constexpr int kRuns = sizeof runs / sizeof runs[0];
  std::vector<double> pipe_best(kRuns, 1e30);
  std::vector<uint64_t> pipe_insns(kRuns, 0);
  uint64_t fallbacks = 0;
  char out_tmpl[] = "/tmp/ptsnap-flow-bench-out-XXXXXX";
  const std::string out_dir = only.empty() && ::mkdtemp(out_tmpl) != nullptr ? out_tmpl : "";
  for (int r = 0; r < repeat && !out_dir.empty(); ++r) {
    for (int e = 0; e < kRuns; ++e) {
      pipeline::DecodeOptions d;
      d.output = out_dir + runs[e].output;
      d.decoder = runs[e].engine;
      d.jobs = runs[e].jobs;
      const double t = Now();
      auto rep = pipeline::DecodeTraceDir(dir, d);
      if (!rep) {
        std::fprintf(stderr, "decode: %s\n", rep.error().ToString().c_str());
        return 1;
      }
      const std::string summary = pipeline::FormatReport(*rep);
      pipe_best[e] = std::min(pipe_best[e], Now() - t);
      pipe_insns[e] = rep->decode.instructions;
      if (e == 1) fallbacks = rep->decode.flow_fallbacks;
    }
  }
  if (!out_dir.empty()) {
    std::filesystem::remove_all(out_dir);
    const double a = lib_insns / lib_best;
    std::printf("  ptsnap decode --decoder libipt: %.3f s  %.1f M insn/s  (%.2fx the loop)\n",
                pipe_best[0], pipe_insns[0] / pipe_best[0] / 1e6, pipe_insns[0] / pipe_best[0] / a);
    std::printf(
        "  ptsnap decode --decoder ours:   %.3f s  %.1f M insn/s  (%.2fx the loop, %.2fx "
        "--decoder libipt)%s\n",
        pipe_best[1], pipe_insns[1] / pipe_best[1] / 1e6, pipe_insns[1] / pipe_best[1] / a,
        pipe_best[0] / pipe_best[1], fallbacks != 0 ? "  (libipt fallbacks!)" : "");
    std::printf("  ptsnap decode --decoder ours -j 2: %.3f s  %.1f M insn/s  (%.2fx -j 1)\n",
                pipe_best[2], pipe_insns[2] / pipe_best[2] / 1e6, pipe_best[1] / pipe_best[2]);
    std::printf("  ptsnap decode to trace.fxt.gz (the default): -j 1 %.3f s, -j 2 %.3f s (%.2fx)\n",
                pipe_best[3], pipe_best[4], pipe_best[3] / pipe_best[4]);
    if (!row.empty()) {
      std::printf(
          "| %s | %s | %.1f M | %.1f | %.1f (%.2fx) | %.1f (%.2fx) | %.1f (%.2fx) | %.1f (%.2fx) "
          "| %.2f s, %.2f s (%.2fx) |\n",
          row.c_str(), timer.c_str(), lib_insns / 1e6, a / 1e6, flow_insns / flow_best / 1e6,
          (flow_insns / flow_best) / a, pipe_insns[0] / pipe_best[0] / 1e6,
          pipe_insns[0] / pipe_best[0] / a, pipe_insns[1] / pipe_best[1] / 1e6,
          pipe_insns[1] / pipe_best[1] / a, pipe_insns[2] / pipe_best[2] / 1e6,
          pipe_best[1] / pipe_best[2], pipe_best[3], pipe_best[4], pipe_best[3] / pipe_best[4]);
    }
    if (pipe_insns[0] != pipe_insns[1] || pipe_insns[0] != lib_insns ||
        pipe_insns[2] != pipe_insns[1] || pipe_insns[3] != pipe_insns[1] ||
        pipe_insns[4] != pipe_insns[1]) {
      std::printf("  MISMATCH: ptsnap decode libipt %llu instructions, ours %llu\n",
                  static_cast<unsigned long long>(pipe_insns[0]),
                  static_cast<unsigned long long>(pipe_insns[1]));
    }
  }
  if (!tmpdir.empty()) std::filesystem::remove_all(tmpdir);
  return lib_insns == flow_insns || !only.empty() ? 0 : 1;
}
