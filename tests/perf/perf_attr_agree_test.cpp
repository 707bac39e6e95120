// ptsnap's perf_event_attrs against perf's own (issue #18 item 6, "the
// kernel ABI checked against perf"; docs/perf-interop.md, "ptsnap's attrs
// vs perf's").
//
// For every --timer-resolution preset (low, normal, high), scope (user,
// kernel, user+kernel), mode (snapshot, full) and unit (per-thread,
// --all-cpus) on fake Skylake and Broadwell intel_pt nodes
// (tests/support/fake_intel_pt.h), perf 6.1 runs `perf record -vv
// --per-thread` (or `-a`) with the equivalent event string (and, on a
// Skylake node with caps/power_event_trace, `pwr_evt` for --pwr-evt) in a
// private mount namespace where the fake node sits at
// /sys/bus/event_source/devices/intel_pt. perf prints each attr before it
// opens it; the kernel has no PMU of the fake type, so perf_open_shim.c
// (preloaded into perf only) opens a dummy in the PT event's place and perf
// goes on to its tracking event, then fails at the AUX mmap: nothing
// records. attr_dump prints, in the same layout, the attrs record::Prepare
// builds for `ptsnap run` from the same node. The PT event and the
// tracking dummy are compared field by field (flag words bit by bit);
// every difference must be in kAllowed below with its reason, every
// allowlist entry must still be needed, and any event perf opens beyond
// those two must be in ExtraEvents().
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "perf/attr_text.h"
#include "tests/support/fake_intel_pt.h"
#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"

