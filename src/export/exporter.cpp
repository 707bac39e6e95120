#include "export/exporter.h"

#include <fcntl.h>
#include <intel-pt.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <set>
#include <tuple>

#include "base/file_util.h"
#include "base/string_util.h"
#include "base/unique_fd.h"
#include "elf/elf_file.h"
#include "export/jit_elf.h"
#include "export/jit_maps.h"
#include "export/perf_data.h"
#include "sys/kallsyms.h"
#include "trace/owned_file.h"

namespace ptsnap::exporter {

namespace fs = std::filesystem;

namespace {

// Intel PT config bits (/sys/bus/event_source/devices/intel_pt/format).
constexpr uint64_t kCfgPt = 1ULL << 0;
constexpr uint64_t kCfgCyc = 1ULL << 1;
constexpr uint64_t kCfgMtc = 1ULL << 9;
constexpr uint64_t kCfgTsc = 1ULL << 10;
constexpr uint64_t kCfgNoRetComp = 1ULL << 11;
constexpr uint64_t kCfgBranch = 1ULL << 13;
constexpr uint64_t kCfgMtcPeriodShift = 14;  // bits 14..17
constexpr uint64_t kCfgPsbPeriodShift = 24;  // bits 24..27

constexpr uint64_t kDummyId = 1;
constexpr uint64_t kSampleId = 1;  // the sampling attr's one id
constexpr uint64_t kTscShift = 1000000;
constexpr uint64_t kPtIdBase = 100;
constexpr uint32_t kNone = 0xffffffffu;  // -1 as u32 (tid/cpu unknown)

struct PacketDecoderFree {
  void operator()(pt_packet_decoder* d) const { pt_pkt_free_decoder(d); }
};
using PacketDecoder = std::unique_ptr<pt_packet_decoder, PacketDecoderFree>;

// Raw TSC value of the first TSC packet; nullopt when there is none.
std::optional<uint64_t> FirstTsc(std::string_view bytes) {
  if (bytes.empty()) return std::nullopt;
  pt_config config;
  pt_config_init(&config);
  config.begin = reinterpret_cast<uint8_t*>(const_cast<char*>(bytes.data()));
  config.end = config.begin + bytes.size();
  PacketDecoder dec(pt_pkt_alloc_decoder(&config));
  if (dec == nullptr) return std::nullopt;
  if (pt_pkt_sync_forward(dec.get()) < 0) return std::nullopt;
  pt_packet pkt;
  for (int n = 0; n < (1 << 20) && pt_pkt_next(dec.get(), &pkt, sizeof pkt) >= 0; ++n) {
    if (pkt.type == ppt_tsc) return pkt.payload.tsc.tsc;
  }
  return std::nullopt;
}

// First TSC packet of a stream, as perf clock ns; nullopt when there is none.
std::optional<uint64_t> FirstTscTime(std::string_view bytes, const trace::TimeConv& tc) {
  auto tsc = FirstTsc(bytes);
  if (!tsc) return std::nullopt;
  return trace::TscToPerfTime(tc, *tsc);
}

// Adds `k` to every TSC packet of `bytes` (opcode 0x19, then 7 bytes of TSC,
// little-endian). perf 6.1 treats a TSC of 0 as "no timestamp" and crashes
// decoding such a stream in timed mode (SIGSEGV, measured); the emulated
// source's virtual TSC starts at 0, so the exporter moves the timeline.
void ShiftTsc(std::string* bytes, uint64_t k) {
  pt_config config;
  pt_config_init(&config);
  config.begin = reinterpret_cast<uint8_t*>(bytes->data());
  config.end = config.begin + bytes->size();
  PacketDecoder dec(pt_pkt_alloc_decoder(&config));
  if (dec == nullptr || pt_pkt_sync_forward(dec.get()) < 0) return;
  for (;;) {
    uint64_t off = 0;
    if (pt_pkt_get_offset(dec.get(), &off) < 0) break;
    pt_packet pkt;
    int r = pt_pkt_next(dec.get(), &pkt, sizeof pkt);
    if (r == -pte_eos) break;
    if (r < 0) {
      if (pt_pkt_sync_forward(dec.get()) < 0) break;
      continue;
    }
    if (pkt.type != ppt_tsc || off + 8 > bytes->size()) continue;
    uint64_t tsc = (pkt.payload.tsc.tsc + k) & ((1ULL << 56) - 1);
    for (int i = 0; i < 7; ++i) (*bytes)[off + 1 + i] = static_cast<char>(tsc >> (8 * i));
  }
}

// Offsets at which `bytes` is cut into chunks of at most about `limit`
// bytes; each cut is at a PSB (02 82 repeated 8 times), so every chunk but
// possibly the first starts with one.
std::vector<size_t> PsbCuts(std::string_view bytes, uint64_t limit) {
  static constexpr char kPsb[] = "\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82\x02\x82";
  std::string_view psb(kPsb, 16);
  std::vector<size_t> cuts;
  size_t start = 0;
  while (bytes.size() - start > limit) {
    // The last PSB within the limit keeps chunks under it; else the next one.
    size_t at = bytes.rfind(psb, start + limit);
    if (at == std::string_view::npos || at <= start) at = bytes.find(psb, start + 1);
    if (at == std::string_view::npos) break;
    cuts.push_back(at);
    start = at;
  }
  return cuts;
}

std::string HexToRaw(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    auto nib = [](char c) -> int {
      if (c >= '0' && c <= '9') return c - '0';
      if (c >= 'a' && c <= 'f') return c - 'a' + 10;
      if (c >= 'A' && c <= 'F') return c - 'A' + 10;
      return -1;
    };
    int hi = nib(hex[i]), lo = nib(hex[i + 1]);
    if (hi < 0 || lo < 0) return {};
    out.push_back(static_cast<char>(hi * 16 + lo));
  }
  return out;
}

bool IsSpecialName(std::string_view name) { return name.empty() || name.front() == '['; }

// The files the sideband's mappings name, as perf should find them: a
// dumped vdso for [vdso], a copy from binaries/ where the original is gone,
// and each file's build-id (the manifest's, else read from the ELF file) for
// the build-id feature.
class ImageFiles {
 public:
  explicit ImageFiles(const trace::TraceReader& trace) : trace_(trace) {
    for (const trace::Binary& b : trace.manifest().binaries) {
      if (!b.build_id.empty()) manifest_ids_[b.path] = HexToRaw(b.build_id);
      if (!b.copy.empty() && trace::IsOwnedFile(trace.dir(), b.copy))
        copies_[b.path] = (trace.dir() / b.copy).string();
    }
  }
  void Map(trace::Mmap2* mm2) {
    std::string id = mm2->build_id;
    std::string fresh = Rewrite(&mm2->filename, &mm2->pgoff, mm2->pid);
    if (id.empty()) id = fresh;
    if (!id.empty() && !IsSpecialName(mm2->filename)) build_ids_[mm2->filename] = id;
  }
  void Map(trace::Mmap* mm) {
    std::string id = Rewrite(&mm->filename, &mm->pgoff, mm->pid);
    if (!id.empty() && !IsSpecialName(mm->filename)) build_ids_[mm->filename] = id;
  }
  // A file the export writes itself (JIT code), with its build-id.
  void Add(const std::string& filename, const std::string& id) { build_ids_[filename] = id; }
  void AddBuildIds(PerfDataWriter* w, ExportReport* report) const {
    if (build_ids_.empty()) return;
    std::string body;
    for (const auto& [file, id] : build_ids_) body += MakeBuildIdEntry(id, file, false);
    w->SetFeature(kFeatBuildId, body);
    report->build_ids = build_ids_.size();
  }

