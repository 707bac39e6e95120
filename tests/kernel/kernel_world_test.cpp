// Kernel scope end to end without kernel PT hardware (docs/kernel-tracing.md):
// a real test kernel and a real user program, a fake root whose /proc/kcore
// holds that kernel, ptsnap's probe gate and kcore copier run on it, and
// genuine Intel PT for every way a thread crosses into the kernel, decoded by
// ptsnap's decoder against the copied kernel text.
//
// Golden files: tests/data/kernel/*.events; regenerate with
//   tools/dev update-goldens
#include <sys/stat.h>
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <map>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "base/file_util.h"
#include "base/root_path.h"
#include "base/string_util.h"
#include "kernel/kernel_world.h"
#include "output/fxt_reader.h"
#include "pipeline/pipeline.h"
#include "probe/probe.h"
#include "record/kcore_copy.h"
#include "record/options.h"
#include "record/recorder.h"
#include "support/fake_intel_pt.h"
#include "support/result_matchers.h"
#include "support/temp_dir.h"
#include "sys/cpuid.h"
#include "tests/support/events.h"
#include "tests/support/fake_cpuid.h"
#include "tests/support/golden.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

#ifndef PTSNAP_SOURCE_ROOT
#define PTSNAP_SOURCE_ROOT "."
#endif