namespace ptsnap {
namespace {

namespace fs = std::filesystem;
using perf::PerfAttrBlock;
using testing::FakeIntelPt;
using testing::RequiredEnv;
using testing::RunShell;
using testing::TempDir;

using Fields = std::map<std::string, std::string>;

// One allowed difference: on `event` ("pt" or "tracking"), `field` is
// `perf` in perf's attr and `ptsnap` in ptsnap's ("" = not set, i.e. 0).
// Flag words are compared bit by bit as "sample_type.IP" etc. The table in
// docs/perf-interop.md lists the same rows.
struct Allowed {
  const char* mode;  // "per-thread", "all-cpus", or "" for both
  const char* event;
  const char* field;
  const char* perf;
  const char* ptsnap;
  const char* reason;
};

const std::vector<Allowed> kAllowed = {
    {"", "pt", "sample_period", "1", "",
     "perf gives every event a period of 1 (its default for non-sampling events); a PT event "
     "never samples, and no kernel check reads the period of an AUX event"},
    {"", "pt", "sample_type.IP", "1", "",
     "perf's default sample_type; IP is not part of the sample_id_all trailer, and neither "
     "event writes PERF_RECORD_SAMPLE"},
    {"", "tracking", "sample_type.IP", "1", "", "as on the PT event"},
    {"per-thread", "pt", "sample_type.TIME", "", "1",
     "perf --per-thread leaves TIME out (it orders one thread's records by position); ptsnap "
     "keeps one trailer, trace::kSampleType = TID|TIME|CPU|IDENTIFIER, in every mode: TIME places "
     "sideband on PT's TSC timeline and across rings (perf adds TIME|CPU per-CPU too)"},
    {"per-thread", "pt", "sample_type.CPU", "", "1", "the same trailer: CPU for --all-cpus rings"},
    {"per-thread", "tracking", "sample_type.TIME", "", "1", "the same trailer on both events"},
    {"per-thread", "tracking", "sample_type.CPU", "", "1", "the same trailer on both events"},
    {"", "pt", "read_format.ID", "1", "",
     "perf read()s each fd's id to map sample ids to its evsels; ptsnap never read()s an event "
     "and keeps one ring per traced unit"},
    {"", "pt", "read_format.LOST", "1", "", "as read_format.ID: ptsnap never read()s the counter"},
    {"", "tracking", "read_format.ID", "1", "", "as on the PT event"},
    {"", "tracking", "read_format.LOST", "1", "", "as on the PT event"},
    {"per-thread", "tracking", "context_switch", "", "1",
     "ptsnap wants PERF_RECORD_SWITCH to mark when the traced thread was off the CPU; perf "
     "--per-thread asks for none unless --switch-events (perf -a sets it, as ptsnap does)"},
    {"", "tracking", "exclude_guest", "1", "",
     "perf's default modifier for a dummy; guest filtering applies to hardware counters, not "
     "to a software dummy's sideband"},
    {"", "tracking", "exclude_kernel", "1", "",
     "kernel scopes: perf's tracking event is always dummy:u, ptsnap gives it the scope's "
     "exclude bits (BuildTrackingAttr). No sideband match function reads exclude_kernel, and "
     "kernel scope already needs the privilege an exclude_kernel=0 open asks for"},
    {"", "tracking", "bpf_event", "1", "",
     "perf fetches JITed BPF programs' images (bpf(2)) for annotation; ptsnap does not decode "
     "BPF JIT code"},
    {"", "tracking", "ksymbol", "1", "",
     "user scope: perf always asks for ksymbol (BPF symbols); ptsnap traces no kernel code "
     "there"},
    {"all-cpus", "tracking", "ksymbol", "", "1",
     "kernel scopes: ptsnap's tracking events are CPU-wide here and carry the bit themselves; "
     "perf keeps it on its separate CPU-wide dummy (ExtraEvents). Same records either way"},
    {"all-cpus", "tracking", "text_poke", "", "1", "as ksymbol with --all-cpus"},
    {"all-cpus", "pt", "inherit", "1", "",
     "perf -a keeps its default inherit=1; the kernel inherits only task events, so on a "
     "CPU-wide event (pid -1) the bit does nothing"},
    {"all-cpus", "tracking", "inherit", "1", "", "as on the PT event"},
    {"per-thread", "kernel_sideband", "sample_type.IP", "1", "", "as on the PT event"},
    {"per-thread", "kernel_sideband", "sample_type.CPU", "", "1",
     "ptsnap's one trailer (trace::kSampleType) on every sideband record, as on the other events"},
    {"per-thread", "kernel_sideband", "read_format.ID", "1", "", "as on the PT event"},
    {"per-thread", "kernel_sideband", "read_format.LOST", "1", "", "as on the PT event"},
    {"per-thread", "kernel_sideband", "exclude_guest", "1", "", "as on the tracking event"},
    {"all-cpus", "tracking", "disabled", "", "1",
     "ptsnap opens every event disabled and enables it once its ring is mapped and redirected "
     "(PERF_EVENT_IOC_SET_OUTPUT); perf -a lets its tracking events run from the open"},
};

// Events perf opens that ptsnap does not, recognised by what they set.
struct ExtraEvent {
  const char* name;
  Fields must_have;  // field -> value
  bool cpu_wide;     // opened with pid -1 on each CPU
  const char* reason;
};

const std::vector<ExtraEvent>& ExtraEvents() {
  static const std::vector<ExtraEvent> extras = {
      {"perf's text_poke dummy",
       {{"type", "1"}, {"config", "0x9"}, {"ksymbol", "1"}, {"text_poke", "1"}},
       true,
       "kernel scopes with --all-cpus: perf opens a dummy on every CPU (pid -1) for TEXT_POKE "
       "and KSYMBOL, which reach only CPU-wide and current-task events; ptsnap's tracking events "
       "are CPU-wide there and carry both bits themselves (per-thread, ptsnap opens the same "
       "dummy, compared field by field as kernel_sideband)"},
  };
  return extras;
}

struct Config {
  std::string timer;  // ptsnap --timer-resolution
  std::string scope;  // attr_dump --scope
  bool full = false;
  bool all_cpus = false;  // ptsnap run --all-cpus, perf -a; else per-thread (perf --per-thread)
  bool pwr_evt = false;   // ptsnap run --pwr-evt, perf's pwr_evt term
};

std::string Name(const std::string& preset, const Config& c) {
  return preset + " " + c.timer + " " + c.scope + " " + (c.full ? "full" : "snapshot") + " " +
         (c.all_cpus ? "all-cpus" : "per-thread") + (c.pwr_evt ? " pwr_evt" : "");
}

// What a perf (or magic-trace) user spells for ptsnap's presets, from
// src/perf/attr.cpp: low is perf's default config (no terms); normal adds
// cyc=1, cyc_thresh=1, mtc_period=0; high adds noretcomp=1 too. Without
// caps/psb_cyc ptsnap downgrades normal and high to low (with a warning),
// so perf's equivalent is its default there as well.
std::string PerfEvent(const FakeIntelPt& pmu, const Config& c) {
  const bool psb_cyc = pmu.caps.count("psb_cyc") && pmu.caps.at("psb_cyc") != "0";
  std::string terms;
  if (psb_cyc && c.timer != "low") terms = "cyc=1,cyc_thresh=1,mtc_period=0";
  if (psb_cyc && c.timer == "high") terms += ",noretcomp=1";
  if (c.pwr_evt) terms += terms.empty() ? "pwr_evt" : ",pwr_evt";
  const std::string mod = c.scope == "user" ? "u" : c.scope == "kernel" ? "k" : "uk";
  return "intel_pt/" + terms + "/" + mod;
}

// sample_type and read_format bit by bit; the union names shortened.
Fields Expand(const Fields& in) {
  Fields out;
  for (const auto& [k, v] : in) {
    if (k == "sample_type" || k == "read_format") {
      for (const std::string& f : perf::SplitFlags(v)) out[k + "." + f] = "1";
    } else if (k == "{ sample_period, sample_freq }") {
      out["sample_period"] = v;
    } else {
      out[k] = v;
    }
  }
  return out;
}

std::string Get(const Fields& f, const std::string& k) {
  auto it = f.find(k);
  return it == f.end() ? "" : it->second;
}

bool Matches(const Fields& have, const Fields& want) {
  for (const auto& [k, v] : want)
    if (Get(have, k) != v) return false;
  return true;
}

struct Tally {
  int configs = 0;
  int fields = 0;  // (event, field) pairs that either side sets
  int agree = 0;
  int allowed = 0;
  std::vector<int> allowed_used = std::vector<int>(kAllowed.size(), 0);
  std::vector<int> extra_used;
  std::map<std::string, std::pair<int, int>> per_field;  // "event field" -> (agree, differ)
};

void Compare(const std::string& where, bool all_cpus, const char* event, const Fields& perf_f,
             const Fields& ptsnap_f, Tally* t) {
  std::set<std::string> names;
  for (const auto& kv : perf_f) names.insert(kv.first);
  for (const auto& kv : ptsnap_f) names.insert(kv.first);
  for (const std::string& n : names) {
    const std::string pv = Get(perf_f, n), sv = Get(ptsnap_f, n);
    ++t->fields;
    auto& pf = t->per_field[std::string(event) + " " + n];
    ++(pv == sv ? pf.first : pf.second);
    if (pv == sv) {
      ++t->agree;
      continue;
    }
    bool ok = false;
    for (size_t i = 0; i < kAllowed.size(); ++i) {
      const Allowed& a = kAllowed[i];
      if (a.event == std::string(event) && a.field == n && a.perf == pv && a.ptsnap == sv &&
          (a.mode == std::string("") ||
           a.mode == std::string(all_cpus ? "all-cpus" : "per-thread"))) {
        ok = true;
        ++t->allowed_used[i];
      }
    }
    if (ok) {
      ++t->allowed;
    } else {
      ADD_FAILURE() << where << ": " << event << " " << n << ": perf '" << pv << "', ptsnap '" << sv
                    << "' (fix ptsnap, or allowlist it with its reason in kAllowed and "
                    << "docs/perf-interop.md)";
    }
  }
}

// perf takes its intel_pt recorder only where auxtrace_record__init's
// strncmp(cpuid, "GenuineIntel,", 13) matches, which the compiler turns into
// two 8-byte immediates, "GenuineI" and "neIntel," (bytes 0-7 and 5-12). On
// an AMD host a copy of perf with those two replaced by "Authenti" and
// "nticAMD," takes the Intel path (nothing else in it changes), so the
// oracle runs here too. "" when the binary does not hold each exactly once
// close together (another build of perf): the test then skips.
// Each immediate is found as the operand of a movabs (REX.W 0x48/0x49, then
// 0xb8-0xbf), which tells it from the string literals perf also holds.
size_t FindMovabsImmediate(const std::string& bin, std::string_view imm, size_t from, int* count) {
  size_t found = std::string::npos;
  *count = 0;
  for (size_t i = bin.find(imm, from); i != std::string::npos; i = bin.find(imm, i + 1)) {
    if (i < 2) continue;
    const auto rex = static_cast<unsigned char>(bin[i - 2]);
    const auto op = static_cast<unsigned char>(bin[i - 1]);
    if ((rex == 0x48 || rex == 0x49) && op >= 0xb8 && op <= 0xbf) {
      if (++*count == 1) found = i;
    }
  }
  return found;
}

std::string PerfPatchedForAmd(const fs::path& dir) {
  const std::string perf = RunShell("readlink -f \"$(command -v perf)\"").out;
  std::ifstream in(perf.substr(0, perf.find('\n')), std::ios::binary);
  std::string bin((std::istreambuf_iterator<char>(in)), {});
  int n = 0, m = 0;
  const size_t a = FindMovabsImmediate(bin, "GenuineI", 0, &n);
  const size_t b = FindMovabsImmediate(bin, "neIntel,", 0, &m);
  if (n != 1 || m != 1 || b < a || b - a > 256) return "";
  bin.replace(a, 8, "Authenti");
  bin.replace(b, 8, "nticAMD,");
  const fs::path out = dir / "perf";
  std::ofstream(out, std::ios::binary) << bin;
  fs::permissions(out, fs::perms::owner_all);
  return out.string();
}

class PerfAttrAgree : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) GTEST_SKIP() << "needs root (mount namespaces and bind mounts)";
    if (RunShell("command -v perf").status != 0)
      GTEST_SKIP() << "perf is not installed (apt-get install linux-perf)";
    if (RunShell("command -v unshare").status != 0)
      GTEST_SKIP() << "unshare is not installed (util-linux)";
    if (RunShell("unshare -m true").status != 0)
      GTEST_SKIP() << "unshare -m fails here (no CAP_SYS_ADMIN in this container?)";
    // perf picks its AUX-area recorder by the CPUID vendor it reads with the
    // cpuid instruction (arch/x86/util/auxtrace.c): on another vendor's CPU
    // it never takes its intel_pt path ("No AUX area tracing to snapshot"),
    // whatever sysfs says, and neither CPUID faulting nor qemu-user (no
    // perf_event_open) can change what it reads here.
    const std::string vendor =
        RunShell("sed -n 's/^vendor_id[[:space:]]*: //p' /proc/cpuinfo | head -1").out;
    if (vendor.rfind("GenuineIntel", 0) == 0) return;
    perf_.clear();
    if (vendor.rfind("AuthenticAMD", 0) == 0) perf_ = PerfPatchedForAmd(bin_.path());
    if (perf_.empty())
      GTEST_SKIP() << "this host's CPU is " << vendor.substr(0, vendor.find('\n'))
                   << ", not GenuineIntel: perf records intel_pt only on Intel CPUs (and this "
                      "perf's vendor check is not the one PerfPatchedForAmd knows), so it "
                      "cannot be the oracle for ptsnap's attrs here";
  }
  TempDir bin_;
  std::string perf_ = "perf";  // or the copy that takes the Intel path on AMD
};