 private:
  // Rewrites the file name (and pgoff) and returns its build-id.
  std::string Rewrite(std::string* filename, uint64_t* pgoff, uint32_t pid) {
    if (*filename == "[vdso]") {
      const fs::path rel = fs::path("vdso") / (std::to_string(pid) + ".so");
      const fs::path dump = trace_.dir() / rel;
      if (trace::IsOwnedFile(trace_.dir(), rel)) {
        *filename = fs::absolute(dump).string();
        *pgoff = 0;
      }
    }
    std::string original = *filename;
    if (auto c = copies_.find(original); c != copies_.end()) {
      std::error_code ec;
      if (!fs::exists(original, ec)) *filename = fs::absolute(c->second).string();
    }
    if (IsSpecialName(*filename)) return {};
    if (auto it = manifest_ids_.find(original); it != manifest_ids_.end()) return it->second;
    return HexToRaw(elf::ReadBuildIdOf(*filename));
  }
  const trace::TraceReader& trace_;
  std::map<std::string, std::string> manifest_ids_, copies_, build_ids_;
};

// DataSegmentMappings for the (possibly rewritten) file `exec` maps; the
// program headers lie in its first pages.
std::vector<trace::Mmap2> DataSegments(const trace::Mmap2& exec, uint64_t page) {
  base::UniqueFd fd(::open(exec.filename.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) return {};
  std::string head(size_t{64} * 1024, '\0');
  ssize_t n = ::pread(fd.get(), head.data(), head.size(), 0);
  if (n <= 0) return {};
  head.resize(static_cast<size_t>(n));
  auto layout = elf::ParseLoadLayout(head);
  if (!layout) return {};
  return DataSegmentMappings(exec, *layout, page);
}

// OS release and command line features.
void AddHostFeatures(const trace::TraceReader& trace, PerfDataWriter* w) {
  const trace::Manifest& m = trace.manifest();
  if (!m.kernel_release.empty()) w->SetFeature(kFeatOsRelease, HeaderString(m.kernel_release));
  std::string body;
  std::vector<std::string> argv = {"ptsnap", "export", trace.dir().string()};
  uint32_t n = static_cast<uint32_t>(argv.size());
  body.append(reinterpret_cast<const char*>(&n), 4);
  for (const std::string& a : argv) body += HeaderString(a);
  w->SetFeature(kFeatCmdline, body);
}

bool IsAnonymousName(std::string_view name) {
  return name.starts_with("//anon") || name.starts_with("[anon:") || name.starts_with("/memfd:");
}

// JIT code (jit_maps.h): an MMAP2 per code load of the ELF file that holds
// it in `dir`, at the time PlaceJitMaps chooses; the anonymous executable
// mappings of the processes that have JIT code are dropped (perf inject
// --jit strips them too: perf would let them cover the code's files).
template <typename ShiftTime>
void AddJitMaps(const trace::TraceReader& trace, const fs::path& dir, const ShiftTime& shift_time,
                std::vector<trace::Record>* records, ImageFiles* images, ExportReport* report,
                std::vector<JitFile>* files) {
  JitCode jit = ReadJitCode(trace);
  report->warnings.insert(report->warnings.end(), jit.warnings.begin(), jit.warnings.end());
  if (jit.maps.empty()) return;
  std::set<int32_t> pids;
  for (JitMap& jm : jit.maps) {
    jm.time = shift_time(jm.time);
    pids.insert(jm.pid);
  }
  std::erase_if(*records, [&](const trace::Record& r) {
    const auto* mm2 = std::get_if<trace::Mmap2>(&r.body);
    return mm2 != nullptr && pids.count(static_cast<int32_t>(mm2->pid)) != 0 &&
           IsAnonymousName(mm2->filename);
  });
  PlaceJitMaps(&jit.maps, *records);
  for (const JitMap& jm : jit.maps) {
    const JitFile& f = jit.files[jm.file];
    trace::Mmap2 mm;
    mm.pid = static_cast<uint32_t>(jm.pid);
    mm.tid = jm.tid;
    mm.addr = jm.addr;
    mm.len = jm.len;
    mm.pgoff = kJitElfTextOffset;  // perf's map_ip then gives the code's file offset
    mm.prot = PROT_READ | PROT_EXEC;
    mm.flags = MAP_PRIVATE;
    mm.filename = (dir / JitFileName(f)).string();
    images->Add(mm.filename, f.build_id);
    trace::Record r;
    r.type = PERF_RECORD_MMAP2;
    r.sample_id = {mm.pid, mm.tid, jm.map_time, 0, 0, kDummyId};
    r.body = std::move(mm);
    records->push_back(std::move(r));
  }
  report->jit_dir = dir;
  report->jit_files = jit.files.size();
  report->jit_maps = jit.maps.size();
  *files = std::move(jit.files);
}

// A sampled trace (source "sampled", no PT): one attr, the recorded
// sampling event, owning the samples and the sideband alike (the kernel
// wrote both to the same ring); every id is rewritten to kSampleId.
Result<std::string> BuildSampledPerfData(const trace::TraceReader& trace, ExportReport* report) {
  const trace::Manifest& m = trace.manifest();
  const trace::Sampling& sa = *m.sampling;
  report->sampled = true;
  // The sideband's 32-byte trailer (TID, TIME, CPU, IDENTIFIER) is what perf
  // reads for this sample_type only if it has those bits and no ID or
  // STREAM_ID (perf_evsel__parse_id_sample reads the trailer from its end).
  constexpr uint64_t kNeeded = trace::kSampleType;
  if ((sa.sample_type & kNeeded) != kNeeded ||
      (sa.sample_type & (PERF_SAMPLE_ID | PERF_SAMPLE_STREAM_ID)) != 0) {
    char buf[160];
    std::snprintf(buf, sizeof buf,
                  "sampling.sample_type 0x%llx does not match the sideband's sample_id "
                  "trailer (needs TID, TIME, CPU and IDENTIFIER, no ID or STREAM_ID)",
                  static_cast<unsigned long long>(sa.sample_type));
    return Error(buf);
  }
  const bool kernel_scope = m.scope != trace::Scope::kUser;
  // Callgraph fp carries user registers and a small stack copy for the
  // decoder's leaf mend (decode/fp_mend.h). perf reads any recording with
  // both as a dwarf one and would unwind that copy after the callchain's
  // own user frames (callchain_param_setup, thread__resolve_callchain), so
  // the export leaves them out: what `perf record --call-graph fp` writes.
  constexpr uint64_t kUserCopy = PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
  const bool drop_user_copy = sa.callgraph == "fp" && (sa.sample_type & kUserCopy) != 0;
  const uint64_t sample_type = drop_user_copy ? sa.sample_type & ~kUserCopy : sa.sample_type;
  PerfDataWriter w;
  Attr attr;
  attr.type = sa.type;
  attr.config = sa.config;
  attr.sample_type = sample_type;
  attr.sample_period = sa.frequency != 0 ? sa.frequency : sa.period;
  attr.flags = kAttrDisabled | kAttrSampleIdAll | kAttrMmap | kAttrMmap2 | kAttrComm |
               kAttrCommExec | kAttrTask | kAttrExcludeHv | (sa.frequency != 0 ? kAttrFreq : 0) |
               (kernel_scope ? 0 : kAttrExcludeKernel);
  if (sa.callgraph == "dwarf") attr.flags |= kAttrExcludeCallchainUser;
  if (m.command.empty())
    attr.flags &= ~kAttrDisabled;  // attach: enabled at once
  else
    attr.flags |= kAttrEnableOnExec;
  attr.sample_regs_user = drop_user_copy ? 0 : sa.regs_user;
  attr.sample_stack_user = drop_user_copy ? 0 : sa.stack_user;
  attr.sample_max_stack = static_cast<uint16_t>(std::min<uint32_t>(sa.max_stack, 0xffff));
  if (sa.sample_type & PERF_SAMPLE_BRANCH_STACK)
    attr.branch_sample_type = PERF_SAMPLE_BRANCH_USER | PERF_SAMPLE_BRANCH_CALL_STACK;
  attr.name = sa.event + (kernel_scope ? "" : ":u");
  attr.ids = {kSampleId};
  w.AddAttr(attr);

  // Records in time order: the sideband, then each stream's samples (the
  // overlap of --multi-snapshot rings once only).
  struct Timed {
    uint64_t time;
    std::string bytes;
  };
  std::vector<Timed> out;
  PTSNAP_ASSIGN_OR_RETURN(trace::RecordStream sideband, trace.ReadSideband());
  ImageFiles images(trace);
  const bool dwarf = (sample_type & PERF_SAMPLE_STACK_USER) != 0;
  const uint64_t page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  std::set<std::tuple<uint32_t, std::string, uint64_t>> segments_added;  // pid, file, addr
  for (trace::Record r : sideband.records) {
    if (r.type == PERF_RECORD_AUX || r.type == PERF_RECORD_ITRACE_START) {
      ++report->skipped_records;
      continue;
    }
    if (auto* mm2 = std::get_if<trace::Mmap2>(&r.body)) {
      images.Map(mm2);
      if (dwarf && (mm2->prot & PROT_EXEC) != 0 && !IsSpecialName(mm2->filename)) {
        for (trace::Mmap2& data : DataSegments(*mm2, page)) {
          if (!segments_added.emplace(data.pid, data.filename, data.addr).second) continue;
          trace::Record dr = r;
          dr.body = std::move(data);
          dr.sample_id.id = kSampleId;
          out.push_back({r.sample_id.time, trace::SerializeRecord(dr)});
          ++report->sideband_records;
        }
      }
    } else if (auto* mm = std::get_if<trace::Mmap>(&r.body)) {
      images.Map(mm);
    } else if (auto* lost = std::get_if<trace::Lost>(&r.body)) {
      lost->id = kSampleId;
    }
    r.sample_id.id = kSampleId;
    out.push_back({r.sample_id.time, trace::SerializeRecord(r)});
    ++report->sideband_records;
  }
  std::set<std::tuple<uint32_t, uint64_t, std::string>> seen;
  for (const trace::Stream& s : m.streams) {
    if (s.kind != trace::StreamKind::kSamples) continue;
    PTSNAP_ASSIGN_OR_RETURN(std::string bytes, trace.ReadStream(s));
    PTSNAP_ASSIGN_OR_RETURN(SplitSamples split, SplitSampleStream(bytes, sa.sample_type));
    report->torn_bytes += split.torn_bytes;
    for (const SampleRef& ref : split.samples) {
      // Snapshots of one thread's ring overlap; the same sample (same
      // thread, time and bytes) is written once.
      if (m.snapshots.size() > 1 &&
          !seen.emplace(ref.tid, ref.time, std::string(ref.bytes)).second) {
        continue;
      }
      std::string bytes = WithSampleId(ref.bytes, sa.sample_type, kSampleId);
      if (drop_user_copy) {
        std::optional<std::string> without =
            WithoutUserRegsAndStack(bytes, sa.sample_type, sa.regs_user);
        if (!without) {
          ++report->skipped_records;  // its fields do not fit: the decoder skips it too
          continue;
        }
        bytes = std::move(*without);
      }
      out.push_back({ref.time, std::move(bytes)});
      ++report->samples;
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const Timed& a, const Timed& b) { return a.time < b.time; });
  for (Timed& t : out) w.AddRecord(std::move(t.bytes));
  w.AddRecord(MakeFinishedRound());
  images.AddBuildIds(&w, report);
  AddHostFeatures(trace, &w);
  return w.Finish();
}

}  // namespace

std::vector<trace::Mmap2> DataSegmentMappings(const trace::Mmap2& exec,
                                              const elf::LoadLayout& layout, uint64_t page_size) {
  std::vector<trace::Mmap2> out;
  auto vaddr = elf::OffsetToVaddr(layout.segments, exec.pgoff);
  if (!vaddr || page_size == 0) return out;
  const uint64_t bias = exec.addr - *vaddr;
  const uint64_t mask = ~(page_size - 1);
  for (const elf::Segment& seg : layout.segments) {
    if (seg.exec || seg.memsz == 0) continue;
    trace::Mmap2 m = exec;
    m.addr = bias + (seg.vaddr & mask);
    uint64_t end = bias + ((seg.vaddr + seg.memsz + page_size - 1) & mask);
    if (end <= m.addr) continue;
    m.len = end - m.addr;
    m.pgoff = seg.offset & mask;
    m.prot = PROT_READ;
    out.push_back(std::move(m));
  }
  return out;
}

uint64_t EffectiveConfig(const trace::PtConfig& pt) {
  uint64_t c = pt.config | kCfgPt | kCfgBranch;
  if (pt.tsc) c |= kCfgTsc;
  if (pt.mtc) c |= kCfgMtc;
  if (pt.cyc) c |= kCfgCyc;
  if (pt.noretcomp) c |= kCfgNoRetComp;
  if (pt.config == 0) {
    c |= (static_cast<uint64_t>(pt.mtc_freq) & 0xf) << kCfgMtcPeriodShift;
    c |= (static_cast<uint64_t>(pt.psb_period) & 0xf) << kCfgPsbPeriodShift;
  }
  return c;
}

Result<std::string> BuildPerfData(const trace::TraceReader& trace, const ExportOptions& options,
                                  ExportReport* report, std::vector<JitFile>* jit_files) {
  const trace::Manifest& m = trace.manifest();
  if (m.source == trace::Source::kSampled && m.sampling) return BuildSampledPerfData(trace, report);
  const bool kernel_scope = m.scope != trace::Scope::kUser;
  uint32_t pmu_type = m.pt.pmu_type != 0 ? m.pt.pmu_type : kEmulatedPmuType;
  uint64_t config = EffectiveConfig(m.pt);
  const uint64_t sample_type = PERF_SAMPLE_IP | trace::kSampleType;

  // Queues: one per thread (per-thread recording) or per CPU.
  std::map<std::pair<int32_t, int32_t>, uint32_t> queue_of;
  for (const trace::Stream& s : m.streams) {
    auto key = s.cpu >= 0 && s.tid < 0 ? std::pair{-1, s.cpu} : std::pair{s.tid, -1};
    queue_of.emplace(key, static_cast<uint32_t>(queue_of.size()));
  }
  bool per_cpu = std::any_of(m.streams.begin(), m.streams.end(),
                             [](const trace::Stream& s) { return s.cpu >= 0 && s.tid < 0; });

  PerfDataWriter w;
  Attr pt_attr;
  pt_attr.type = pmu_type;
  pt_attr.config = config;
  pt_attr.sample_type = sample_type;
  pt_attr.flags =
      kAttrDisabled | kAttrSampleIdAll | kAttrExcludeHv | (kernel_scope ? 0 : kAttrExcludeKernel);
  pt_attr.name = kernel_scope ? "intel_pt//" : "intel_pt//u";
  for (const auto& [key, idx] : queue_of) pt_attr.ids.push_back(kPtIdBase + idx);
  if (pt_attr.ids.empty()) pt_attr.ids.push_back(kPtIdBase);
  w.AddAttr(pt_attr);
  Attr dummy;
  dummy.type = PERF_TYPE_SOFTWARE;
  dummy.config = PERF_COUNT_SW_DUMMY;
  dummy.sample_type = sample_type;
  dummy.flags = kAttrSampleIdAll | kAttrMmap | kAttrMmap2 | kAttrComm | kAttrCommExec | kAttrTask |
                kAttrContextSwitch | kAttrExcludeHv | (kernel_scope ? 0 : kAttrExcludeKernel);
  dummy.name = kernel_scope ? "dummy:HG" : "dummy:u";
  dummy.ids = {kDummyId};
  w.AddAttr(dummy);

  // AUXTRACE_INFO: priv[] in intel_pt_info_fill() order (tools/perf/arch/x86/util/intel-pt.c).
  std::vector<uint64_t> priv = {
      pmu_type,
      m.time_conv.time_shift,
      m.time_conv.time_mult,
      m.time_conv.time_zero,
      m.time_conv.cap_user_time_zero ? 1u : 0u,
      kCfgTsc,
      kCfgNoRetComp,
      0,  // have_sched_switch: per-thread streams need no switch events
      m.mode == trace::Mode::kSnapshot ? 1u : 0u,
      per_cpu ? 1u : 0u,
      kCfgMtc,
      0xfULL << kCfgMtcPeriodShift,
      m.cpu.cpuid_15_ebx,  // TSC:CTC numerator (CPUID.15H EBX)
      m.cpu.cpuid_15_eax,  // denominator (EAX)
      kCfgCyc,
      m.pt.nom_freq,
      m.pt.filter.empty() ? 0 : m.pt.filter.size() + 1,
  };
  w.AddRecord(MakeAuxtraceInfo(priv, m.pt.filter));
  w.AddRecord(MakeTimeConv(m.time_conv.time_shift, m.time_conv.time_mult, m.time_conv.time_zero,
                           m.time_conv.cap_user_time_zero));

  // Streams first: their first TSC bounds the sideband times below.
  struct StreamData {
    const trace::Stream* info;
    std::string bytes;
    std::optional<uint64_t> first_time;
  };
  std::vector<StreamData> streams;
  std::map<uint32_t, uint64_t> first_time_of_tid;
  for (const trace::Stream& s : m.streams) {
    PTSNAP_ASSIGN_OR_RETURN(std::string bytes, trace.ReadStream(s));
    streams.push_back({&s, std::move(bytes), std::nullopt});
  }
  // A timed stream whose TSC is 0 somewhere: shift every TSC and every
  // sideband time by kTscShift ticks (perf crashes on TSC 0; see ShiftTsc).
  uint64_t tsc_shift = 0;
  if (m.pt.tsc) {
    for (const StreamData& sd : streams)
      if (FirstTsc(sd.bytes) == std::optional<uint64_t>(0)) tsc_shift = kTscShift;
  }
  auto shift_time = [&](uint64_t t) {
    if (tsc_shift == 0) return t;
    return trace::TscToPerfTime(m.time_conv, trace::PerfTimeToTsc(m.time_conv, t) + tsc_shift);
  };
  if (report != nullptr) {
    report->tsc_shift = tsc_shift;
    report->time_shift_ns = tsc_shift == 0 ? 0
                                           : trace::TscToPerfTime(m.time_conv, tsc_shift) -
                                                 trace::TscToPerfTime(m.time_conv, 0);
  }
  for (StreamData& sd : streams) {
    if (tsc_shift != 0) ShiftTsc(&sd.bytes, tsc_shift);
    if (m.pt.tsc) sd.first_time = FirstTscTime(sd.bytes, m.time_conv);
    if (sd.first_time && sd.info->tid >= 0) {
      auto [it, fresh] =
          first_time_of_tid.emplace(static_cast<uint32_t>(sd.info->tid), *sd.first_time);
      if (!fresh) it->second = std::min(it->second, *sd.first_time);
    }
  }

  PTSNAP_ASSIGN_OR_RETURN(trace::RecordStream sideband, trace.ReadSideband());
  std::vector<trace::Record> records;
  ImageFiles images(trace);
  bool have_kernel_mmap = false;
  for (trace::Record r : sideband.records) {
    r.sample_id.time = shift_time(r.sample_id.time);
    if (auto* task = std::get_if<trace::Task>(&r.body)) task->time = shift_time(task->time);
    if (r.type == PERF_RECORD_AUX) {
      ++report->skipped_records;
      continue;
    }
    if (auto* mm2 = std::get_if<trace::Mmap2>(&r.body)) {
      images.Map(mm2);
    } else if (auto* mm = std::get_if<trace::Mmap>(&r.body)) {
      if (mm->filename.starts_with("[kernel.kallsyms]")) have_kernel_mmap = true;
      images.Map(mm);
    } else if (auto* lost = std::get_if<trace::Lost>(&r.body)) {
      lost->id = kDummyId;
    }
    // perf 6.1 crashes on timed streams whose thread's start records come
    // after the first TSC (shared/reference/perf-data.md).
    // A FORK must precede the new thread's trace too, or perf decodes the
    // thread without its process's maps ("Failed to get instruction").
    if (r.type == PERF_RECORD_ITRACE_START || r.type == PERF_RECORD_COMM ||
        r.type == PERF_RECORD_FORK) {
      auto it = first_time_of_tid.find(r.sample_id.tid);
      if (it != first_time_of_tid.end() && r.sample_id.time > it->second) {
        r.sample_id.time = it->second;
        if (auto* task = std::get_if<trace::Task>(&r.body)) task->time = it->second;
      }
    }
    r.sample_id.id = kDummyId;
    records.push_back(std::move(r));
  }
  // ITRACE_START for every traced thread that has none (perf attaches the
  // stream to the thread with it in per-CPU mode; harmless per-thread).
  std::set<uint32_t> started;
  for (const trace::Record& r : records)
    if (r.type == PERF_RECORD_ITRACE_START) started.insert(r.sample_id.tid);
  for (const StreamData& sd : streams) {
    if (sd.info->tid < 0 || started.count(static_cast<uint32_t>(sd.info->tid))) continue;
    started.insert(static_cast<uint32_t>(sd.info->tid));
    trace::Record r;
    r.type = PERF_RECORD_ITRACE_START;
    uint32_t pid = static_cast<uint32_t>(sd.info->pid >= 0 ? sd.info->pid : sd.info->tid);
    r.body = trace::ItraceStart{pid, static_cast<uint32_t>(sd.info->tid)};
    r.sample_id = {pid,     static_cast<uint32_t>(sd.info->tid), sd.first_time.value_or(0), 0, 0,
                   kDummyId};
    records.push_back(std::move(r));
  }
  if (jit_files != nullptr && !options.jit_dir.empty())
    AddJitMaps(trace, options.jit_dir, shift_time, &records, &images, report, jit_files);
  std::stable_sort(records.begin(), records.end(), [](const auto& a, const auto& b) {
    return a.sample_id.time < b.sample_id.time;
  });

  // Kernel scopes: the kernel map perf record would have synthesised.
  if (kernel_scope && !have_kernel_mmap && m.kernel_start) {
    trace::Record r;
    r.type = PERF_RECORD_MMAP;
    r.misc = PERF_RECORD_MISC_KERNEL;
    trace::Mmap km;
    km.pid = kNone;
    km.tid = 0;
    km.addr = *m.kernel_start;
    km.len = ~0ULL - *m.kernel_start;
    // As perf record: the kernel map ends at _etext. Ending at ~0 would make
    // perf 6.1 lose the module area of kcore_dir/kcore: dso__load_kcore
    // merges kcore's module segment into the still-unshrunk kernel map
    // (only gaps are filled), then shrinks that map to kernel text.
    if (m.kcore.status == trace::KcoreStatus::kCopied) {
      auto text = trace::ReadOwnedFile(trace.dir(), fs::path(m.kcore.dir) / "kallsyms");
      auto ks = text ? sys::ParseKallsyms(*text, false) : sys::Kallsyms{};
      if (ks.etext && *ks.etext > km.addr) km.len = *ks.etext - km.addr;
    }
    km.pgoff = *m.kernel_start;
    km.filename = "[kernel.kallsyms]_text";
    r.body = km;
    r.sample_id = {kNone, 0, 0, 0, 0, kDummyId};
    std::string bytes = trace::SerializeRecord(r);
    // SerializeRecord takes misc from the body; restore the kernel bit.
    bytes[4] = static_cast<char>(PERF_RECORD_MISC_KERNEL);
    w.AddRecord(std::move(bytes));
    ++report->sideband_records;
    // And one map per module of the copied /proc/modules ("[name]", as perf
    // record's perf_event__synthesize_modules writes when the .ko is not
    // found): perf validates kcore_dir/modules against these module maps
    // before it maps module code from kcore_dir/kcore.
    if (m.kcore.status == trace::KcoreStatus::kCopied) {
      auto modules = trace::ReadOwnedFile(trace.dir(), fs::path(m.kcore.dir) / "modules");
      for (const auto& mod :
           modules ? sys::ParseModules(*modules) : std::vector<sys::ModuleLine>{}) {
        trace::Mmap mm;
        mm.pid = kNone;
        mm.tid = 0;
        mm.addr = mod.addr;
        mm.len = mod.size;
        mm.pgoff = 0;
        mm.filename = "[" + mod.name + "]";
        trace::Record mr;
        mr.type = PERF_RECORD_MMAP;
        mr.body = mm;
        mr.sample_id = {kNone, 0, 0, 0, 0, kDummyId};
        std::string mb = trace::SerializeRecord(mr);
        mb[4] = static_cast<char>(PERF_RECORD_MISC_KERNEL);
        w.AddRecord(std::move(mb));
        ++report->sideband_records;
      }
    }
  }
  for (const trace::Record& r : records) {
    w.AddRecord(trace::SerializeRecord(r));
    ++report->sideband_records;
  }
  w.AddRecord(MakeFinishedRound());

  std::map<uint32_t, uint64_t> queue_offset;
  for (StreamData& sd : streams) {
    const trace::Stream& s = *sd.info;
    auto key = s.cpu >= 0 && s.tid < 0 ? std::pair{-1, s.cpu} : std::pair{s.tid, -1};
    uint32_t idx = queue_of.at(key);
    uint32_t tid = s.tid >= 0 ? static_cast<uint32_t>(s.tid) : kNone;
    uint32_t cpu = s.cpu >= 0 ? static_cast<uint32_t>(s.cpu) : kNone;
    // A non-zero reference: perf 6.1 crashes on timed buffers whose reference is 0.
    uint64_t reference = s.id + 1;
    if (sd.first_time) reference = trace::PerfTimeToTsc(m.time_conv, *sd.first_time) | 1;
    std::string_view bytes = sd.bytes;
    std::vector<size_t> cuts = PsbCuts(bytes, options.split_limit);
    cuts.push_back(bytes.size());
    size_t start = 0;
    for (size_t cut : cuts) {
      std::string_view chunk = bytes.substr(start, cut - start);
      uint64_t& off = queue_offset[idx];
      w.AddAuxtrace(off, reference, idx, tid, cpu, chunk);
      off += (chunk.size() + 7) / 8 * 8;
      ++report->auxtrace_records;
      start = cut;
    }
  }
  w.AddRecord(MakeFinishedRound());

  // Features.
  images.AddBuildIds(&w, report);
  // No DIR_FORMAT feature for the kcore_dir layout: perf record --kcore
  // writes it only with --threads (data.N files); perf 6.1 given it with a
  // lone "data" file fails with EINVAL before reading any event.
  AddHostFeatures(trace, &w);
  return w.Finish();
}

namespace {

// The JIT code's ELF files, into `dir` (replaced with `force`, else it must
// not exist).
Result<void> WriteJitFiles(const fs::path& dir, const std::vector<JitFile>& files, bool force) {
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    if (!force)
      return Error(dir.string() +
                   " already exists (the JIT code of an earlier export?): choose another output "
                   "or pass --force");
    fs::remove_all(dir, ec);
    if (ec) return Error("removing " + dir.string() + ": " + ec.message());
  }
  fs::create_directories(dir, ec);
  if (ec) return Error("creating " + dir.string() + ": " + ec.message());
  for (const JitFile& f : files) {
    const fs::path p = dir / JitFileName(f);
    PTSNAP_TRY_CTX(base::WriteFileAtomic(p, f.bytes), "writing the JIT code file " + p.string());
  }
  base::GiveTreeToInvoker(dir);
  return {};
}

}  // namespace

