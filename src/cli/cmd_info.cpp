// `ptsnap info TRACE_DIR [--records]`: what a trace directory holds, without
// decoding it. Exit 1 (after printing what could be read) when the directory
// is not a readable trace, a file its manifest lists is missing or damaged, or
// the last whole decode noted there found impossible results.
#include <sys/stat.h>
#include <CLI/CLI.hpp>

#include <cstdio>
#include <ctime>
#include <set>
#include <string>

#include "base/string_util.h"
#include "cli/command.h"
#include "trace/decode_verdict.h"
#include "trace/trace_dir.h"

namespace ptsnap::cli {
namespace {

struct InfoOptions {
  std::string dir;
  bool records = false;
};

void PrintError(const std::string& message) {
  std::fprintf(stderr, "ptsnap: error: %s\n", message.c_str());
}

void Row(const char* label, const std::string& value) {
  std::printf("%-12s %s\n", label, value.c_str());
}

using base::Join;

std::string Bytes(uint64_t n) { return base::ApproxSize(n); }

std::string UtcTime(uint64_t unix_ns) {
  if (unix_ns == 0) return "unknown";
  std::time_t t = static_cast<std::time_t>(unix_ns / 1'000'000'000);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::strftime(buf, sizeof buf, "%Y-%m-%d %H:%M:%S UTC", &tm);
  return buf;
}

std::string StateLine(const trace::Manifest& m) {
  std::string out(trace::ToString(m.state));
  if (m.state == trace::State::kRecording) {
    out += " (cut short by a crash or kill: what is listed below is complete)";
  } else if (m.state == trace::State::kInterrupted && !m.stop_error.empty()) {
    out += " (" + m.stop_error + "; what is listed below is complete)";
  } else if (m.state == trace::State::kInterrupted) {
    out += " (stopped by Ctrl-C or an error)";
  }
  return out;
}

std::string PtLine(const trace::PtConfig& pt) {
  std::string out = "pmu " + std::to_string(pt.pmu_type) + " config " + base::Hex(pt.config);
  if (pt.tsc) out += " tsc";
  if (pt.mtc) out += " mtc(freq " + std::to_string(pt.mtc_freq) + ")";
  if (pt.cyc) out += " cyc";
  if (pt.noretcomp) out += " noretcomp";
  if (!pt.filter.empty()) out += " filter \"" + pt.filter + "\"";
  return out;
}

std::string StreamOwner(const trace::Stream& s) {
  std::string out;
  if (s.pid >= 0) out += "pid " + std::to_string(s.pid) + " ";
  if (s.tid >= 0) out += "tid " + std::to_string(s.tid) + " ";
  if (s.cpu >= 0) out += "cpu " + std::to_string(s.cpu) + " ";
  return out;
}

// The stream file as found on disk: "" when it matches the manifest. A
// recording that did not end complete may hold bytes after its last flush,
// which decoding leaves out (TraceReader::ReadStream): `*unread` counts them.
std::string StreamProblem(const std::filesystem::path& dir, const trace::Stream& s,
                          trace::State state, uint64_t* unread) {
  *unread = 0;
  struct stat st;
  if (::stat((dir / s.file).c_str(), &st) != 0) return "MISSING";
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size > s.size && state != trace::State::kComplete) {
    *unread = size - s.size;
  } else if (size != s.size) {
    return "SIZE MISMATCH: file has " + std::to_string(size) + " bytes";
  }
  return "";
}

// For a stream that follows another (trace::Stream::follows): "" when every
// stream whose bytes it reads back (TraceReader::ChainOf) is whole, else
// what is wrong. `broken`: the ids of the streams whose file is damaged.
std::string ChainProblem(const trace::TraceReader& reader, const trace::Stream& s,
                         const std::set<uint32_t>& broken) {
  const trace::TraceReader::Chain chain = reader.ChainOf(s);
  for (const auto& piece : chain.pieces) {
    if (piece.stream != &s && broken.contains(piece.stream->id))
      return "BROKEN CHAIN: stream " + std::to_string(piece.stream->id) + "'s file is damaged";
  }
  if (chain.short_by != 0) return "BROKEN CHAIN: ring_bytes is more than its streams hold";
  return "";
}

int RunInfo(const InfoOptions& opt) {
  auto reader = trace::TraceReader::Open(opt.dir);
  if (!reader) {
    PrintError(reader.error().ToString());
    return kExitFailure;
  }
  const trace::Manifest& m = reader->manifest();
  int rc = kExitOk;

  Row("trace", reader->dir().string());
  std::string source(trace::ToString(m.source));
  if (!m.emulator.empty()) source += " (" + m.emulator + ")";
  Row("source", source);
  Row("state", StateLine(m));
  Row("recorded", UtcTime(m.created_unix_ns) +
                      (m.ptsnap_version.empty() ? "" : " by ptsnap " + m.ptsnap_version));
  if (!m.command.empty()) Row("command", Join(m.command));
  if (!m.pids.empty()) {
    std::vector<std::string> pids;
    for (int32_t p : m.pids) pids.push_back(std::to_string(p));
    Row("pids", Join(pids));
  }
  if (!m.kernel_release.empty() || m.kernel_start) {
    Row("kernel",
        m.kernel_release + (m.kernel_start ? " (text at " + base::Hex(*m.kernel_start) + ")" : ""));
  }
  if (!m.cpu.vendor.empty()) {
    Row("cpu", m.cpu.vendor + " family " + std::to_string(m.cpu.family) + " model " +
                   std::to_string(m.cpu.model) + " stepping " + std::to_string(m.cpu.stepping));
  }
  Row("scope", std::string(trace::ToString(m.scope)));
  std::string mode(trace::ToString(m.mode));
  if (m.mode == trace::Mode::kSnapshot && m.snapshot_size != 0) {
    mode += ", " + Bytes(m.snapshot_size) + " per stream";
  }
  Row("mode", mode);
  if (m.sampling) {
    // A sampled recording has no PT configuration: its event instead.
    const trace::Sampling& sa = *m.sampling;
    std::string line = sa.event + " (type " + std::to_string(sa.type) + " config " +
                       base::Hex(sa.config) + "), " +
                       (sa.frequency != 0 ? std::to_string(sa.frequency) + " Hz"
                                          : "period " + std::to_string(sa.period)) +
                       ", callgraph " + sa.callgraph + ", sample_type " + base::Hex(sa.sample_type);
    if (sa.regs_user != 0 || sa.stack_user != 0) {  // dwarf; fp since the leaf mend
      line += ", regs_user " + base::Hex(sa.regs_user) + ", stack_user " +
              std::to_string(sa.stack_user) + " bytes";
    }
    if (sa.max_stack != 0) line += ", max_stack " + std::to_string(sa.max_stack);
    Row("sampling", line);
  } else {
    Row("pt", PtLine(m.pt));
  }

  Row("snapshots", std::to_string(m.snapshots.size()));
  for (const auto& s : m.snapshots) {
    std::string line = "#" + std::to_string(s.seq) + " " + std::string(trace::ToString(s.reason));
    if (!s.detail.empty()) line += " (" + s.detail + ")";
    line += " at " + std::to_string(s.time) + " ns";
    if (s.tid != 0) line += ", tid " + std::to_string(s.tid);
    std::printf("  %s\n", line.c_str());
  }

  uint64_t total = 0, viewed = 0;
  size_t follow = 0;
  for (const auto& s : m.streams) {
    total += s.size;
    viewed += trace::ViewedBytes(s);
    follow += s.follows.has_value();
  }
  std::string streams = std::to_string(m.streams.size()) + ", " + Bytes(total);
  // Snapshots stored as what their ring gained since its previous one:
  // what is on disk, and what the snapshots hold when read back.
  if (follow != 0) {
    streams += " on disk; the snapshots hold " + Bytes(viewed) + " (" + std::to_string(follow) +
               " stored as what their ring gained since its previous snapshot)";
  }
  Row("streams", streams);
  std::vector<std::string> problems;
  std::set<uint32_t> broken;
  for (const auto& s : m.streams) {
    std::string line = std::to_string(s.id) + " " + s.file + " " + StreamOwner(s) + "snapshot " +
                       std::to_string(s.snapshot) + " " + Bytes(s.size);
    if (s.follows)
      line += " follows " + std::to_string(*s.follows) + " (ring " + Bytes(s.ring_bytes) + ")";
    if (s.wrapped) line += " wrapped";
    if (s.lost_bytes != 0) line += " lost " + std::to_string(s.lost_bytes) + " bytes";
    uint64_t unread = 0;
    std::string problem = StreamProblem(reader->dir(), s, m.state, &unread);
    if (!problem.empty()) {
      broken.insert(s.id);
    } else if (s.follows) {
      problem = ChainProblem(*reader, s, broken);
    }
    if (unread != 0)
      line += " (+" + std::to_string(unread) + " bytes after the last flush, not read)";
    if (!problem.empty()) {
      line += " [" + problem + "]";
      // ReadStream words the error the way decode will meet it.
      auto data = reader->ReadStream(s);
      problems.push_back(data ? problem : data.error().ToString());
    }
    std::printf("  %s\n", line.c_str());
  }
  Row("lost", std::to_string(m.lost_records) + " sideband records, " +
                  std::to_string(m.aux_truncated) + " truncated AUX records");
  std::string kcore(trace::ToString(m.kcore.status));
  if (!m.kcore.dir.empty()) kcore += " (" + m.kcore.dir + ")";
  if (!m.kcore.reason.empty()) kcore += ": " + m.kcore.reason;
  Row("kcore", kcore);
  Row("binaries", std::to_string(m.binaries.size()) + " listed");
  for (const auto& b : m.binaries) {
    std::string line = b.path;
    if (!b.build_id.empty()) line += " build-id " + b.build_id;
    line += b.copy.empty() ? " (not copied)" : " -> " + b.copy;
    std::printf("  %s\n", line.c_str());
  }

  struct stat st;
  std::filesystem::path sideband = reader->dir() / m.sideband;
  if (::stat(sideband.c_str(), &st) == 0) {
    Row("sideband", m.sideband + ", " + Bytes(static_cast<uint64_t>(st.st_size)));
  } else {
    Row("sideband", m.sideband + " [MISSING]");
  }

  // What the last whole decode found (decoded.json): info does not decode,
  // but a timeline whose numbers cannot be true is worth saying here too.
  std::string impossible;
  if (auto verdict = trace::ReadDecodeVerdict(reader->dir()); !verdict) {
    problems.push_back(verdict.error().ToString());
  } else if (!verdict->has_value()) {
    Row("decoded", "no whole decode noted here (ptsnap decode " + reader->dir().string() +
                       " writes the timeline)");
  } else {
    const trace::DecodeVerdict& v = **verdict;
    std::string line = UtcTime(v.decoded_unix_ns) + " by ptsnap " + v.by;
    if (!v.ptsnap_version.empty()) line += " (" + v.ptsnap_version + ")";
    if (!v.output.empty()) line += " into " + v.output;
    line += ": " + std::to_string(v.slices) + " slices";
    if (v.damaged_bytes != 0) {
      line += ", " + std::to_string(v.damaged_bytes) + " bytes of PT lost or undecodable";
    }
    if (v.impossible != 0) {
      line += ", " + std::to_string(v.impossible) + " impossible result(s)";
      impossible = "the last decode of " + reader->dir().string() + " found " +
                   std::to_string(v.impossible) + " impossible result(s)" +
                   (v.first_impossible.empty() ? "" : " (the first: " + v.first_impossible + ")") +
                   ": the numbers of its timeline are not to be trusted (docs/decoding.md, "
                   "\"Impossible results\")";
    }
    Row("decoded", line);
  }

  if (opt.records) {
    auto records = reader->ReadSideband();
    if (!records) {
      problems.push_back(records.error().ToString());
    } else {
      std::printf("records      %zu", records->records.size());
      if (records->truncated_tail != 0) {
        std::printf(" (plus a torn tail of %zu bytes, ignored)", records->truncated_tail);
      }
      std::printf("\n");
      for (const auto& r : records->records) {
        std::printf("  %20llu cpu %-3u %s\n", static_cast<unsigned long long>(r.sample_id.time),
                    r.sample_id.cpu, trace::DescribeRecord(r).c_str());
      }
    }
  }
  std::fflush(stdout);
  for (const auto& p : problems) {
    PrintError(p);
    rc = kExitFailure;
  }
  if (!impossible.empty()) {
    PrintError(impossible);
    rc = kExitFailure;
  }
  return rc;
}

}  // namespace

void AddInfoCommand(CLI::App& app, CommandFn* selected) {
  auto opt = std::make_shared<InfoOptions>();
  CLI::App* cmd = app.add_subcommand(
      "info", "Show what a trace directory holds (manifest, streams, snapshots) without decoding");
  cmd->add_option("TRACE_DIR", opt->dir, "Trace directory written by run or attach")->required();
  cmd->add_flag("--records", opt->records, "Also list every sideband record, sorted by time");
  cmd->callback([opt, selected] { *selected = [opt] { return RunInfo(*opt); }; });
}

}  // namespace ptsnap::cli