TEST_F(PerfAttrAgree, EveryPresetScopeAndModeMatchesPerfOrIsAllowlisted) {
  const std::string attr_dump = RequiredEnv("PTSNAP_ATTR_DUMP");
  const std::string shim = RequiredEnv("PTSNAP_PERF_OPEN_SHIM");
  ASSERT_FALSE(attr_dump.empty() || shim.empty());
  std::vector<Config> all_configs;
  for (const char* timer : {"low", "normal", "high"})
    for (const char* scope : {"user", "kernel", "both"})
      for (bool full : {false, true})
        for (bool all_cpus : {false, true}) all_configs.push_back({timer, scope, full, all_cpus});
  // --pwr-evt: the pwr_evt term on its own changes no other field, so a
  // few configurations cover it (both units, user and both scopes).
  std::vector<Config> pwr_configs;
  for (const char* timer : {"low", "normal"})
    for (const char* scope : {"user", "both"})
      for (bool all_cpus : {false, true})
        pwr_configs.push_back({timer, scope, false, all_cpus, /*pwr_evt=*/true});
  FakeIntelPt pwr_pmu = testing::SkylakeIntelPt();
  pwr_pmu.caps["power_event_trace"] = "1";

  Tally t;
  t.extra_used.assign(ExtraEvents().size(), 0);
  struct Preset {
    std::string name;
    FakeIntelPt pmu;
    const std::vector<Config>* configs;
  };
  const std::vector<Preset> presets = {{"skylake", testing::SkylakeIntelPt(), &all_configs},
                                       {"broadwell", testing::BroadwellIntelPt(), &all_configs},
                                       {"skylake+power_event_trace", pwr_pmu, &pwr_configs}};
  for (const auto& [preset, pmu, preset_configs] : presets) {
    const std::vector<Config>& configs = *preset_configs;
    TempDir tmp;
    testing::WriteIntelPt(tmp, pmu);
    // The fake devices directory: the fake intel_pt plus a mount point for
    // each real PMU (cpu, software, tracepoint, breakpoint, uprobe, ...),
    // which the script binds in, so perf still finds them.
    const fs::path devs = tmp.path() / "sys/bus/event_source/devices";
    std::ostringstream sh;
    sh << "set -e\nmount --make-rprivate /\n";
    for (const auto& e : fs::directory_iterator("/sys/bus/event_source/devices")) {
      const std::string n = e.path().filename();
      if (n == "intel_pt") continue;
      fs::create_directories(devs / n);
      sh << "mount --bind '" << fs::canonical(e.path()).string() << "' '" << (devs / n).string()
         << "'\n";
    }
    sh << "mount --bind '" << devs.string() << "' /sys/bus/event_source/devices\n";
    for (size_t i = 0; i < configs.size(); ++i) {
      const Config& c = configs[i];
      const std::string out = (tmp.path() / std::to_string(i)).string();
      sh << "'" << attr_dump << "' --root / --timer " << c.timer << " --scope " << c.scope
         << (c.full ? " --full" : "") << (c.all_cpus ? " --all-cpus" : "")
         << (c.pwr_evt ? " --pwr-evt" : "") << " --snapshot-size 4194304 >" << out << ".ptsnap 2>"
         << out << ".ptsnap.err || true\n";
      sh << "PTSNAP_FAKE_PMU_TYPE=" << pmu.type << " LD_PRELOAD='" << shim << "' '" << perf_
         << "' record -vv " << (c.all_cpus ? "-a" : "--per-thread") << (c.full ? "" : " -S")
         << " -m ,4M -o " << out << ".data -e '" << PerfEvent(pmu, c) << "' -- true >" << out
         << ".perf 2>&1 || true\n";
    }
    const fs::path script = tmp.path() / "run.sh";
    std::ofstream(script) << sh.str();
    auto run = RunShell("unshare -m sh " + script.string());
    ASSERT_EQ(run.status, 0) << run.out;

    for (size_t i = 0; i < configs.size(); ++i) {
      const std::string where = Name(preset, configs[i]);
      const fs::path out = tmp.path() / std::to_string(i);
      auto slurp = [](const fs::path& p) {
        std::ifstream in(p);
        return std::string(std::istreambuf_iterator<char>(in), {});
      };
      const std::string perf_text = slurp(out.string() + ".perf");
      const std::string ptsnap_text = slurp(out.string() + ".ptsnap");
      auto ptsnap_blocks = perf::ParsePerfAttrText(ptsnap_text);
      // PT, tracking, and per-thread in a kernel scope the CPU-wide
      // KSYMBOL/TEXT_POKE dummy.
      const bool want_ksb = !configs[i].all_cpus && configs[i].scope != "user";
      ASSERT_EQ(ptsnap_blocks.size(), want_ksb ? 3u : 2u)
          << where << ": attr_dump: " << slurp(out.string() + ".ptsnap.err") << ptsnap_text;
      // The events perf opened (a refused attempt is retried; only the
      // block that opened counts).
      const PerfAttrBlock* pt = nullptr;
      const PerfAttrBlock* tracking = nullptr;
      const PerfAttrBlock* ksb = nullptr;  // perf's text_poke dummy, per-thread
      std::vector<PerfAttrBlock> blocks = perf::ParsePerfAttrText(perf_text);
      for (const PerfAttrBlock& b : blocks) {
        if (b.opened.empty()) continue;
        const Fields f = Expand(b.fields);
        const bool cpu_wide = b.opened.front().first == -1;
        if (Get(f, "type") == pmu.type) {
          EXPECT_EQ(pt, nullptr) << where << ": two PT events";
          pt = &b;
        } else if (Get(f, "type") == "1" && Get(f, "config") == "0x9" && Get(f, "mmap") == "1" &&
                   cpu_wide == configs[i].all_cpus) {
          EXPECT_EQ(tracking, nullptr) << where << ": two tracking events";
          tracking = &b;
        } else if (want_ksb && cpu_wide && Get(f, "text_poke") == "1") {
          EXPECT_EQ(ksb, nullptr) << where << ": two text_poke dummies";
          ksb = &b;
        } else {
          bool known = false;
          for (size_t e = 0; e < ExtraEvents().size(); ++e) {
            if (Matches(f, ExtraEvents()[e].must_have) && ExtraEvents()[e].cpu_wide == cpu_wide) {
              known = true;
              ++t.extra_used[e];
            }
          }
          EXPECT_TRUE(known) << where << ": perf opened an event ptsnap does not open:\n"
                             << perf_text;
        }
      }
      ASSERT_NE(pt, nullptr) << where << ": perf opened no PT event:\n" << perf_text;
      ASSERT_NE(tracking, nullptr) << where << ": perf opened no tracking event:\n" << perf_text;
      ++t.configs;
      Compare(where, configs[i].all_cpus, "pt", Expand(pt->fields), Expand(ptsnap_blocks[0].fields),
              &t);
      Compare(where, configs[i].all_cpus, "tracking", Expand(tracking->fields),
              Expand(ptsnap_blocks[1].fields), &t);
      if (want_ksb) {
        ASSERT_NE(ksb, nullptr) << where << ": perf opened no CPU-wide text_poke dummy:\n"
                                << perf_text;
        // Opened on every CPU, as ptsnap opens its own (HardwareConfig).
        EXPECT_GT(ksb->opened.size(), 0u);
        for (const auto& [pid, cpu] : ksb->opened) EXPECT_EQ(pid, -1) << where;
        Compare(where, false, "kernel_sideband", Expand(ksb->fields),
                Expand(ptsnap_blocks[2].fields), &t);
      }
    }
  }
  for (size_t i = 0; i < kAllowed.size(); ++i)
    EXPECT_GT(t.allowed_used[i], 0) << "allowlist entry no longer needed: " << kAllowed[i].event
                                    << " " << kAllowed[i].field << " (remove it and its doc row)";
  for (size_t e = 0; e < ExtraEvents().size(); ++e)
    EXPECT_GT(t.extra_used[e], 0) << "extra event no longer opened by perf: "
                                  << ExtraEvents()[e].name;
  for (const auto& [field, counts] : t.per_field)
    std::printf("perf_attr_agree: %-34s %3d agree, %3d differ\n", field.c_str(), counts.first,
                counts.second);
  std::printf(
      "perf_attr_agree: %d configurations (2 PMUs x 3 presets x 3 scopes x snapshot/full x "
      "per-thread/all-cpus, and 8 with --pwr-evt), %d fields "
      "compared on the PT, tracking and per-thread text_poke events, %d agree, %d differ as "
      "allowlisted (%zu entries)\n",
      t.configs, t.fields, t.agree, t.allowed, kAllowed.size());
}

}  // namespace
}  // namespace ptsnap
