#include "export/exporter.h"

#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/file_util.h"
#include "emulate/pt_packets.h"
#include "export/perf_data.h"
#include "tests/support/result_matchers.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::exporter {
namespace {

namespace fs = std::filesystem;
using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::TempDir;

// PSB+ (TSC, MODE.exec 64-bit, PSBEND), TIP.PGE, a few TNTs, written with
// the project's one packet writer.
std::string Psb(uint64_t tsc, uint64_t ip) {
  emulate::PacketWriter w;
  w.Psb();
  w.Tsc(tsc);
  w.ModeExec64();
  w.PsbEnd();
  w.Ip(emulate::IpPacket::kTipPge, ip, emulate::IpCompression::kSext48);
  for (int i = 0; i < 20; ++i) w.Tnt(0x2a, 6);
  return std::string(reinterpret_cast<const char*>(w.bytes().data()), w.size());
}

trace::Record Rec(trace::RecordBody body, uint32_t pid, uint32_t tid, uint64_t time) {
  trace::Record r;
  r.body = std::move(body);
  r.sample_id = {pid, tid, time, 0, 0, 777};
  if (std::holds_alternative<trace::Mmap2>(r.body)) r.type = PERF_RECORD_MMAP2;
  if (std::holds_alternative<trace::Comm>(r.body)) r.type = PERF_RECORD_COMM;
  if (std::holds_alternative<trace::ItraceStart>(r.body)) r.type = PERF_RECORD_ITRACE_START;
  if (std::holds_alternative<trace::Aux>(r.body)) r.type = PERF_RECORD_AUX;
  return r;
}

trace::Manifest BaseManifest() {
  trace::Manifest m;
  m.source = trace::Source::kHardware;
  m.kernel_release = "6.1.0-test";
  m.cpu = {"GenuineIntel", 6, 158, 9, 2, 188};
  m.pt.pmu_type = 10;
  m.pt.config = 0x2401 | (1 << 10);
  m.pt.tsc = true;
  m.pt.nom_freq = 36;
  m.time_conv = {1000, 1, 0, true};  // ns = 1000 + tsc
  return m;
}

// A trace with two threads of one process: streams of 2 and 1 PSB periods.
struct Fixture {
  int32_t second_tid = 43;  // the second stream's thread
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  std::string s0 = Psb(5000, 0x401000) + Psb(6000, 0x401010);
  std::string s1 = Psb(7000, 0x401020);

