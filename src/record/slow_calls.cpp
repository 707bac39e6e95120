#include "record/slow_calls.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "base/file_util.h"
#include "base/log.h"
#include "elf/elf_file.h"
#include "elf/segments.h"
#include "elf/symbol_file.h"
#include "elf/symbol_match.h"
#include "perf/attr.h"
#include "record/options.h"
#include "sys/proc_maps.h"

namespace ptsnap::record {

SlowCallTracker::SlowCallTracker(uint64_t threshold_ns, bool rate_limit)
    : threshold_ns_(threshold_ns), rate_limit_(rate_limit) {}

size_t SlowCallTracker::depth(uint32_t tid) const {
  auto it = threads_.find(tid);
  return it == threads_.end() ? 0 : it->second.open.size();
}

std::optional<SlowCall> SlowCallTracker::Feed(const ProbeHit& hit) {
  Thread& t = threads_[hit.tid];
  if (!hit.is_return) {
    t.open.push_back({hit.time, hit.sp});
    return std::nullopt;
  }
  // The thread's innermost call open at the return's time. Entries after it
  // are calls begun after this return whose entry was read first (the
  // entry ring is read after the return ring, so one poll may see a later
  // entry but not yet the return before it): they stay open.
  size_t i = t.open.size();
  while (i > 0 && t.open[i - 1].time > hit.time) --i;
  if (hit.sp != 0) {
    // The returning frame's entry saw sp pointing at the return address,
    // which `ret` has popped: entry sp = return sp - 8. Entries deeper than
    // that (lower addresses) were unwound without returning.
    while (i > 0 && t.open[i - 1].sp != 0 && t.open[i - 1].sp + 8 < hit.sp) {
      t.open.erase(t.open.begin() + static_cast<std::ptrdiff_t>(i - 1));
      --i;
      ++unwound_;
    }
  }
  if (i == 0) {
    ++unmatched_returns_;
    return std::nullopt;
  }
  const Entry e = t.open[i - 1];
  t.open.erase(t.open.begin() + static_cast<std::ptrdiff_t>(i - 1));
  ++calls_;
  if (hit.time < e.time || hit.time - e.time < threshold_ns_) return std::nullopt;
  if (rate_limit_ && t.reported && hit.time - t.last_reported < SlowCallGapNs(threshold_ns_)) {
    ++t.skipped;
    ++skipped_;
    return std::nullopt;
  }
  SlowCall c{hit.pid, hit.tid, e.time, hit.time, t.skipped};
  t.reported = true;
  t.last_reported = hit.time;
  t.skipped = 0;
  return c;
}

Result<uint64_t> FileOffsetOf(std::string_view head, uint64_t vaddr) {
  auto header = elf::ParseElfHeader(std::as_bytes(std::span(head.data(), head.size())));
  if (!header) return std::move(header).error();
  auto phdrs =
      elf::ParseProgramHeaders(std::as_bytes(std::span(head.data(), head.size())), *header);
  if (!phdrs) return std::move(phdrs).error();
  for (const elf::ProgramHeader& ph : *phdrs) {
    if (ph.type != 1 /* PT_LOAD */) continue;
    if (vaddr >= ph.vaddr && vaddr - ph.vaddr < ph.filesz) return ph.offset + (vaddr - ph.vaddr);
  }
  return Error("address " + std::to_string(vaddr) + " is in no loadable segment of the file");
}

namespace {

// FUNC (any spelling of elf/symbol_match.h) in `file` (read through
// `read_as`): its file offset and shown name, or nullopt when the file has
// no such function. Error: it names several.
Result<std::optional<ProbeTarget>> FindIn(const std::filesystem::path& read_as,
                                          const std::filesystem::path& file,
                                          std::string_view symbol) {
  auto image = elf::ReadFunctions(read_as);
  if (!image) return std::optional<ProbeTarget>();  // unreadable or stripped: look elsewhere
  const elf::FunctionMatch m = elf::MatchFunctions(*image, symbol, file.string());
  if (m.functions.empty()) return std::optional<ProbeTarget>();
  if (m.functions.size() > 1)
    return Error("--slower-than: '" + std::string(symbol) + "' names " +
                 std::to_string(m.functions.size()) + " functions of " + file.string() + " (" +
                 elf::ListFunctions(m.functions) +
                 "), and --slower-than times one: name one, e.g. '" +
                 elf::Demangle(m.functions.front()->name) + "'")
        .WithKind(ErrorKind::kTrigger);
  const elf::Function* fn = m.functions.front();
  PTSNAP_ASSIGN_OR_RETURN(std::string head, base::ReadFileHead(read_as, 1 << 20));
  auto off = FileOffsetOf(head, fn->value);
  if (!off) return std::move(off).error().AddContext(std::string(symbol) + " in " + file.string());
  return std::optional<ProbeTarget>(ProbeTarget{file, *off, elf::Demangle(fn->name)});
}

}  // namespace

Result<ProbeTarget> ResolveProbeTarget(std::string_view symbol, pid_t pid) {
  const std::string proc = "/proc/" + std::to_string(pid);
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink(proc + "/exe", ec);
  if (ec) return Error::FromErrno("reading " + proc + "/exe", ec.value());
  std::vector<std::filesystem::path> files{exe};
  if (auto maps = sys::ReadProcMaps(base::RootPath(), pid)) {
    std::set<std::string> seen{exe.string()};
    for (const sys::MapEntry& m : *maps)
      if (m.exec && !m.path.empty() && m.path[0] == '/' && seen.insert(m.path).second)
        files.emplace_back(m.path);
  }
  for (const auto& f : files) {
    // The executable through /proc (it may have been replaced on disk).
    PTSNAP_ASSIGN_OR_RETURN(auto found,
                            FindIn(f == exe ? std::filesystem::path(proc + "/exe") : f, f, symbol));
    if (found) return std::move(*found);
  }
  std::string searched = exe.string();
  if (files.size() > 1)
    searched += " and the " + std::to_string(files.size() - 1) + " libraries it maps";
  return Error("--slower-than: no function named '" + std::string(symbol) + "' in " + searched +
               " (check the spelling: " + std::string(elf::kSpellingsHint) +
               "; a library loaded later with dlopen is not searched)");
}

Result<std::unique_ptr<SlowCallProbes>> SlowCallProbes::Create(const base::RootPath& root,
                                                               ProbeTarget target,
                                                               uint64_t threshold_ns,
                                                               bool rate_limit) {
  std::unique_ptr<SlowCallProbes> p(
      new SlowCallProbes(std::move(target), threshold_ns, rate_limit));
  p->pmu_ = sys::ReadPmu(root, "uprobe");
  p->path_ = p->target_.file.string();
  // Both attrs now: a kernel without return probes fails before any opens.
  PTSNAP_TRY(perf::BuildUprobeAttr(p->pmu_, p->path_.c_str(), p->target_.offset, true, false));
  return p;
}

Result<void> SlowCallProbes::AddThread(pid_t tid) {
  if (std::any_of(probes_.begin(), probes_.end(), [&](const Probe& p) { return p.tid == tid; }))
    return Ok();
  // Per thread, not inherited: the kernel maps no ring of an inherited
  // per-task event (perf_mmap: EINVAL for inherit with cpu -1), and an
  // inherited uprobe event would be created again in the cloning task,
  // where config1 (a pointer into ptsnap) names no path
  // (perf_uprobe_init's strndup_user). The recorder adds each new thread
  // as its PERF_RECORD_FORK is read.
  for (bool ret : {false, true}) {
    PTSNAP_ASSIGN_OR_RETURN(perf_event_attr attr,
                            perf::BuildUprobeAttr(pmu_, path_.c_str(), target_.offset, ret, false));
    // 16 pages: a call a microsecond for a few ms between drains.
    auto ev = perf::PerfEvent::Open(attr, tid, -1, perf::MapSpec{16, 0, false},
                                    std::string(ret ? "return" : "entry") + " probe (uprobe) on " +
                                        target_.symbol + " for tid " + std::to_string(tid));
    if (!ev) return std::move(ev).error();
    Probe p;
    p.event = std::make_unique<perf::PerfEvent>(std::move(*ev));
    p.ring = std::make_unique<perf::DataRingReader>(p.event->header(), p.event->data());
    p.is_return = ret;
    p.tid = tid;
    probes_.push_back(std::move(p));
  }
  return Ok();
}

void SlowCallProbes::ThreadExited(pid_t tid) {
  if (std::none_of(probes_.begin(), probes_.end(), [&](const Probe& p) { return p.tid == tid; }))
    return;
  // Its last hits first (the next Poll returns what they complete).
  std::vector<SlowCall> found = Poll();
  pending_.insert(pending_.end(), found.begin(), found.end());
  std::erase_if(probes_, [&](const Probe& p) { return p.tid == tid; });
}

std::vector<SlowCall> SlowCallProbes::Poll() {
  std::vector<ProbeHit> hits;
  for (bool want_return : {true, false}) {
    for (Probe& p : probes_) {
      if (p.is_return != want_return) continue;
      auto n = p.ring->Drain([&](std::span<const std::byte> rec) {
        perf_event_header h;
        std::memcpy(&h, rec.data(), sizeof(h));
        if (h.type == PERF_RECORD_LOST) {
          ++lost_;
          return;
        }
        // TID, TIME, then REGS_USER: abi, and sp only when abi != 0.
        constexpr size_t kMin = sizeof(h) + offsetof(perf::UprobeSample, sp);
        if (h.type != PERF_RECORD_SAMPLE || rec.size() < kMin) return;
        perf::UprobeSample s{};
        std::memcpy(&s, rec.data() + sizeof(h), std::min(sizeof(s), rec.size() - sizeof(h)));
        if (s.abi == 0 || rec.size() < sizeof(h) + sizeof(s)) s.sp = 0;
        hits.push_back({p.is_return, s.pid, s.tid, s.time, s.sp});
      });
      if (!n) PTSNAP_LOG(kWarning) << "slow-call probe ring: " << n.error().ToString();
    }
  }
  // Time order; at equal times an entry before a return.
  std::stable_sort(hits.begin(), hits.end(), [](const ProbeHit& a, const ProbeHit& b) {
    return a.time != b.time ? a.time < b.time : (!a.is_return && b.is_return);
  });
  std::vector<SlowCall> out = std::move(pending_);
  pending_.clear();
  for (const ProbeHit& h : hits)
    if (auto c = tracker_.Feed(h)) out.push_back(*c);
  return out;
}

void SlowCallProbes::AppendFds(std::vector<int>& fds) const {
  for (const Probe& p : probes_) fds.push_back(p.event->fd());
}

}  // namespace ptsnap::record