Result<ExportReport> ExportTrace(const fs::path& trace_dir, const fs::path& out,
                                 const ExportOptions& options) {
  PTSNAP_ASSIGN_OR_RETURN(trace::TraceReader trace, trace::TraceReader::Open(trace_dir));
  const trace::Manifest& m = trace.manifest();
  ExportReport report;
  report.directory =
      m.scope != trace::Scope::kUser && m.kcore.status == trace::KcoreStatus::kCopied;
  std::error_code ec;
  if (fs::exists(out, ec) && !options.force)
    return Error(out.string() + " already exists: choose another output or pass --force");
  const bool sampled = m.source == trace::Source::kSampled;
  if (m.streams.empty())
    return Error(sampled ? "the trace has no sample streams (nothing was captured): nothing to "
                           "export"
                         : "the trace has no PT streams (nothing was captured): nothing to export");

  ExportOptions opts = options;
  opts.jit_dir = fs::absolute(report.directory ? out / "jit" : fs::path(out.string() + ".jit"), ec);
  std::vector<JitFile> jit_files;
  PTSNAP_ASSIGN_OR_RETURN(std::string bytes, BuildPerfData(trace, opts, &report, &jit_files));
  if (!report.directory && fs::is_directory(out, ec))
    return Error(out.string() + " is a directory: name a file to write perf.data to");
  if (!jit_files.empty()) PTSNAP_TRY(WriteJitFiles(opts.jit_dir, jit_files, options.force));
  if (!report.directory) {
    PTSNAP_TRY_CTX(base::WriteFileAtomic(out, bytes), "writing " + out.string());
    report.data_file = out;
    report.bytes = bytes.size();
    return report;
  }
  // perf's directory format: OUT/data + OUT/kcore_dir (perf record --kcore).
  // The DIR_FORMAT feature (version 1) tells perf to look there.
  if (options.force && fs::exists(out, ec) && !fs::is_directory(out, ec)) fs::remove(out, ec);
  fs::create_directories(out / "kcore_dir", ec);
  if (ec) return Error("creating " + (out / "kcore_dir").string() + ": " + ec.message());
  fs::permissions(out, fs::perms::owner_all, ec);
  for (const char* name : {"kallsyms", "modules", "kcore"}) {
    fs::path from = trace_dir / m.kcore.dir / name, to = out / "kcore_dir" / name;
    if (auto owned = trace::OpenOwnedFile(trace_dir, fs::path(m.kcore.dir) / name); !owned)
      return std::move(owned).error().AddContext("the trace's kernel image");
    fs::copy_file(from, to, fs::copy_options::overwrite_existing, ec);
    if (ec)
      return Error("copying " + from.string() + " to " + to.string() + ": " + ec.message() +
                   " (the trace's kernel image is incomplete)");
    fs::permissions(to, fs::perms::owner_read | fs::perms::owner_write, ec);
  }
  PTSNAP_TRY_CTX(base::WriteFileAtomic(out / "data", bytes), "writing " + (out / "data").string());
  base::GiveTreeToInvoker(out);
  report.data_file = out / "data";
  report.bytes = bytes.size();
  return report;
}

}  // namespace ptsnap::exporter