  void Write(trace::Manifest m) {
    auto w = trace::TraceWriter::Create(dir, std::move(m));
    ASSERT_TRUE(w.has_value()) << w.error().ToString();
    std::string sb;
    trace::Comm comm{42, 42, "prog", true};
    sb += trace::SerializeRecord(Rec(comm, 42, 42, 100));
    trace::Mmap2 mm;
    mm.pid = mm.tid = 42;
    mm.addr = 0x400000;
    mm.len = 0x10000;
    mm.pgoff = 0;
    mm.prot = 5;
    mm.filename = fs::read_symlink("/proc/self/exe").string();
    sb += trace::SerializeRecord(Rec(mm, 42, 42, 200));
    // Later than the first TSC (5000 + 1000 ns): must be pulled back.
    sb += trace::SerializeRecord(Rec(trace::ItraceStart{42, 42}, 42, 42, 9000));
    sb += trace::SerializeRecord(Rec(trace::Aux{0, 64, 2}, 42, 42, 9100));
    ASSERT_TRUE(w->AppendSideband(std::as_bytes(std::span(sb.data(), sb.size()))));
    trace::Stream st;
    st.pid = 42;
    st.tid = 42;
    st.snapshot = 1;
    ASSERT_TRUE(w->AddStream(st, std::as_bytes(std::span(s0.data(), s0.size()))));
    st.tid = second_tid;
    st.snapshot = second_tid == 42 ? 2 : 1;
    ASSERT_TRUE(w->AddStream(st, std::as_bytes(std::span(s1.data(), s1.size()))));
    ASSERT_TRUE(w->Finish());
  }
};

PerfData Export(const fs::path& dir, const fs::path& out, ExportOptions o = {}) {
  auto r = ExportTrace(dir, out, o);
  EXPECT_TRUE(r.has_value()) << r.error().ToString();
  auto bytes = base::ReadFile(r.has_value() ? r->data_file : out);
  EXPECT_TRUE(bytes.has_value());
  auto pd = ParsePerfData(bytes.has_value() ? *bytes : std::string());
  EXPECT_TRUE(pd.has_value()) << pd.error().ToString();
  return pd.has_value() ? *pd : PerfData{};
}

std::vector<const DataRecord*> OfType(const PerfData& pd, uint32_t type) {
  std::vector<const DataRecord*> out;
  for (const DataRecord& r : pd.records)
    if (r.type == type) out.push_back(&r);
  return out;
}

TEST(ExporterTest, AttrsCarryTheRecordedPmuAndConfig) {
  Fixture f;
  f.Write(BaseManifest());
  PerfData pd = Export(f.dir, f.tmp.path() / "perf.data");
  ASSERT_EQ(pd.attrs.size(), 2u);
  EXPECT_EQ(pd.attrs[0].type, 10u);
  EXPECT_EQ(pd.attrs[0].config, 0x2401u | (1 << 10));
  EXPECT_EQ(pd.attrs[0].sample_type, 0x10087u);
  EXPECT_TRUE(pd.attrs[0].flags & kAttrSampleIdAll);
  EXPECT_TRUE(pd.attrs[0].flags & kAttrExcludeKernel);
  EXPECT_EQ(pd.attrs[0].ids.size(), 2u);  // one per thread queue
  EXPECT_EQ(pd.attrs[1].type, static_cast<uint32_t>(PERF_TYPE_SOFTWARE));
  EXPECT_EQ(pd.attrs[1].config, static_cast<uint64_t>(PERF_COUNT_SW_DUMMY));
}

TEST(ExporterTest, EmulatedRecordingGetsAPmuTypeAndConfigBits) {
  trace::PtConfig pt;
  pt.tsc = true;
  pt.noretcomp = true;
  EXPECT_EQ(EffectiveConfig(pt), 1u | (1u << 13) | (1u << 10) | (1u << 11));
  Fixture f;
  trace::Manifest m = BaseManifest();
  m.pt = pt;
  m.source = trace::Source::kEmulated;
  f.Write(m);
  PerfData pd = Export(f.dir, f.tmp.path() / "perf.data");
  EXPECT_EQ(pd.attrs[0].type, kEmulatedPmuType);
}

TEST(ExporterTest, AuxtraceInfoHasIntelPtPrivateFields) {
  Fixture f;
  trace::Manifest m = BaseManifest();
  m.pt.filter = "filter main @ /bin/x";
  f.Write(m);
  PerfData pd = Export(f.dir, f.tmp.path() / "perf.data");
  auto info = OfType(pd, kRecordAuxtraceInfo);
  ASSERT_EQ(info.size(), 1u);
  const std::string& b = info[0]->bytes;
  EXPECT_EQ(LoadLe<uint32_t>(b, 8), 1u);  // PERF_AUXTRACE_INTEL_PT
  auto priv = [&](int i) { return LoadLe<uint64_t>(b, 16 + 8 * i); };
  EXPECT_EQ(priv(0), 10u);      // pmu type
  EXPECT_EQ(priv(2), 1u);       // time_mult
  EXPECT_EQ(priv(3), 1000u);    // time_zero
  EXPECT_EQ(priv(4), 1u);       // cap_user_time_zero
  EXPECT_EQ(priv(5), 0x400u);   // tsc bit
  EXPECT_EQ(priv(6), 0x800u);   // noretcomp bit
  EXPECT_EQ(priv(8), 1u);       // snapshot mode
  EXPECT_EQ(priv(9), 0u);       // per-thread
  EXPECT_EQ(priv(10), 0x200u);  // mtc bit
  EXPECT_EQ(priv(11), 0x3c000u);
  EXPECT_EQ(priv(12), 188u);  // TSC:CTC n = CPUID.15H EBX
  EXPECT_EQ(priv(13), 2u);    // d = EAX
  EXPECT_EQ(priv(14), 0x2u);  // cyc bit
  EXPECT_EQ(priv(15), 36u);   // max non-turbo ratio
  EXPECT_EQ(priv(16), m.pt.filter.size() + 1);
  EXPECT_EQ(b.substr(16 + 8 * 17, m.pt.filter.size()), m.pt.filter);
  EXPECT_EQ(OfType(pd, kRecordTimeConv).size(), 1u);
}

TEST(ExporterTest, OneAuxtraceRecordPerStreamWithItsThread) {
  Fixture f;
  f.Write(BaseManifest());
  PerfData pd = Export(f.dir, f.tmp.path() / "perf.data");
  auto aux = OfType(pd, kRecordAuxtrace);
  ASSERT_EQ(aux.size(), 2u);
  EXPECT_EQ(aux[0]->payload.substr(0, f.s0.size()), f.s0);
  EXPECT_EQ(aux[1]->payload.substr(0, f.s1.size()), f.s1);
  EXPECT_EQ(LoadLe<uint32_t>(aux[0]->bytes, 36), 42u);
  EXPECT_EQ(LoadLe<uint32_t>(aux[1]->bytes, 36), 43u);
  EXPECT_NE(LoadLe<uint32_t>(aux[0]->bytes, 32), LoadLe<uint32_t>(aux[1]->bytes, 32));  // idx
  EXPECT_EQ(LoadLe<uint32_t>(aux[0]->bytes, 40), 0xffffffffu);
  // Timed buffers: the reference is never 0 (perf 6.1 crashes on that).
  EXPECT_NE(LoadLe<uint64_t>(aux[0]->bytes, 24), 0u);
  auto index = ParseAuxtraceIndex(pd.features.at(kFeatAuxtrace));
  ASSERT_TRUE(index.has_value());
  ASSERT_EQ(index->size(), 2u);
  EXPECT_EQ((*index)[0].file_offset, aux[0]->file_offset);
}

TEST(ExporterTest, SnapshotsOfOneThreadShareItsQueueInOrder) {
  Fixture f;
  f.second_tid = 42;
  f.Write(BaseManifest());
  PerfData pd = Export(f.dir, f.tmp.path() / "perf.data");
  auto aux = OfType(pd, kRecordAuxtrace);
  ASSERT_EQ(aux.size(), 2u);
  EXPECT_EQ(pd.attrs[0].ids.size(), 1u);
  EXPECT_EQ(LoadLe<uint32_t>(aux[0]->bytes, 32), LoadLe<uint32_t>(aux[1]->bytes, 32));  // idx
  EXPECT_EQ(LoadLe<uint64_t>(aux[0]->bytes, 16), 0u);                                   // offset
  EXPECT_EQ(LoadLe<uint64_t>(aux[1]->bytes, 16), aux[0]->payload.size());
  EXPECT_EQ(aux[1]->payload.substr(0, f.s1.size()), f.s1);
}

TEST(ExporterTest, PerCpuStreamsGetACpuQueueAndNoTid) {
  TempDir tmp;
  fs::path dir = tmp.path() / "t";
  trace::Manifest m = BaseManifest();
  auto w = trace::TraceWriter::Create(dir, m);
  ASSERT_TRUE(w.has_value());
  std::string s = Psb(5000, 0x401000);
  for (int cpu : {0, 1}) {
    trace::Stream st;
    st.cpu = cpu;
    ASSERT_TRUE(w->AddStream(st, std::as_bytes(std::span(s.data(), s.size()))));
  }
  ASSERT_TRUE(w->Finish());
  PerfData pd = Export(dir, tmp.path() / "perf.data");
  auto aux = OfType(pd, kRecordAuxtrace);
  ASSERT_EQ(aux.size(), 2u);
  EXPECT_EQ(LoadLe<uint32_t>(aux[0]->bytes, 36), 0xffffffffu);  // tid -1
  EXPECT_EQ(LoadLe<uint32_t>(aux[1]->bytes, 40), 1u);           // cpu
  auto info = OfType(pd, kRecordAuxtraceInfo);
  EXPECT_EQ(LoadLe<uint64_t>(info[0]->bytes, 16 + 8 * 9), 1u);  // per-cpu mmaps
}

TEST(ExporterTest, TscZeroMovesTheWholeTimeline) {
  // perf 6.1 SIGSEGVs on a timed stream whose TSC is 0 (the emulated source's
  // virtual TSC starts there): TSC packets and sideband move together.
  Fixture f;
  f.s0 = Psb(0, 0x401000) + Psb(100, 0x401010);
  f.Write(BaseManifest());
  auto r = ExportTrace(f.dir, f.tmp.path() / "perf.data", {});
  ASSERT_TRUE(r.has_value());
  EXPECT_GT(r->tsc_shift, 0u);
  EXPECT_EQ(r->time_shift_ns, r->tsc_shift);  // time_conv here: 1 ns per tick
  PerfData pd = Export(f.dir, f.tmp.path() / "p2.data");
  auto aux = OfType(pd, kRecordAuxtrace);
  ASSERT_FALSE(aux.empty());
  // TSC packet right after the 16-byte PSB: opcode 0x19, then 7 bytes.
  EXPECT_EQ(static_cast<uint8_t>(aux[0]->payload[16]), 0x19);
  uint64_t tsc = LoadLe<uint64_t>(aux[0]->payload, 17) & ((1ULL << 56) - 1);
  EXPECT_EQ(tsc, r->tsc_shift);
  for (const DataRecord* c : OfType(pd, PERF_RECORD_COMM)) {
    uint64_t time = LoadLe<uint64_t>(c->bytes, c->bytes.size() - 24);
    EXPECT_EQ(time, 100 + r->tsc_shift);  // time_conv: ns = 1000 + tsc; COMM was at 100
  }
}

TEST(ExporterTest, LargeStreamsSplitOnlyAtPsbs) {
  Fixture f;
  f.Write(BaseManifest());
  ExportOptions o;
  o.split_limit = 64;
  PerfData pd = Export(f.dir, f.tmp.path() / "perf.data", o);
  auto aux = OfType(pd, kRecordAuxtrace);
  ASSERT_EQ(aux.size(), 3u);  // s0 has two PSBs, s1 one
  std::string psb(16, '\0');
  for (int i = 0; i < 16; i += 2) psb[i] = '\x02', psb[i + 1] = '\x82';
  EXPECT_EQ(aux[1]->payload.substr(0, 16), psb);
  std::string joined = aux[0]->payload + aux[1]->payload;
  joined.erase(std::remove(joined.begin(), joined.end(), '\0'), joined.end());
  std::string expect = f.s0;
  expect.erase(std::remove(expect.begin(), expect.end(), '\0'), expect.end());
  EXPECT_EQ(joined, expect);
}

TEST(ExporterTest, SidebandUsesTheTrackingEventAndIsNotLaterThanTheTrace) {
  Fixture f;
  f.Write(BaseManifest());
  PerfData pd = Export(f.dir, f.tmp.path() / "perf.data");
  std::vector<uint32_t> types;
  for (const DataRecord& r : pd.records) {
    if (r.type >= 64) continue;
    types.push_back(r.type);
    EXPECT_EQ(LoadLe<uint64_t>(r.bytes, r.bytes.size() - 8), 1u) << "record type " << r.type;
  }
  // AUX is dropped; a second thread's ITRACE_START is synthesised.
  EXPECT_THAT(types,
              ::testing::UnorderedElementsAre(PERF_RECORD_COMM, PERF_RECORD_MMAP2,
                                              PERF_RECORD_ITRACE_START, PERF_RECORD_ITRACE_START));
  for (const DataRecord* r : OfType(pd, PERF_RECORD_ITRACE_START)) {
    uint64_t time = LoadLe<uint64_t>(r->bytes, r->bytes.size() - 24);
    uint32_t tid = LoadLe<uint32_t>(r->bytes, 12);
    EXPECT_LE(time, tid == 42 ? 6000u : 8000u) << "tid " << tid;
  }
}

TEST(ExporterTest, BuildIdsOfMappedFiles) {
  Fixture f;
  f.Write(BaseManifest());
  PerfData pd = Export(f.dir, f.tmp.path() / "perf.data");
  ASSERT_TRUE(pd.features.count(kFeatBuildId));
  std::string exe = fs::read_symlink("/proc/self/exe").string();
  EXPECT_NE(pd.features[kFeatBuildId].find(exe), std::string::npos);
  EXPECT_TRUE(pd.features.count(kFeatEventDesc));
  EXPECT_TRUE(pd.features.count(kFeatOsRelease));
}

TEST(ExporterTest, KernelScopeWithKcoreIsPerfsDirectoryFormat) {
  Fixture f;
  trace::Manifest m = BaseManifest();
  m.scope = trace::Scope::kUserKernel;
  m.kernel_start = 0xffffffff81000000ULL;
  m.kcore = {trace::KcoreStatus::kCopied, "", "kcore"};
  f.Write(m);
  f.tmp.Write("t/kcore/kallsyms",
              "ffffffff81000000 T _stext\nffffffff81200000 T _etext\n"
              "ffffffffc0000000 t kmod_write\t[ptsnap_kmod]\n");
  f.tmp.Write("t/kcore/modules", "ptsnap_kmod 16384 0 - Live 0xffffffffc0000000\n");
  f.tmp.Write("t/kcore/kcore", "ELF");
  fs::path out = f.tmp.path() / "perf.data";
  PerfData pd = Export(f.dir, out);
  EXPECT_TRUE(fs::is_regular_file(out / "data"));
  EXPECT_THAT(*base::ReadFile(out / "kcore_dir" / "kallsyms"),
              ::testing::StartsWith("ffffffff81000000 T _stext\n"));
  EXPECT_TRUE(fs::exists(out / "kcore_dir" / "kcore"));
  // perf record --kcore writes no DIR_FORMAT without --threads; perf 6.1
  // refuses a lone "data" file that has it.
  EXPECT_FALSE(pd.features.count(kFeatDirFormat));
  EXPECT_FALSE(pd.attrs[0].flags & kAttrExcludeKernel);
  // The maps perf record would have synthesised: the kernel up to _etext
  // (not beyond: perf 6.1 would then drop kcore's module segment) and each
  // module of the copied /proc/modules.
  auto mmaps = OfType(pd, PERF_RECORD_MMAP);
  ASSERT_EQ(mmaps.size(), 2u);
  EXPECT_NE(mmaps[0]->bytes.find("[kernel.kallsyms]_text"), std::string::npos);
  EXPECT_EQ(LoadLe<uint64_t>(mmaps[0]->bytes, 16), 0xffffffff81000000ULL);
  EXPECT_EQ(LoadLe<uint64_t>(mmaps[0]->bytes, 24), 0x200000u);
  EXPECT_NE(mmaps[1]->bytes.find("[ptsnap_kmod]"), std::string::npos);
  EXPECT_EQ(LoadLe<uint64_t>(mmaps[1]->bytes, 16), 0xffffffffc0000000ULL);
  EXPECT_EQ(LoadLe<uint64_t>(mmaps[1]->bytes, 24), 16384u);
}

TEST(ExporterTest, ParseModulesTakesNameSizeAndAddress) {
  auto mods = sys::ParseModules(
      "ptsnap_kmod 16384 0 - Live 0xffffffffc0000000\n"
      "ext4 1019904 1 - Live 0xffffffffc0a00000 (E)\n"
      "hidden 4096 0 - Live 0x0000000000000000\n"  // kptr_restrict
      "garbage\n");
  ASSERT_EQ(mods.size(), 2u);
  EXPECT_EQ(mods[0].name, "ptsnap_kmod");
  EXPECT_EQ(mods[0].size, 16384u);
  EXPECT_EQ(mods[0].addr, 0xffffffffc0000000ULL);
  EXPECT_EQ(mods[1].name, "ext4");
  EXPECT_EQ(mods[1].addr, 0xffffffffc0a00000ULL);
}

TEST(ExporterTest, ErrorsAreClear) {
  Fixture f;
  f.Write(BaseManifest());
  fs::path out = f.tmp.path() / "perf.data";
  ASSERT_TRUE(ExportTrace(f.dir, out, {}).has_value());
  EXPECT_THAT(ExportTrace(f.dir, out, {}), HasErrorContaining("already exists"));
  ExportOptions force;
  force.force = true;
  EXPECT_TRUE(ExportTrace(f.dir, out, force).has_value());
  EXPECT_THAT(ExportTrace(f.tmp.path() / "nope", f.tmp.path() / "x.data", {}),
              HasErrorContaining("nope"));
}

// A sampled trace (source "sampled"): two threads' sample streams and a
// COMM and MMAP2 of the sideband.
constexpr uint64_t kFpSampleType = PERF_SAMPLE_IDENTIFIER | PERF_SAMPLE_IP | PERF_SAMPLE_TID |
                                   PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
                                   PERF_SAMPLE_CALLCHAIN;

std::string FpSample(uint32_t tid, uint64_t time) {
  std::string r;
  auto put = [&](uint64_t v) { r.append(reinterpret_cast<const char*>(&v), 8); };
  uint32_t type = PERF_RECORD_SAMPLE;
  uint16_t misc = PERF_RECORD_MISC_USER, size = 8 + 10 * 8;
  r.append(reinterpret_cast<const char*>(&type), 4);
  r.append(reinterpret_cast<const char*>(&misc), 2);
  r.append(reinterpret_cast<const char*>(&size), 2);
  put(555);  // the recording's event id
  put(0x401000);
  put((static_cast<uint64_t>(tid) << 32) | 42);
  put(time);
  put(0);
  put(250000);
  put(3);  // callchain: nr, PERF_CONTEXT_USER, ip, a return address
  put(static_cast<uint64_t>(PERF_CONTEXT_USER));
  put(0x401000);
  return r + std::string("\x20\x10\x40\0\0\0\0\0", 8);
}

trace::Manifest SampledManifest(uint64_t sample_type = kFpSampleType) {
  trace::Manifest m;
  m.source = trace::Source::kSampled;
  m.mode = trace::Mode::kFull;
  m.kernel_release = "6.1.0-test";
  m.command = {"prog"};
  m.pids = {42};
  trace::Sampling sa;
  sa.event = "cpu-clock";
  sa.type = PERF_TYPE_SOFTWARE;
  sa.config = PERF_COUNT_SW_CPU_CLOCK;
  sa.sample_type = sample_type;
  sa.frequency = 4000;
  sa.callgraph = "fp";
  m.sampling = sa;
  return m;
}

// FpSample with what `--callgraph-mode fp` records since the leaf mend:
// REGS_USER (abi 2, BP SP IP) and STACK_USER (16 bytes, dyn_size 16).
std::string FpSampleWithCopy(uint32_t tid, uint64_t time) {
  std::string r = FpSample(tid, time);
  auto put = [&](uint64_t v) { r.append(reinterpret_cast<const char*>(&v), 8); };
  put(PERF_SAMPLE_REGS_ABI_64);
  put(0x7ffd0040);
  put(0x7ffd0000);
  put(0x401000);
  put(16);
  put(0x402010);
  put(0x1234);
  put(16);
  const auto size = static_cast<uint16_t>(r.size());
  std::memcpy(r.data() + 6, &size, 2);
  return r;
}

void WriteSampled(const fs::path& dir, trace::Manifest m, bool with_streams = true,
                  std::string (*sample)(uint32_t, uint64_t) = FpSample) {
  auto w = trace::TraceWriter::Create(dir, std::move(m));
  ASSERT_TRUE(w.has_value()) << w.error().ToString();
  std::string sb;
  sb += trace::SerializeRecord(Rec(trace::Comm{42, 42, "prog", true}, 42, 42, 100));
  trace::Mmap2 mm;
  mm.pid = mm.tid = 42;
  mm.addr = 0x400000;
  mm.len = 0x10000;
  mm.prot = 5;
  mm.filename = fs::read_symlink("/proc/self/exe").string();
  sb += trace::SerializeRecord(Rec(mm, 42, 42, 200));
  ASSERT_TRUE(w->AppendSideband(std::as_bytes(std::span(sb.data(), sb.size()))));
  if (with_streams) {
    // Thread 42: samples at 300 and 500 and a torn tail; thread 43: 400.
    std::string s0 = sample(42, 300) + sample(42, 500) + "torn!";
    std::string s1 = sample(43, 400);
    trace::Stream st;
    st.kind = trace::StreamKind::kSamples;
    st.pid = st.tid = 42;
    ASSERT_TRUE(w->AddStream(st, std::as_bytes(std::span(s0.data(), s0.size()))));
    st.tid = 43;
    ASSERT_TRUE(w->AddStream(st, std::as_bytes(std::span(s1.data(), s1.size()))));
  }
  ASSERT_TRUE(w->Finish());
}

TEST(ExporterTest, SampledTraceIsOneSamplingAttrWithItsFrequency) {
  TempDir tmp;
  WriteSampled(tmp.path() / "t", SampledManifest());
  PerfData pd = Export(tmp.path() / "t", tmp.path() / "perf.data");
  ASSERT_EQ(pd.attrs.size(), 1u);
  const Attr& a = pd.attrs[0];
  EXPECT_EQ(a.type, static_cast<uint32_t>(PERF_TYPE_SOFTWARE));
  EXPECT_EQ(a.config, static_cast<uint64_t>(PERF_COUNT_SW_CPU_CLOCK));
  EXPECT_EQ(a.sample_type, kFpSampleType);
  EXPECT_EQ(a.sample_period, 4000u);  // sample_freq
  EXPECT_TRUE(a.flags & kAttrFreq);
  EXPECT_TRUE(a.flags & kAttrSampleIdAll);
  EXPECT_TRUE(a.flags & kAttrMmap2);
  EXPECT_TRUE(a.flags & kAttrExcludeKernel);
  EXPECT_FALSE(a.flags & kAttrExcludeCallchainUser);
  EXPECT_THAT(a.ids, ::testing::ElementsAre(1u));
  EXPECT_TRUE(pd.features.count(kFeatBuildId));
  EXPECT_TRUE(pd.features.count(kFeatEventDesc));
  EXPECT_TRUE(pd.features.count(kFeatOsRelease));
  EXPECT_FALSE(pd.features.count(kFeatAuxtrace));
}

TEST(ExporterTest, SampledTraceRecordsAreInTimeOrderWithOneId) {
  TempDir tmp;
  WriteSampled(tmp.path() / "t", SampledManifest());
  auto r = ExportTrace(tmp.path() / "t", tmp.path() / "perf.data", {});
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_TRUE(r->sampled);
  EXPECT_EQ(r->samples, 3u);
  EXPECT_EQ(r->sideband_records, 2u);
  EXPECT_EQ(r->torn_bytes, 5u);
  EXPECT_EQ(r->auxtrace_records, 0u);
  PerfData pd = Export(tmp.path() / "t", tmp.path() / "perf2.data");
  std::vector<uint32_t> types;
  std::vector<uint64_t> sample_times;
  for (const DataRecord& rec : pd.records) {
    types.push_back(rec.type);
    if (rec.type == PERF_RECORD_SAMPLE) {
      EXPECT_EQ(LoadLe<uint64_t>(rec.bytes, 8), 1u);  // IDENTIFIER rewritten
      sample_times.push_back(LoadLe<uint64_t>(rec.bytes, 32));
      EXPECT_EQ(rec.bytes.size(), FpSample(42, 0).size());  // callchain kept
    } else if (rec.type != kRecordFinishedRound) {
      EXPECT_EQ(LoadLe<uint64_t>(rec.bytes, rec.bytes.size() - 8), 1u);  // trailer id
    }
  }
  EXPECT_THAT(types,
              ::testing::ElementsAre(PERF_RECORD_COMM, PERF_RECORD_MMAP2, PERF_RECORD_SAMPLE,
                                     PERF_RECORD_SAMPLE, PERF_RECORD_SAMPLE, kRecordFinishedRound));
  EXPECT_THAT(sample_times, ::testing::ElementsAre(300u, 400u, 500u));
}

TEST(ExporterTest, DwarfSamplingAttrCarriesRegsAndStack) {
  TempDir tmp;
  uint64_t st = kFpSampleType | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  trace::Manifest m = SampledManifest(st);
  m.sampling->callgraph = "dwarf";
  m.sampling->regs_user = 0xff0fff;
  m.sampling->stack_user = 8192;
  WriteSampled(tmp.path() / "t", m, false);
  // No streams: an error, not an empty file.
  EXPECT_THAT(ExportTrace(tmp.path() / "t", tmp.path() / "x.data", {}),
              HasErrorContaining("no sample streams"));
  TempDir tmp2;
  trace::Manifest m2 = m;
  // The records here have no regs or stack (fp-shaped); the attr's dwarf
  // fields come from the manifest's sampling object alone.
  m2.sampling->sample_type = kFpSampleType;
  WriteSampled(tmp2.path() / "t", m2);
  PerfData pd = Export(tmp2.path() / "t", tmp2.path() / "perf.data");
  ASSERT_EQ(pd.attrs.size(), 1u);
  EXPECT_EQ(pd.attrs[0].sample_regs_user, 0xff0fffu);
  EXPECT_EQ(pd.attrs[0].sample_stack_user, 8192u);
  EXPECT_TRUE(pd.attrs[0].flags & kAttrExcludeCallchainUser);
}

// fp's registers and stack copy serve ptsnap's decoder only: perf would
// take a recording with both for a dwarf one and unwind the copy after the
// callchain. The export is what `perf record --call-graph fp` writes.
TEST(ExporterTest, FpSamplesLeaveTheirRegistersAndStackCopyOut) {
  TempDir tmp;
  trace::Manifest m =
      SampledManifest(kFpSampleType | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER);
  m.sampling->regs_user = 0x1c0;
  m.sampling->stack_user = 16;
  WriteSampled(tmp.path() / "t", m, true, FpSampleWithCopy);
  auto r = ExportTrace(tmp.path() / "t", tmp.path() / "perf.data", {});
  ASSERT_TRUE(r.has_value()) << r.error().ToString();
  EXPECT_EQ(r->samples, 3u);
  EXPECT_EQ(r->skipped_records, 0u);
  PerfData pd = Export(tmp.path() / "t", tmp.path() / "perf2.data");
  ASSERT_EQ(pd.attrs.size(), 1u);
  EXPECT_EQ(pd.attrs[0].sample_type, kFpSampleType);
  EXPECT_EQ(pd.attrs[0].sample_regs_user, 0u);
  EXPECT_EQ(pd.attrs[0].sample_stack_user, 0u);
  size_t samples = 0;
  for (const DataRecord& rec : pd.records) {
    if (rec.type != PERF_RECORD_SAMPLE) continue;
    ++samples;
    // The same bytes as a sample recorded without them (IDENTIFIER rewritten).
    const uint32_t tid = LoadLe<uint32_t>(rec.bytes, 28);
    const uint64_t time = LoadLe<uint64_t>(rec.bytes, 32);
    EXPECT_EQ(std::string(rec.bytes), WithSampleId(FpSample(tid, time), kFpSampleType, 1));
  }
  EXPECT_EQ(samples, 3u);
}

TEST(ExporterTest, SampledTraceWhoseTrailerPerfCannotReadIsAnError) {
  TempDir tmp;
  // No CPU in sample_type: the sideband's 32-byte trailer would not match.
  WriteSampled(tmp.path() / "t", SampledManifest(kFpSampleType & ~PERF_SAMPLE_CPU));
  EXPECT_THAT(ExportTrace(tmp.path() / "t", tmp.path() / "perf.data", {}),
              HasErrorContaining("does not match the sideband's sample_id trailer"));
}

TEST(ExporterTest, DataSegmentMappingsUseTheExecMappingsBias) {
  // A PIE: r-- at 0, r-x at 0x1000 (file 0x1000), r-- at 0x2000 (file
  // 0x2000: .eh_frame_hdr), rw- at 0x3df0 (file 0x2df0, bss to 0x4100).
  elf::LoadLayout layout;
  layout.pie = true;
  layout.segments = {{0, 0, 0x600, 0x600, false},
                     {0x1000, 0x1000, 0x300, 0x300, true},
                     {0x2000, 0x2000, 0x200, 0x200, false},
                     {0x3df0, 0x2df0, 0x240, 0x310, false}};
  trace::Mmap2 exec;
  exec.pid = exec.tid = 42;
  exec.addr = 0x555555555000;
  exec.len = 0x1000;
  exec.pgoff = 0x1000;
  exec.prot = PROT_READ | PROT_EXEC;
  exec.filename = "/bin/prog";
  auto maps = DataSegmentMappings(exec, layout, 4096);
  ASSERT_EQ(maps.size(), 3u);
  EXPECT_EQ(maps[0].addr, 0x555555554000u);
  EXPECT_EQ(maps[0].len, 0x1000u);
  EXPECT_EQ(maps[0].pgoff, 0u);
  EXPECT_EQ(maps[1].addr, 0x555555556000u);
  EXPECT_EQ(maps[1].pgoff, 0x2000u);
  EXPECT_EQ(maps[2].addr, 0x555555557000u);  // 0x3df0 rounded down
  EXPECT_EQ(maps[2].len, 0x2000u);           // to 0x4100 rounded up
  EXPECT_EQ(maps[2].pgoff, 0x2000u);
  for (const auto& m : maps) {
    EXPECT_EQ(m.pid, 42u);
    EXPECT_EQ(m.filename, "/bin/prog");
    EXPECT_EQ(m.prot, static_cast<uint32_t>(PROT_READ));
  }
  exec.pgoff = 0x9000;  // in no segment
  EXPECT_TRUE(DataSegmentMappings(exec, layout, 4096).empty());
}

}  // namespace
}  // namespace ptsnap::exporter