namespace ptsnap::kworld {
namespace {

using ::ptsnap::testing::HasErrorContaining;
using ::ptsnap::testing::HasErrorKind;
using ::ptsnap::testing::HasValue;
using ::ptsnap::testing::TempDir;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

// ---- helpers ----------------------------------------------------------------

std::string Golden(const std::string& name) {
  return std::string(PTSNAP_SOURCE_ROOT) + "/tests/data/kernel/" + name;
}

// Compares with tests/data/kernel/NAME; tools/dev update-goldens rewrites it.
void ExpectGolden(const std::string& actual, const std::string& name) {
  ::ptsnap::testing::ExpectGoldenFile(actual, Golden(name));
}

struct Decoded {
  pipeline::DecodeReport report;
  std::string text;                // the output file
  std::vector<std::string> lines;  // events only: "B name" / "E name" / "I name"
};

// Writes the trace for `opts` and decodes it with ptsnap's pipeline.
Decoded Decode(const Scenario& sc, const TraceOptions& opts, const std::filesystem::path& dir,
               const std::string& format = "events") {
  Decoded d;
  auto w = WriteTrace(sc, dir / "trace", opts);
  EXPECT_THAT(w, HasValue());
  pipeline::DecodeOptions o;
  o.output = dir / ("out." + format);
  o.format = format;
  auto r = pipeline::DecodeTraceDir(dir / "trace", o);
  EXPECT_THAT(r, HasValue());
  if (!r) return d;
  d.report = *r;
  auto text = format == "fxt" ? output::ReadMaybeGzip(o.output) : base::ReadFile(o.output);
  EXPECT_THAT(text, HasValue());
  if (text) d.text = *text;
  // The default decoder is ptsnap's own: libipt, the oracle, must write the
  // same file and count the same (docs/decoding.md, "Decoders").
  pipeline::DecodeOptions lo = o;
  lo.output = dir / ("out-libipt." + format);
  lo.decoder = decode::PtDecoder::Engine::kLibipt;
  auto lr = pipeline::DecodeTraceDir(dir / "trace", lo);
  EXPECT_THAT(lr, HasValue());
  if (lr) {
    auto ltext = format == "fxt" ? output::ReadMaybeGzip(lo.output) : base::ReadFile(lo.output);
    EXPECT_TRUE(ltext.has_value() && *ltext == d.text)
        << "--decoder libipt wrote another " << format;
    EXPECT_EQ(lr->decode.instructions, r->decode.instructions);
    EXPECT_EQ(lr->decode.errors, r->decode.errors);
    EXPECT_EQ(lr->slices, r->slices);
    std::printf("decoded: %llu instructions; streams ours left to libipt: %llu\n",
                static_cast<unsigned long long>(r->decode.instructions),
                static_cast<unsigned long long>(r->decode.flow_fallbacks));
  }
  if (format == "events") {
    // Kind and name of each B, E and I.
    for (const auto& e : ::ptsnap::testing::ParseEvents(d.text)) {
      if (e.kind != 'X') d.lines.push_back(std::string(1, e.kind) + " " + e.name);
    }
  }
  return d;
}

// Index of the first line equal to `what` at or after `from`; -1 if none.
int IndexOf(const std::vector<std::string>& lines, const std::string& what, int from = 0) {
  for (int i = from; i < static_cast<int>(lines.size()); ++i) {
    if (lines[i] == what) return i;
  }
  return -1;
}

int Count(const std::vector<std::string>& lines, const std::string& what) {
  return static_cast<int>(std::count(lines.begin(), lines.end(), what));
}

// `inner` begins and ends strictly inside the first `outer` frame at or
// after `from`; returns the index of inner's begin.
int ExpectNested(const std::vector<std::string>& lines, const std::string& outer,
                 const std::string& inner, int from = 0) {
  int ob = IndexOf(lines, "B " + outer, from);
  EXPECT_GE(ob, 0) << "no frame " << outer;
  int oe = IndexOf(lines, "E " + outer, ob + 1);
  int ib = IndexOf(lines, "B " + inner, ob + 1);
  int ie = IndexOf(lines, "E " + inner, ib + 1);
  EXPECT_GT(ib, ob) << inner << " does not begin inside " << outer;
  EXPECT_GT(ie, ib) << inner << " does not end";
  EXPECT_LT(ie, oe) << inner << " does not end inside " << outer;
  return ib;
}

const std::vector<std::string> kKernelNames = {
    "entry_SYSCALL_64", "do_syscall_64", "ksys_write", "fdget_pos", "vfs_write", "trace_vfs_write",
    "account_write", "asm_exc_page_fault", "exc_page_fault", "handle_mm_fault",
    "asm_sysvec_apic_timer_interrupt", "sysvec_apic_timer_interrupt",
    // Module symbols are shown with their module, as perf does.
    "kmod_write [ptsnap_kmod]", "kmod_copy_from_user [ptsnap_kmod]",
    "kmod_timer_tick [ptsnap_kmod]"};
const std::vector<std::string> kUserNames = {"_start",     "main",    "say_hello", "check_result",
                                             "touch_page", "compute", "finish"};

// ---- the test kernel and the user program ----------------------------------

TEST(TestKernel, IsLinkedAtKernelAddressesWithAModule) {
  auto k = LoadTestKernel();
  ASSERT_THAT(k, HasValue());
  EXPECT_EQ(k->elf.Sym("_text"), 0xffffffff81000000u);
  EXPECT_EQ(k->elf.Sym("_stext"), 0xffffffff81000000u);
  EXPECT_EQ(k->elf.Sym("kmod_write"), kModuleBase);
  std::string ks = k->Kallsyms();
  EXPECT_THAT(ks, HasSubstr("ffffffff81000000 T _stext\n"));
  EXPECT_THAT(ks, HasSubstr(" T _etext\n"));
  EXPECT_THAT(ks, HasSubstr(" T entry_SYSCALL_64\n"));
  EXPECT_THAT(ks, HasSubstr(" T handle_mm_fault\n"));  // the C part
  EXPECT_THAT(ks, HasSubstr("ffffffffc0000000 T kmod_write\t[ptsnap_kmod]\n"));
  EXPECT_THAT(ks, HasSubstr(" R sys_call_table\n"));
  EXPECT_THAT(ks, Not(HasSubstr("__jump_site")));  // a label, not a symbol
  EXPECT_THAT(k->Kallsyms(true), HasSubstr("0000000000000000 T _stext\n"));
  EXPECT_EQ(k->Modules(), "ptsnap_kmod 16384 0 - Live 0xffffffffc0000000\n");
}

TEST(TestKernel, UserProgramIsRealAndRuns) {
  auto u = LoadUserProgram();
  ASSERT_THAT(u, HasValue());
  FILE* p = ::popen(u->path.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[64];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int status = ::pclose(p);
  EXPECT_EQ(out, "hello\nhello\n");
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

// ---- the probe's kcore gate on the fake root --------------------------------

probe::ProbeReport ProbeRoot(const std::filesystem::path& root) {
  auto env = probe::RootEnv(root);
  EXPECT_THAT(env, HasValue());
  env->getenv = [](std::string_view) -> std::optional<std::string> { return std::nullopt; };
  return probe::RunProbe(*env);
}

const probe::Check& Get(const probe::ProbeReport& r, const std::string& id) {
  static const probe::Check kNone{"", "", probe::Status::kFail, "(absent)", ""};
  const probe::Check* c = r.Find(id);
  return c != nullptr ? *c : kNone;
}

TEST(KcoreGate, PassesOnTheTestKernelsRoot) {
  TempDir dir;
  auto k = LoadTestKernel();
  ASSERT_THAT(k, HasValue());
  ASSERT_THAT(WriteFakeRoot(*k, dir.path()), HasValue());
  probe::ProbeReport r = ProbeRoot(dir.path());
  EXPECT_TRUE(r.kcore_usable);
  EXPECT_EQ(Get(r, "kcore.kallsyms").status, probe::Status::kOk);
  EXPECT_THAT(Get(r, "kcore.kallsyms").value,
              HasSubstr("kernel text 0xffffffff81000000-0xffffffff8100"));
  EXPECT_EQ(Get(r, "kcore.file").status, probe::Status::kOk);
  EXPECT_THAT(Get(r, "kcore.file").value, HasSubstr("4 PT_LOADs"));
  EXPECT_EQ(Get(r, "kcore.kernel_version").status, probe::Status::kOk);
}

TEST(KcoreGate, FailsWhenKcoreIsUnreadable) {
  TempDir dir;
  auto k = LoadTestKernel();
  ASSERT_THAT(k, HasValue());
  ASSERT_THAT(WriteFakeRoot(*k, dir.path()), HasValue());
  // Root reads any file whatever its mode; a directory opens but cannot be
  // read (EISDIR), as an unreadable kcore behaves.
  std::filesystem::remove(dir.path() / "proc/kcore");
  std::filesystem::create_directory(dir.path() / "proc/kcore");
  probe::ProbeReport r = ProbeRoot(dir.path());
  EXPECT_FALSE(r.kcore_usable);
  EXPECT_EQ(Get(r, "kcore.file").status, probe::Status::kWarn);
  EXPECT_THAT(Get(r, "kcore.file").value, HasSubstr("cannot open"));
}

TEST(KcoreGate, FailsWhenKallsymsIsMasked) {
  TempDir dir;
  auto k = LoadTestKernel();
  ASSERT_THAT(k, HasValue());
  ASSERT_THAT(WriteFakeRoot(*k, dir.path()), HasValue());
  ASSERT_THAT(base::WriteFileAtomic(dir.path() / "proc/kallsyms", k->Kallsyms(true), 0444),
              HasValue());
  ASSERT_THAT(base::WriteFileAtomic(dir.path() / "proc/sys/kernel/kptr_restrict", "2\n", 0444),
              HasValue());
  probe::ProbeReport r = ProbeRoot(dir.path());
  EXPECT_FALSE(r.kcore_usable);
  EXPECT_EQ(Get(r, "kcore.kallsyms").value,
            "addresses masked (all zero; kptr_restrict 2 hides them from everyone)");
  EXPECT_THAT(Get(r, "kcore.kallsyms").fix, HasSubstr("kptr_restrict=1"));
  // And the copier refuses it, saying why.
  EXPECT_THAT(record::CopyKcore(base::RootPath(dir.path()), dir.path() / "out"),
              HasErrorContaining("zero addresses"));
}

// Root whose CAP_SYS_RAWIO was dropped: the kernel refuses open_kcore(), so
// the probe says so without opening, and the recorder takes no image.
TEST(KcoreGate, FailsWithoutCapSysRawio) {
  TempDir dir;
  auto k = LoadTestKernel();
  ASSERT_THAT(k, HasValue());
  ASSERT_THAT(WriteFakeRoot(*k, dir.path()), HasValue());
  ASSERT_THAT(
      base::WriteFileAtomic(dir.path() / "proc/self/status",
                            "Name:\tptsnap\nUid:\t0\t0\t0\t0\nCapEff:\t000001fffffdffff\n", 0444),
      HasValue());
  probe::ProbeReport r = ProbeRoot(dir.path());
  EXPECT_FALSE(r.kcore_usable);
  EXPECT_EQ(Get(r, "kcore.file").status, probe::Status::kWarn);
  EXPECT_EQ(Get(r, "kcore.file").value,
            "present, but this process may not open it: no CAP_SYS_RAWIO");
  EXPECT_EQ(Get(r, "kcore.file").fix, "run as root (CAP_SYS_RAWIO)");
  TempDir trace;
  record::KernelImage img = record::SnapshotKernelImage(
      base::RootPath(dir.path()), trace.path(),
      [](std::string_view) -> std::optional<std::string> { return std::nullopt; });
  EXPECT_EQ(img.status, trace::KcoreStatus::kUnavailable);
  EXPECT_EQ(img.reason,
            "present, but this process may not open it: no CAP_SYS_RAWIO; run as root "
            "(CAP_SYS_RAWIO)");
  EXPECT_FALSE(std::filesystem::exists(trace.path() / "kcore"));
}

TEST(KcoreGate, FailsOnKernelsOlderThan5_5) {
  TempDir dir;
  auto k = LoadTestKernel();
  ASSERT_THAT(k, HasValue());
  ASSERT_THAT(WriteFakeRoot(*k, dir.path(), "5.4.0-1103-aws"), HasValue());
  probe::ProbeReport r = ProbeRoot(dir.path());
  EXPECT_FALSE(r.kcore_usable);
  EXPECT_EQ(Get(r, "kcore.kernel_version").status, probe::Status::kWarn);
  EXPECT_THAT(Get(r, "kcore.kernel_version").value, HasSubstr("< 5.5"));
  EXPECT_EQ(Get(r, "kcore.file").status, probe::Status::kOk);  // the file itself is fine
}

// ---- privileges for kernel scopes, on the same fake root --------------------

// A non-root caller with capability set `caps` and the given paranoid level,
// on the test kernel's root with an intel_pt PMU.
void WriteCaller(const std::filesystem::path& root, uint64_t caps, int paranoid) {
  char status[160];
  std::snprintf(status, sizeof status, "Name:\tx\nUid:\t1000\t1000\t1000\t1000\nCapEff:\t%016llx\n",
                static_cast<unsigned long long>(caps));
  ASSERT_THAT(base::WriteFileAtomic(root / "proc/self/status", status, 0444), HasValue());
  ASSERT_THAT(base::WriteFileAtomic(root / "proc/sys/kernel/perf_event_paranoid",
                                    std::to_string(paranoid) + "\n", 0444),
              HasValue());
}

TEST(KernelPrivileges, KernelScopesNeedPerfmonOrParanoidOne) {
  TempDir dir;
  auto k = LoadTestKernel();
  ASSERT_THAT(k, HasValue());
  ASSERT_THAT(WriteFakeRoot(*k, dir.path()), HasValue());
  ::ptsnap::testing::WriteIntelPt(dir, ::ptsnap::testing::SkylakeIntelPt());
  ::ptsnap::testing::FakeCpuid cpuid;
  record::RecordOptions o;
  o.command = {"/bin/true"};
  const base::RootPath root(dir.path());
  for (auto scope : {trace::Scope::kUserKernel, trace::Scope::kKernel}) {
    o.scope = scope;
    const char* flag =
        scope == trace::Scope::kKernel ? "--trace-kernel-only" : "--trace-include-kernel";
    WriteCaller(dir.path(), 0, 2);
    EXPECT_THAT(record::Prepare(o, root, cpuid),
                AllOf(HasErrorContaining(std::string(flag) + " needs CAP_PERFMON"),
                      HasErrorKind(ErrorKind::kPrivilege)));
    WriteCaller(dir.path(), uint64_t{1} << 38, 2);  // CAP_PERFMON
    EXPECT_THAT(record::Prepare(o, root, cpuid), HasValue()) << flag;
    WriteCaller(dir.path(), 0, 1);
    EXPECT_THAT(record::Prepare(o, root, cpuid), HasValue()) << flag;
  }
  // The user scope needs none of it.
  o.scope = trace::Scope::kUser;
  WriteCaller(dir.path(), 0, 2);
  EXPECT_THAT(record::Prepare(o, root, cpuid), HasValue());
}

TEST(KernelPrivileges, KcoreThatCannotBeReadIsACopyErrorNamingIt) {
  TempDir dir;
  auto k = LoadTestKernel();
  ASSERT_THAT(k, HasValue());
  ASSERT_THAT(WriteFakeRoot(*k, dir.path() / "root"), HasValue());
  // Without CAP_SYS_RAWIO open() fails; as root here, a directory stands in
  // for a kcore that cannot be read.
  std::filesystem::remove(dir.path() / "root/proc/kcore");
  std::filesystem::create_directory(dir.path() / "root/proc/kcore");
  EXPECT_THAT(record::CopyKcore(base::RootPath(dir.path() / "root"), dir.path() / "out"),
              HasErrorContaining("/proc/kcore"));
  EXPECT_FALSE(std::filesystem::exists(dir.path() / "out/kcore"));
}

// ---- the recorder's kcore copier on the fake root ---------------------------

TEST(KcoreCopier, CopiesOnlyTextAndModuleRegionsMode0600) {
  TempDir dir;
  auto k = LoadTestKernel();
  ASSERT_THAT(k, HasValue());
  ASSERT_THAT(WriteFakeRoot(*k, dir.path() / "root"), HasValue());
  auto copy = record::CopyKcore(base::RootPath(dir.path() / "root"), dir.path() / "kcore");
  ASSERT_THAT(copy, HasValue());
  EXPECT_FALSE(copy->kallsyms_changed);
  EXPECT_EQ(copy->kernel_start, std::optional<uint64_t>(0xffffffff81000000u));
  ASSERT_EQ(copy->regions.size(), 2u);
  EXPECT_EQ(copy->regions[0].vaddr, 0xffffffff81000000u);
  EXPECT_EQ(copy->regions[0].filesz, 0x1000u);  // _stext.._etext, page-rounded
  EXPECT_EQ(copy->regions[1].vaddr, kModuleBase);
  EXPECT_GE(copy->regions[1].filesz, 0x1000u);
  EXPECT_LE(copy->regions[1].filesz, 0x2000u);  // last module symbol + one page

  for (const char* f : {"kallsyms", "modules", "kcore"}) {
    struct stat st;
    ASSERT_EQ(::stat((dir.path() / "kcore" / f).c_str(), &st), 0) << f;
    EXPECT_EQ(st.st_mode & 0777, 0600u) << f;
  }
  EXPECT_EQ(*base::ReadFile(dir.path() / "kcore/kallsyms"), k->Kallsyms());
  EXPECT_EQ(*base::ReadFile(dir.path() / "kcore/modules"), k->Modules());

  // The copy, read back as ELF: the kernel's real code bytes, nothing else.
  auto copied = LoadElf(dir.path() / "kcore/kcore");
  ASSERT_THAT(copied, HasValue());
  ASSERT_EQ(copied->loads.size(), 2u);
  const Segment& text = k->elf.loads[0];
  EXPECT_EQ(copied->loads[0].bytes.substr(0, text.bytes.size()), text.bytes);
  const Segment& kmod = k->elf.loads[2];
  ASSERT_EQ(kmod.vaddr, kModuleBase);
  EXPECT_EQ(copied->loads[1].bytes.substr(0, kmod.bytes.size()), kmod.bytes);
  std::string whole = *base::ReadFile(dir.path() / "kcore/kcore");
  EXPECT_EQ(whole.find(kSecret), std::string::npos) << "direct-map memory was copied";
  for (const auto& l : copied->loads) {
    EXPECT_NE(l.vaddr, 0xffffffff82000000u) << "kernel data was copied";
    EXPECT_NE(l.vaddr, kDirectMap) << "the direct map was copied";
  }
}

// ---- the streams are genuine: libipt decodes each one exactly ---------------

TEST(Streams, LibiptDecodesEveryScopeExactly) {
  auto sc = BuildScenario(/*poke=*/false);
  ASSERT_THAT(sc, HasValue());
  for (auto scope : {trace::Scope::kUserKernel, trace::Scope::kKernel, trace::Scope::kUser}) {
    EncodeStats st;
    std::string pt = EncodePt(sc->steps, scope, &st);
    auto n = CheckWithLibipt(pt, sc->text, sc->steps, scope);
    ASSERT_THAT(n, HasValue()) << trace::ToString(scope);
    EXPECT_EQ(*n, st.traced_insns) << trace::ToString(scope);
    EXPECT_GT(*n, 50u);
  }
}

TEST(Streams, TextPokeIsNeededForAnExactDecode) {
  auto sc = BuildScenario(/*poke=*/true);
  ASSERT_THAT(sc, HasValue());
  ASSERT_NE(sc->poke, nullptr);
  EXPECT_EQ(sc->poke->old_bytes.substr(0, 1), "\xe9");  // jmp rel32 while the key is on
  std::string pt = EncodePt(sc->steps, trace::Scope::kUserKernel);
  // With the patch applied when the decode reaches it: exact.
  EXPECT_THAT(CheckWithLibipt(pt, sc->text, sc->steps, trace::Scope::kUserKernel), HasValue());
  // Against the unpatched snapshot only: libipt loses its way.
  std::vector<Step> no_poke;
  for (const Step& s : sc->steps) {
    if (s.kind != Step::kPoke) no_poke.push_back(s);
  }
  EXPECT_THAT(CheckWithLibipt(pt, sc->text, no_poke, trace::Scope::kUserKernel), Not(HasValue()));
}

// ---- decode: what a user sees -----------------------------------------------

// Case 1-3: user+kernel scope. Kernel frames nest above the user frame that
// entered the kernel (syscall, page fault, interrupt), named from the copied
// kallsyms, module symbols included, and the user stack resumes unchanged.
TEST(KernelDecode, UserAndKernelScope) {
  TempDir dir;
  auto sc = BuildScenario(false);
  ASSERT_THAT(sc, HasValue());
  Decoded d = Decode(*sc, {}, dir.path());
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  const auto& l = d.lines;
  // 1. write(): syscall -> entry -> dispatcher -> handler -> module, twice.
  int sys = ExpectNested(l, "say_hello", "entry_SYSCALL_64");
  ExpectNested(l, "entry_SYSCALL_64", "do_syscall_64", sys);
  ExpectNested(l, "do_syscall_64", "ksys_write", sys);
  ExpectNested(l, "ksys_write", "vfs_write", sys);
  ExpectNested(l, "vfs_write", "trace_vfs_write", sys);
  ExpectNested(l, "vfs_write", "kmod_write [ptsnap_kmod]", sys);
  ExpectNested(l, "kmod_write [ptsnap_kmod]", "kmod_copy_from_user [ptsnap_kmod]", sys);
  ExpectNested(l, "vfs_write", "account_write", sys);
  // sysret: back in say_hello, which then calls check_result.
  int chk = ExpectNested(l, "say_hello", "check_result");
  EXPECT_GT(chk, IndexOf(l, "E entry_SYSCALL_64"));
  EXPECT_EQ(Count(l, "B entry_SYSCALL_64"), 2);
  EXPECT_EQ(Count(l, "B kmod_write [ptsnap_kmod]"), 2);
  // 2. page fault inside touch_page, iret back into touch_page.
  int pf = ExpectNested(l, "touch_page", "asm_exc_page_fault");
  ExpectNested(l, "asm_exc_page_fault", "exc_page_fault", pf);
  ExpectNested(l, "exc_page_fault", "handle_mm_fault", pf);
  // 3. the timer interrupt inside compute, into the module.
  int irq = ExpectNested(l, "compute", "asm_sysvec_apic_timer_interrupt");
  ExpectNested(l, "sysvec_apic_timer_interrupt", "kmod_timer_tick [ptsnap_kmod]", irq);
  // The user stack resumes unchanged: one main, each user function once per call.
  EXPECT_EQ(Count(l, "B main"), 1);
  EXPECT_EQ(Count(l, "B touch_page"), 1);
  EXPECT_EQ(Count(l, "B compute"), 1);
  ExpectNested(l, "main", "finish");
  for (const auto& line : l) EXPECT_THAT(line, Not(HasSubstr("[untraced]")));
  ExpectGolden(d.text, "user_kernel.events");
}

// The second `syscall` from say_hello and the second `sysret` come from
// libipt's block cache, which leaves the block's instruction class unset:
// the decoder reads the instruction itself, so the kernel nests above the
// second say_hello like the first instead of ending it (a tail call).
TEST(KernelDecode, SecondSyscallFromTheSameSiteNests) {
  TempDir dir;
  auto sc = BuildScenario(/*poke=*/false);
  ASSERT_THAT(sc, HasValue());
  Decoded d = Decode(*sc, {}, dir.path());
  std::vector<std::string> seq;
  for (const auto& line : d.lines) {
    if (line == "B say_hello" || line == "E say_hello" || line == "B entry_SYSCALL_64") {
      seq.push_back(line);
    }
  }
  EXPECT_THAT(seq, ::testing::ElementsAre("B say_hello", "B entry_SYSCALL_64", "E say_hello",
                                          "B say_hello", "B entry_SYSCALL_64", "E say_hello"))
      << d.text;
}

TEST(KernelDecode, UserAndKernelScopeFxtAndJson) {
  TempDir dir;
  auto sc = BuildScenario(false);
  ASSERT_THAT(sc, HasValue());
  Decoded fxt = Decode(*sc, {}, dir.path() / "f", "fxt");
  auto parsed = output::ParseFxt(fxt.text);
  ASSERT_THAT(parsed, HasValue());
  std::map<std::string, int> begins;
  for (const auto& e : parsed->events) {
    if (e.type == 2 || e.type == 4) begins[e.name]++;
  }
  for (const auto& n : kKernelNames) EXPECT_GE(begins[n], 1) << n;
  for (const auto& n : kUserNames) EXPECT_GE(begins[n], 1) << n;
  EXPECT_EQ(begins["entry_SYSCALL_64"], 2);
  Decoded json = Decode(*sc, {}, dir.path() / "j", "json");
  for (const auto& n : kKernelNames) EXPECT_THAT(json.text, HasSubstr("\"" + n + "\"")) << n;
}

// Case 4: kernel-only scope: TIP.PGE on each kernel entry, TIP.PGD on exit;
// user code is never decoded.
TEST(KernelDecode, KernelOnlyScope) {
  TempDir dir;
  auto sc = BuildScenario(false);
  ASSERT_THAT(sc, HasValue());
  TraceOptions o;
  o.scope = trace::Scope::kKernel;
  Decoded d = Decode(*sc, o, dir.path());
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  for (const auto& line : d.lines) {
    for (const auto& n : kUserNames) EXPECT_NE(line.substr(2), n) << "user code decoded";
  }
  for (const auto& n : kKernelNames) EXPECT_GE(Count(d.lines, "B " + n), 1) << n;
  ExpectNested(d.lines, "entry_SYSCALL_64", "ksys_write");
  // Each kernel entry starts a fresh stack (magic-trace: kernel-only
  // `tr strt` clears the stack): the frames of one entry end at its return
  // to user space (TIP.PGD), which shows as a top-level [untraced].
  std::vector<std::string> top;
  int depth = 0;
  for (const auto& line : d.lines) {
    if (line.starts_with("B ")) {
      if (depth == 0) top.push_back(line.substr(2));
      ++depth;
    } else if (line.starts_with("E ")) {
      --depth;
    }
  }
  EXPECT_THAT(top, ::testing::ElementsAre("entry_SYSCALL_64", "[untraced]", "asm_exc_page_fault",
                                          "[untraced]", "asm_sysvec_apic_timer_interrupt",
                                          "[untraced]", "entry_SYSCALL_64", "[untraced]"))
      << d.text;
  ExpectNested(d.lines, "asm_exc_page_fault", "exc_page_fault");
  ExpectGolden(d.text, "kernel_only.events");
}

// Case 5: user-only scope of the same run: the kernel becomes [syscall]
// (syscalls) and [untraced] (fault, interrupt); no kernel frame appears.
TEST(KernelDecode, UserOnlyScope) {
  TempDir dir;
  auto sc = BuildScenario(false);
  ASSERT_THAT(sc, HasValue());
  TraceOptions o;
  o.scope = trace::Scope::kUser;
  Decoded d = Decode(*sc, o, dir.path());
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  for (const auto& n : kKernelNames) EXPECT_EQ(Count(d.lines, "B " + n), 0) << n;
  EXPECT_EQ(Count(d.lines, "B [syscall]"), 3);  // two writes and the exit
  ExpectNested(d.lines, "say_hello", "[syscall]");
  ExpectNested(d.lines, "touch_page", "[untraced]");
  int irq = IndexOf(d.lines, "B compute");
  ExpectNested(d.lines, "compute", "[untraced]", irq);
  ExpectGolden(d.text, "user_only.events");
}

// A [syscall] span begins at the syscall (the TIP.PGD's own time), not when
// the kernel returns (libipt's current time has read ahead to the TSC before
// the TIP.PGE by then).
TEST(KernelDecode, SyscallSpanStartsAtTheSyscall) {
  TempDir dir;
  auto sc = BuildScenario(/*poke=*/false);
  ASSERT_THAT(sc, HasValue());
  uint64_t syscall_time = 0;  // ground truth: when the first syscall ran
  for (const Step& s : sc->steps) {
    if (s.kind == Step::kInsn && s.cls == InsnClass::kFarCall) {
      syscall_time = s.time;
      break;
    }
  }
  TraceOptions o;
  o.scope = trace::Scope::kUser;
  Decoded d = Decode(*sc, o, dir.path());
  uint64_t begin = 0;
  for (auto line : base::Split(d.text, '\n')) {
    if (line.find(" B [syscall]") == std::string_view::npos) continue;
    begin = *base::ParseUint(base::SplitWhitespace(line)[0]);
    break;
  }
  ASSERT_NE(begin, 0u) << d.text;
  // Within a few instructions of the syscall, well before the ~50
  // instructions the kernel ran.
  EXPECT_LE(begin, syscall_time + 50) << d.text;
}

// A page fault or interrupt (FUP + TIP: an asynchronous branch) happens at
// its own time, which the trace gives exactly (the TSC before the FUP): the
// handler's frame begins then, not spread over the calls that shared the
// previous timestamp (#7).
TEST(KernelDecode, AsyncEntryBeginsAtTheEventTime) {
  TempDir dir;
  auto sc = BuildScenario(/*poke=*/false);
  ASSERT_THAT(sc, HasValue());
  std::map<std::string, uint64_t> truth;  // ground truth: when each async entry happened
  for (const Step& s : sc->steps) {
    if (s.kind == Step::kAsync) truth.emplace(s.what, s.time);
  }
  ASSERT_EQ(truth.size(), 2u);
  Decoded d = Decode(*sc, {}, dir.path());
  std::map<std::string, uint64_t> begin;
  for (const auto& e : ::ptsnap::testing::ParseEvents(d.text)) {
    if (e.kind == 'B' &&
        (e.name == "asm_exc_page_fault" || e.name == "asm_sysvec_apic_timer_interrupt")) {
      begin.emplace(e.name, e.ts);
    }
  }
  EXPECT_EQ(begin["asm_exc_page_fault"], truth["page fault"]) << d.text;
  EXPECT_EQ(begin["asm_sysvec_apic_timer_interrupt"], truth["interrupt"]) << d.text;
}

// The same run recorded system-wide: one per-CPU stream, the thread named
// by ITRACE_START on that CPU. Every slice lands on kuser's thread with the
// same times as the per-thread recording, in every scope.
TEST(KernelDecode, PerCpuStreamDecodesLikeThePerThreadOne) {
  auto sc = BuildScenario(/*poke=*/false);
  ASSERT_THAT(sc, HasValue());
  auto events = [](const std::string& text) {
    std::vector<std::string> out;
    for (auto line : base::Split(text, '\n')) {
      if (!line.empty() && line[0] >= '0' && line[0] <= '9') out.emplace_back(line);
    }
    return out;
  };
  for (auto scope : {trace::Scope::kUserKernel, trace::Scope::kKernel, trace::Scope::kUser}) {
    TempDir dir;
    TraceOptions o;
    o.scope = scope;
    Decoded per_thread = Decode(*sc, o, dir.path() / "t");
    o.per_cpu = 2;
    Decoded per_cpu = Decode(*sc, o, dir.path() / "c");
    EXPECT_EQ(per_cpu.report.decode.errors, 0u) << per_cpu.text;
    EXPECT_FALSE(events(per_thread.text).empty());
    EXPECT_EQ(events(per_cpu.text), events(per_thread.text)) << per_cpu.text;
    EXPECT_THAT(per_cpu.text, HasSubstr("T 4242 4242 kuser\n"));
  }
}

// Case 6 with the TEXT_POKE record: the poke is applied at its time, so
// the first write runs trace_vfs_write (static key on) and the second, after
// the poke, jumps past it; the whole trace decodes without errors.
TEST(KernelDecode, TextPokeIsAppliedAtItsTime) {
  TempDir dir;
  auto sc = BuildScenario(/*poke=*/true);
  ASSERT_THAT(sc, HasValue());
  Decoded d = Decode(*sc, {}, dir.path());
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  for (const auto& line : d.lines) EXPECT_THAT(line, Not(HasSubstr("[decode error"))) << d.text;
  EXPECT_EQ(Count(d.lines, "B trace_vfs_write"), 1) << d.text;
  EXPECT_EQ(Count(d.lines, "B kmod_write [ptsnap_kmod]"), 2) << d.text;
  ExpectGolden(d.text, "text_poke.events");
}

// Case 6, without the TEXT_POKE record: the decoder follows the stale jump
// in the snapshot, loses its way, and says so with a decode-error marker,
// then resynchronises at the next PSB; no crash, no error exit.
TEST(KernelDecode, TextPokeMissingGivesADecodeErrorMarker) {
  TempDir dir;
  auto sc = BuildScenario(/*poke=*/true);
  ASSERT_THAT(sc, HasValue());
  TraceOptions o;
  o.text_poke_record = false;
  Decoded d = Decode(*sc, o, dir.path());
  EXPECT_GE(d.report.decode.errors, 1u);
  int err = -1;
  for (int i = 0; i < static_cast<int>(d.lines.size()); ++i) {
    if (d.lines[i].starts_with("I [decode error:")) {
      err = i;
      break;
    }
  }
  ASSERT_GE(err, 0) << d.text;
  // The error is in the second write, after the first one decoded fine.
  EXPECT_GT(err, IndexOf(d.lines, "B kmod_write [ptsnap_kmod]"));
  // Decoding resumes at the PSB before `finish`.
  EXPECT_GT(IndexOf(d.lines, "B finish", err), err);
  ExpectGolden(d.text, "text_poke_missing.events");
}

// The same trace through the command line: `ptsnap decode` exits 0 and
// writes what the pipeline wrote.
TEST(KernelDecode, PtsnapDecodeCommandOnAKernelTrace) {
  const char* bin = std::getenv("PTSNAP_BIN");
  ASSERT_NE(bin, nullptr) << "PTSNAP_BIN is set by meson";
  TempDir dir;
  auto sc = BuildScenario(false);
  ASSERT_THAT(sc, HasValue());
  ASSERT_THAT(WriteTrace(*sc, dir.path() / "trace", {}), HasValue());
  std::string out = (dir.path() / "cli.events").string();
  std::string cmd = std::string(bin) + " decode " + (dir.path() / "trace").string() + " -o " + out +
                    " > " + (dir.path() / "log").string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  auto log = base::ReadFile(dir.path() / "log");
  ASSERT_EQ(rc, 0) << (log ? *log : "");
  auto text = base::ReadFile(out);
  ASSERT_THAT(text, HasValue());
  auto golden = base::ReadFile(Golden("user_kernel.events"));
  ASSERT_THAT(golden, HasValue());
  EXPECT_EQ(::ptsnap::testing::WithoutBuildPaths(*text), *golden);
}

// PTSNAP_NO_KCORE / MAGIC_TRACE_PERF_NO_KCORE: no kernel image. Kernel
// addresses decode against nothing: markers, never invented kernel frames.
TEST(KernelDecode, NoKcoreGivesMarkersNotWrongFrames) {
  TempDir dir;
  auto sc = BuildScenario(false);
  ASSERT_THAT(sc, HasValue());
  TraceOptions o;
  o.kcore = false;
  o.kcore_disabled_by = "PTSNAP_NO_KCORE is set";  // as the recorder writes it
  Decoded d = Decode(*sc, o, dir.path());
  EXPECT_GE(d.report.decode.errors, 1u);
  EXPECT_GE(d.report.decode.nomap_errors, 1u);
  for (const auto& n : kKernelNames) EXPECT_EQ(Count(d.lines, "B " + n), 0) << n;
  bool marker = false;
  for (const auto& line : d.lines) marker = marker || line.starts_with("I [decode error:");
  EXPECT_TRUE(marker) << d.text;
  EXPECT_GE(Count(d.lines, "B main"), 1);  // user code still decodes
}

// ---- BPF programs named by PERF_RECORD_KSYMBOL --------------------------------

// A KSYMBOL record of a BPF program (PERF_RECORD_KSYMBOL_TYPE_BPF), as the
// kernel writes one when a program is loaded (or, `unregister`, unloaded).
trace::Record BpfKsymbol(uint64_t time, const ElfSym& range, const std::string& name,
                         bool unregister = false) {
  trace::Record r;
  r.type = PERF_RECORD_KSYMBOL;
  r.misc = PERF_RECORD_MISC_KERNEL;
  r.sample_id = {0, 0, time, 0, 0, 1};
  r.body = trace::Ksymbol{
      range.addr, static_cast<uint32_t>(range.size), PERF_RECORD_KSYMBOL_TYPE_BPF,
      static_cast<uint16_t>(unregister ? PERF_RECORD_KSYMBOL_FLAGS_UNREGISTER : 0), name};
  return r;
}

// The module's kmod_write (a stand-in for a BPF program's code, which the
// kernel's indirect call in vfs_write reaches twice), and the times its
// first instruction ran.
struct Kmod {
  ElfSym sym;
  std::vector<uint64_t> runs;
};
Kmod KmodWrite(const Scenario& sc) {
  Kmod k;
  for (const ElfSym& s : sc.kernel.elf.symbols) {
    if (s.name == "kmod_write") k.sym = s;
  }
  for (const Step& st : sc.steps) {
    if (st.kind == Step::kInsn && st.ip == k.sym.addr) k.runs.push_back(st.time);
  }
  return k;
}

// The kernel names a BPF program's addresses from its load to its unload:
// here two programs in turn over kmod_write's range (the first unloaded
// between the two writes, the second loaded then). Each run carries the
// name of the program loaded at its time, not the latest one's, and not
// kallsyms' module name; its bytes come from the kcore copy (the module
// area), so the decode has no error.
TEST(KernelDecode, KsymbolNamesBpfProgramsAtTheirTimes) {
  TempDir dir;
  auto sc = BuildScenario(false);
  ASSERT_THAT(sc, HasValue());
  const Kmod k = KmodWrite(*sc);
  ASSERT_GT(k.sym.size, 0u);
  ASSERT_EQ(k.runs.size(), 2u);
  const uint64_t swap = (k.runs[0] + k.runs[1]) / 2;
  TraceOptions o;
  o.extra_sideband = {
      BpfKsymbol(sc->steps.front().time - 50, k.sym, "bpf_prog_1111111111111111_first"),
      BpfKsymbol(swap, k.sym, "bpf_prog_1111111111111111_first", /*unregister=*/true),
      BpfKsymbol(swap + 1, k.sym, "bpf_prog_2222222222222222_second")};
  Decoded d = Decode(*sc, o, dir.path());
  EXPECT_EQ(d.report.decode.errors, 0u) << d.text;
  EXPECT_EQ(Count(d.lines, "B bpf_prog_1111111111111111_first"), 1) << d.text;
  EXPECT_EQ(Count(d.lines, "B bpf_prog_2222222222222222_second"), 1) << d.text;
  EXPECT_EQ(Count(d.lines, "B kmod_write [ptsnap_kmod]"), 0) << d.text;
  EXPECT_LT(IndexOf(d.lines, "B bpf_prog_1111111111111111_first"),
            IndexOf(d.lines, "B bpf_prog_2222222222222222_second"));
  // The code the program calls keeps its kallsyms name.
  ExpectNested(d.lines, "bpf_prog_1111111111111111_first", "kmod_copy_from_user [ptsnap_kmod]");
}

// A BPF program loaded during the recording has no bytes in the kcore copy
// (here kmod_write's range is left out of /proc/kcore, and a KSYMBOL loads
// a program over it between its two runs). The decode stops at each call
// into it with an unmapped-code error (counted, under both decoders). Where
// a KSYMBOL names the code at the error's time, the gap is a slice with the
// program's name and dso, via=gap, from the error until the first event
// after the decode picked up again (via=resume); before the load the call
// shows the marker alone.
TEST(KernelDecode, BpfProgramWithoutBytesInTheCopyIsANamedGap) {
  TempDir dir;
  auto sc = BuildScenario(false);
  ASSERT_THAT(sc, HasValue());
  const Kmod k = KmodWrite(*sc);
  ASSERT_GT(k.sym.size, 0u);
  ASSERT_EQ(k.runs.size(), 2u);
  const std::string prog = "bpf_prog_3333333333333333_late";
  TraceOptions o;
  o.extra_sideband = {BpfKsymbol((k.runs[0] + k.runs[1]) / 2, k.sym, prog)};
  o.kcore_hole = k.sym.addr;
  o.kcore_hole_size = k.sym.size;
  Decoded d = Decode(*sc, o, dir.path());
  EXPECT_EQ(d.report.decode.errors, 2u) << d.text;
  EXPECT_EQ(d.report.decode.nomap_errors, 2u) << d.text;
  std::vector<::ptsnap::testing::EventLine> ev = ::ptsnap::testing::ParseEvents(d.text);
  std::vector<size_t> errors;
  size_t gap_b = ev.size(), gap_e = ev.size();
  for (size_t i = 0; i < ev.size(); ++i) {
    if (ev[i].kind == 'I' && ev[i].name.starts_with("[decode error: no memory mapped"))
      errors.push_back(i);
    if (ev[i].name == prog && ev[i].kind == 'B') gap_b = i;
    if (ev[i].name == prog && ev[i].kind == 'E') gap_e = i;
  }
  ASSERT_EQ(errors.size(), 2u) << d.text;
  EXPECT_EQ(Count(d.lines, "B " + prog), 1) << d.text;
  EXPECT_EQ(Count(d.lines, "E " + prog), 1) << d.text;
  ASSERT_LT(gap_e, ev.size()) << d.text;
  // The second call's marker, the open frames' ends, then the gap: at the
  // error's time, just before the program's run, ending after it where
  // decoding resumed.
  EXPECT_GT(gap_b, errors[1]) << d.text;
  for (size_t i = errors[1] + 1; i < gap_b && gap_b < ev.size(); ++i) {
    EXPECT_TRUE(ev[i].kind == 'E' || ev[i].inferred) << ev[i].line;
  }
  EXPECT_EQ(ev[gap_b].dso, "[bpf]");
  EXPECT_EQ(ev[gap_b].via, "gap");
  EXPECT_EQ(ev[gap_e].via, "resume");
  EXPECT_EQ(ev[gap_b].ts, ev[errors[1]].ts);
  EXPECT_LE(ev[gap_b].ts, k.runs[1]);
  EXPECT_GT(ev[gap_b].ts, k.runs[0]);
  EXPECT_GT(ev[gap_e].ts, k.runs[1]);
  // Nothing else is open over the gap: it is the thread's only frame.
  for (size_t i = gap_b + 1; i < gap_e; ++i) ADD_FAILURE() << "inside the gap: " << ev[i].line;
  // The summary counts the gap's time under the program's name.
  EXPECT_TRUE(std::ranges::any_of(d.report.top_self, [&](const output::FunctionTime& f) {
    return f.name == prog && f.self_ns == ev[gap_e].ts - ev[gap_b].ts;
  })) << d.text;
  // What the first call reached was not the program yet: the marker alone.
  EXPECT_LT(errors[0], gap_b);
  EXPECT_THAT(ev[errors[0]].name, HasSubstr("no memory mapped at this address at 0x"));
}

}  // namespace
}  // namespace ptsnap::kworld
