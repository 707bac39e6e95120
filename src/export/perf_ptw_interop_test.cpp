// perf agrees with ptsnap on hand-made PTW streams (#43, "perf agrees";
// docs/decoding.md, "Marks"): a recording written here, packet by packet
// with the project's packet writer (emulate::PacketWriter), whose thread
// runs marks.S's PTWRITE (hw_mark) again and again: PTW packets of 4 and 8
// bytes, with and without the FUP that fup_on_ptw adds (the PTW's IP bit),
// several in one PSB segment and across segments. `ptsnap decode` gives
// its marks; `perf script --itrace=w` on `ptsnap export`'s perf.data lists
// its ptwrite events; both must be the same payloads in the same order, at
// the same addresses where perf prints one (a PTW with a FUP). The
// recording says `ptw` and `fup_on_ptw` in its config, as `run --ptw`
// records them, and the export hands them to perf.
#include <cstdlib>
#include <filesystem>
#include <sstream>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "decode/test_stream.h"
#include "emulate/pt_packets.h"
#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

namespace ptsnap {
namespace {

namespace fs = std::filesystem;
using ::ptsnap::testing::HavePerf;
using ::ptsnap::testing::RequiredEnv;
using ::ptsnap::testing::RunShell;
using ::ptsnap::testing::ShellRun;

constexpr int32_t kPid = 4242;
// IA32_RTIT_CTL bits as the intel_pt PMU's format/ names them.
constexpr uint64_t kBranchEn = 1 << 13, kTscEn = 1 << 10, kFupOnPtw = 1 << 5, kPtwEn = 1 << 12;

struct Ptw {
  uint64_t payload;
  int bytes;  // 4 or 8
  bool fup;   // the IP bit set and a FUP with the PTWRITE's address after it
};

// One PSB segment: PSB+ at `tsc`, tracing enabled at hw_mark, and each PTW
// of `ptws` bound to hw_mark's PTWRITE; between two of them hw_mark's `ret`
// goes back to hw_mark (a TIP), after the last tracing stops (TIP.PGD).
std::string Segment(const decode::testing::CallsProgram& p, uint64_t tsc,
                    const std::vector<Ptw>& ptws) {
  decode::testing::StreamBuilder b;
  b.Psb(tsc);
  b.TipPge(p.Sym("hw_mark"));
  for (size_t i = 0; i < ptws.size(); ++i) {
    emulate::PacketWriter w;
    w.Ptw(ptws[i].payload, ptws[i].bytes, ptws[i].fup);
    b.Raw(std::string(reinterpret_cast<const char*>(w.bytes().data()), w.bytes().size()));
    if (ptws[i].fup) b.Fup(p.Sym("hw_mark"));
    if (i + 1 < ptws.size()) b.Tip(p.Sym("hw_mark"));  // the ret, back to the PTWRITE
  }
  b.TipPgd();
  return b.Finish();
}

fs::path WriteRecording(const fs::path& dir, const std::string& pt, uint64_t config) {
  auto p = decode::testing::LoadMarksProgram();
  trace::Manifest m = decode::testing::CallsManifest(kPid);
  // A hardware recording, as `run --ptw` makes one: its config as opened.
  m.source = trace::Source::kHardware;
  m.pt.pmu_type = 8;
  m.pt.config = config;
  m.pt.nom_freq = 36;
  m.command = {"decode_marks"};
  // A snapshot: the trace starts where the ring began (in hw_mark), not at
  // the program's first instruction as a full-execution trace must.
  m.mode = trace::Mode::kSnapshot;
  auto w = trace::TraceWriter::Create(dir, m);
  EXPECT_TRUE(w.has_value());
  std::string sb;
  for (const auto& r : decode::testing::ProgramSideband(p, kPid, "decode_marks", 1))
    sb += trace::SerializeRecord(r);
  EXPECT_TRUE(w->AppendSideband(std::as_bytes(std::span(sb.data(), sb.size()))).has_value());
  trace::Stream s;
  s.pid = s.tid = kPid;
  EXPECT_TRUE(w->AddStream(s, std::as_bytes(std::span(pt.data(), pt.size()))).has_value());
  EXPECT_TRUE(w->Finish().has_value());
  return dir;
}

// "KEY<number>" occurrences in `text`, in order: perf prints "payload:
// 0x1234" ("payload: 0" for zero), ptsnap "[mark 0x1234" ("0x0").
std::vector<uint64_t> Numbers(const std::string& text, const std::string& key) {
  std::vector<uint64_t> out;
  for (size_t p = text.find(key); p != std::string::npos; p = text.find(key, p + 1))
    out.push_back(std::strtoull(text.c_str() + p + key.size(), nullptr, 0));
  return out;
}

TEST(PerfPtwInterop, PerfScriptListsTheSamePayloadsAndAddresses) {
  if (!HavePerf()) GTEST_SKIP() << "perf is not installed (apt-get install linux-perf)";
  const std::string bin = RequiredEnv("PTSNAP_BIN");
  auto p = decode::testing::LoadMarksProgram();
  // Three segments: 4- and 8-byte payloads with and without FUP mixed in
  // one; all with FUP in another; none in the last. One payload is
  // printable text ("Hello"), one is 0, one fills all 64 bits.
  const std::vector<std::vector<Ptw>> segments = {
      {{0x11223344, 4, false},
       {0x1122334455667788, 8, true},
       {0x6f6c6c6548, 8, false},
       {0xcafe, 4, true}},
      {{1, 8, true}, {0xffffffff, 4, true}, {0xffffffffffffffff, 8, true}},
      {{0, 4, false}, {0x12345678, 8, false}},
  };
  std::string pt;
  std::vector<uint64_t> payloads, fup_addresses;
  uint64_t tsc = 100000;
  for (const auto& seg : segments) {
    pt += Segment(p, tsc, seg);
    tsc += 100000;
    for (const Ptw& w : seg) {
      payloads.push_back(w.bytes == 4 ? w.payload & 0xffffffff : w.payload);
      if (w.fup) fup_addresses.push_back(p.Sym("hw_mark"));
    }
  }
  ::ptsnap::testing::TempDir tmp;
  const fs::path dir = WriteRecording(tmp.path() / "t", pt,
                                      kBranchEn | kTscEn | kPtwEn | kFupOnPtw | 1 /* TraceEn */);
  const std::string data = (tmp.path() / "perf.data").string();
  const std::string events = (tmp.path() / "t.events").string();

  ShellRun dec = RunShell(bin + " decode " + dir.string() + " -o " + events);
  ASSERT_EQ(dec.status, 0) << dec.out;
  ShellRun ours = RunShell("cat " + events);
  ASSERT_EQ(ours.status, 0) << ours.out;
  EXPECT_EQ(Numbers(ours.out, " I [mark "), payloads) << ours.out;
  EXPECT_THAT(ours.out, ::testing::HasSubstr("I [mark 0x6f6c6c6548 \"Hello\"]"));

  ShellRun ex = RunShell(bin + " export " + dir.string() + " -o " + data);
  ASSERT_EQ(ex.status, 0) << ex.out;
  // The export's intel_pt attr says ptw and fup_on_ptw, as recorded.
  ShellRun evlist = RunShell("perf evlist -v -i " + data + " 2>/dev/null");
  ASSERT_EQ(evlist.status, 0) << evlist.out;
  const std::vector<uint64_t> configs = Numbers(evlist.out, "config: ");
  ASSERT_FALSE(configs.empty()) << evlist.out;
  EXPECT_EQ(configs[0] & (kPtwEn | kFupOnPtw), kPtwEn | kFupOnPtw) << evlist.out;
  // perf script's ptwrite lines: "... ptwrite: IP: 1 payload: 0x1234 ..."
  // then the sample's ip (the PTWRITE's address where a FUP gave it).
  ShellRun perf =
      RunShell("perf script -i " + data + " --itrace=w -F synth,ip --no-inline 2>/dev/null");
  ASSERT_EQ(perf.status, 0) << perf.out;
  EXPECT_EQ(Numbers(perf.out, "payload: "), payloads) << perf.out;
  // Where perf says "IP: 1" (a FUP came), the address it prints is hw_mark's.
  std::vector<uint64_t> perf_fup_ips;
  std::istringstream lines(perf.out);
  for (std::string line; std::getline(lines, line);) {
    if (line.find("IP: 1") == std::string::npos) continue;
    // The ip field follows the synth field: the last hex word of the line.
    const size_t sp = line.find_last_of(' ', line.find_last_not_of(' '));
    perf_fup_ips.push_back(std::strtoull(line.c_str() + sp + 1, nullptr, 16));
  }
  EXPECT_EQ(perf_fup_ips, fup_addresses) << perf.out;
}

}  // namespace
}  // namespace ptsnap
