// The emulated PT source's driver: runs `qemu-x86_64 -plugin
// libptsnap_qemu.so,... CMD`, forwards Ctrl-C, waits, and turns what the
// plugin left in a work directory (events.<pid>, pt-*.pt) into a trace
// directory (docs/trace-format.md) with source "emulated".
#include "emulate/emulate.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <span>

#include "base/file_util.h"
#include "base/log.h"
#include "base/string_util.h"
#include "base/unique_fd.h"
#include "base/version.h"
#include "elf/elf_file.h"
#include "elf/segments.h"
#include "elf/symbol_file.h"
#include "emulate/events.h"
#include "emulate/exec_follow.h"
#include "emulate/ingest.h"
#include "emulate/plugin_protocol.h"
#include "emulate/virtual_cpu.h"
#include "record/addr_filter.h"
#include "record/elf_symbols.h"
#include "record/linked_libraries.h"
#include "record/recorder.h"
#include "sys/pmu.h"
#include "trace/trace_dir.h"

#ifndef PTSNAP_QEMU_PLUGIN_BUILD_PATH
#define PTSNAP_QEMU_PLUGIN_BUILD_PATH ""
#endif
#ifndef PTSNAP_BUILD_ROOT
#define PTSNAP_BUILD_ROOT ""
#endif
#ifndef PTSNAP_PLUGIN_FROM_BINDIR
#define PTSNAP_PLUGIN_FROM_BINDIR "../lib/ptsnap"
#endif

namespace ptsnap::emulate {

namespace fs = std::filesystem;

namespace {

constexpr const char* kPluginName = "libptsnap_qemu.so";

std::optional<fs::path> SearchPath(const std::string& name) {
  const char* path = std::getenv("PATH");
  return base::FindInPath(path != nullptr ? path : "/usr/local/bin:/usr/bin:/bin", name);
}

// QEMU's version from `qemu-x86_64 --version` ("qemu-x86_64 version 7.2.22 ...").
Result<std::string> QemuVersion(const fs::path& qemu) {
  std::string cmd = "'" + qemu.string() + "' --version 2>/dev/null";
  FILE* f = ::popen(cmd.c_str(), "r");
  if (f == nullptr) return Error::FromErrno("running " + qemu.string());
  char buf[256] = {};
  size_t n = std::fread(buf, 1, sizeof(buf) - 1, f);
  ::pclose(f);
  std::string out(buf, n);
  size_t v = out.find("version ");
  if (v == std::string::npos) return Error(qemu.string() + " --version printed no version");
  size_t end = out.find_first_of(" \n(", v + 8);
  return out.substr(v + 8, end == std::string::npos ? std::string::npos : end - v - 8);
}

// The directory of the file this code was loaded from: the ptsnap binary,
// or libptsnap.so in an agent.
fs::path SelfDir() {
  Dl_info info{};
  if (::dladdr(reinterpret_cast<void*>(&FindPlugin), &info) != 0 && info.dli_fname != nullptr) {
    std::error_code ec;
    fs::path p = fs::canonical(info.dli_fname, ec);
    if (!ec) return p.parent_path();
  }
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  return ec ? fs::path() : exe.parent_path();
}

bool IsUnder(const fs::path& p, const fs::path& dir) {
  auto rel = p.lexically_relative(dir);
  return !dir.empty() && !rel.empty() && *rel.begin() != "..";
}

}  // namespace

Result<fs::path> FindQemu() {
  if (const char* env = std::getenv("PTSNAP_QEMU"); env != nullptr && *env != '\0') {
    if (::access(env, X_OK) != 0)
      return Error(std::string("qemu-x86_64 not found at PTSNAP_QEMU=") + env +
                   ": --emulate needs QEMU user mode (tools/dev installs it; or apt-get install "
                   "qemu-user)");
    return fs::path(env);
  }
  auto p = SearchPath("qemu-x86_64");
  if (!p)
    return Error(
        "qemu-x86_64 not found in PATH: --emulate needs QEMU user mode (tools/dev installs it; "
        "or apt-get install qemu-user)");
  return *p;
}

Result<fs::path> FindPlugin() {
  if (const char* env = std::getenv("PTSNAP_QEMU_PLUGIN"); env != nullptr && *env != '\0') {
    if (::access(env, R_OK) != 0)
      return Error(std::string("the emulator plugin is missing at PTSNAP_QEMU_PLUGIN=") + env +
                   ": rebuild ptsnap (ninja -C build) or unset PTSNAP_QEMU_PLUGIN");
    return fs::path(env);
  }
  // Installed: <libdir>/ptsnap/ beside libptsnap.so, or reached from
  // <bindir> (PTSNAP_PLUGIN_FROM_BINDIR); a bundle or a copy: beside the
  // binary. The build tree's copy only for binaries in the build tree, so
  // an installed ptsnap never loads a plugin from where it was built.
  std::vector<fs::path> cands;
  fs::path self = SelfDir();
  if (!self.empty()) {
    cands.push_back(self / kPluginName);
    cands.push_back(self / "ptsnap" / kPluginName);
    cands.push_back(self / PTSNAP_PLUGIN_FROM_BINDIR / kPluginName);
    if (IsUnder(self, PTSNAP_BUILD_ROOT) && *PTSNAP_QEMU_PLUGIN_BUILD_PATH)
      cands.emplace_back(PTSNAP_QEMU_PLUGIN_BUILD_PATH);
  }
  for (const auto& c : cands)
    if (::access(c.c_str(), R_OK) == 0) return fs::weakly_canonical(c);
  std::string looked;
  for (const auto& c : cands)
    looked += (looked.empty() ? "" : ", ") + c.lexically_normal().parent_path().string();
  return Error(
      std::string("the emulator plugin ") + kPluginName + " is missing (looked in " +
      (looked.empty() ? std::string("no directory: where ptsnap runs from is unknown") : looked) +
      "): reinstall ptsnap or set PTSNAP_QEMU_PLUGIN to its path");
}

Result<uint64_t> ResolveSymbol(const fs::path& elf_path, const std::string& name) {
  PTSNAP_ASSIGN_OR_RETURN(FunctionSymbol f, ResolveFunction(elf_path, name));
  return f.addr;
}

Result<FunctionSymbol> ResolveFunction(const fs::path& elf_path, const std::string& name) {
  PTSNAP_ASSIGN_OR_RETURN(elf::Image image, elf::ReadFunctions(elf_path));
  const elf::Function* f = elf::FindFunction(image, name);
  if (f == nullptr) return Error("symbol '" + name + "' not found in " + elf_path.string());
  return FunctionSymbol{f->value, f->size};
}

namespace {

Result<void> CheckElf(const fs::path& p) {
  auto head = base::ReadFileHead(p, 64);
  if (!head) return Error::FromErrno("cannot read " + p.string(), head.error().errnum());
  if (head->compare(0, 4,
                    "\x7f"
                    "ELF") != 0)
    return Error(p.string() +
                 " is neither an ELF executable nor a #! script: --emulate runs x86-64 ELF "
                 "programs and scripts whose interpreter is one");
  auto header = elf::ParseElfHeader(std::as_bytes(std::span(head->data(), head->size())));
  if (!header || header->machine != EM_X86_64)
    return Error(p.string() + " is not an x86-64 program: --emulate runs x86-64 ELF programs");
  return Ok();
}

// A sanitizer's runtime reserves terabytes of shadow memory at start-up.
// qemu-user keeps page flags for every guest page it maps, so it grows to
// the machine's memory and the kernel's OOM killer ends it (measured here:
// an ASan and a TSan build of tests/programs/cpp_names, qemu at 24 GB RSS,
// killed before main). Refused up front, with the way out.
Result<void> CheckNotSanitized(const fs::path& p) {
  auto image = elf::ReadFunctions(p);
  if (!image || image->sanitizer.empty()) return Ok();  // stripped bare: nothing to go by
  return Error(p.string() + " is built with " + image->sanitizer +
               ", whose shadow memory (terabytes reserved at start-up) the emulator cannot "
               "map: QEMU would grow until the kernel's OOM killer ends it. Rebuild it without "
               "-fsanitize to record it under --emulate, or record it on a machine with Intel PT");
}

sys::PmuInfo VirtualPmu() {
  sys::PmuInfo pmu;
  pmu.name = "intel_pt";
  pmu.present = true;
  pmu.type = kVirtualPmuType;
  // The format terms and caps of a Kaby Lake's intel_pt PMU (Linux 6.x).
  for (auto [term, bits] : {std::pair{"pt", "config:0"},
                            {"cyc", "config:1"},
                            {"mtc", "config:9"},
                            {"tsc", "config:10"},
                            {"noretcomp", "config:11"},
                            {"branch", "config:13"},
                            {"mtc_period", "config:14-17"},
                            {"cyc_thresh", "config:19-22"},
                            {"psb_period", "config:24-27"}}) {
    auto t = sys::ParseFormatTerm(bits);
    if (t) pmu.format[term] = *t;
  }
  pmu.caps = {{"psb_cyc", 1},
              {"mtc", 1},
              {"ip_filtering", 1},
              {"mtc_periods", 0x249},
              {"cycle_thresholds", 0x3fff},
              {"psb_periods", 0x3f},
              {"num_address_ranges", 2}};
  pmu.nr_addr_filters = 2;
  pmu.max_nonturbo_ratio = kNominalRatio;
  pmu.tsc_art_ratio = sys::TscArtRatio{kCpuid15Ebx, kCpuid15Eax};
  return pmu;
}

}  // namespace

Result<perf::PtAttr> EmulatedPtAttr(const record::TimerResolution& timer) {
  perf::PtAttrOptions o;
  o.timing = timer;
  return perf::BuildPtAttr(VirtualPmu(), o);
}

Result<int> RecordEmulated(const record::RecordOptions& opts, const fs::path& trace_dir) {
  PTSNAP_ASSIGN_OR_RETURN(EmulationPlan plan, PlanEmulation(opts));
  record::Control control;
  return RecordEmulated(plan, opts, trace_dir, control, nullptr);
}

namespace {

using record::Emit;

}  // namespace

namespace {

// --trigger: the stop indicators (.), an address, or the functions NAME
// names, in the program or else in a shared library it links: into the
// plugin's arguments and plan.trigger_functions. `in_program` names the
// program for messages.
Result<void> PlanTrigger(const record::RecordOptions& opts, const std::string& in_program,
                         EmulationPlan& plan) {
  const fs::path& program = plan.program;
  if (opts.trigger == ".") {
    int found = 0;
    for (const char* s : {"ptsnap_take_snapshot", "magic_trace_stop_indicator"}) {
      auto a = ResolveSymbol(program, s);
      if (a) {
        plan.plugin_args.push_back("stop=" + std::to_string(*a));
        ++found;
      }
    }
    if (found == 0)
      return Error(in_program +
                   " has no stop indicator (ptsnap_take_snapshot or magic_trace_stop_indicator "
                   "in its symbol table): call one, or drop --trigger .")
          .WithKind(ErrorKind::kTrigger);
  } else if (opts.trigger.rfind("addr:", 0) == 0) {
    char* end = nullptr;
    uint64_t a = std::strtoull(opts.trigger.c_str() + 5, &end, 16);
    if (end == opts.trigger.c_str() + 5 || *end != '\0')
      return Error("--trigger " + opts.trigger + ": expected addr:HEX (a link-time address)")
          .WithKind(ErrorKind::kTrigger);
    plan.plugin_args.push_back("trigger=" + std::to_string(a));
    plan.plugin_args.push_back("trigger_name=" + opts.trigger);
  } else if (!opts.trigger.empty()) {
    // Any spelling of elf/symbol_match.h; one plugin trigger per function
    // it names (as many as a native trigger takes, so a trigger tried here
    // works on hardware), one with --slower-than.
    auto image = elf::ReadFunctions(program);
    if (!image)
      return std::move(image)
          .error()
          .AddContext("--trigger " + opts.trigger + ": reading the symbols of " + in_program)
          .WithKind(ErrorKind::kTrigger);
    // A name the program does not define: in the libraries it links, in
    // the loader's order (linked_libraries.h), armed where each is mapped.
    // Not for --slower-than, which the plugin times in the program only.
    // The lookup and its messages are a native run's (CheckTriggerInFile).
    bool in_library = false;
    if (opts.slower_than_ns == 0) {
      auto lib = record::FindTriggerInLinkedLibraries(*image, program, opts.trigger,
                                                      record::kMaxTriggerFunctions);
      if (!lib) {
        Error e = std::move(lib).error().AddContext("--trigger " + opts.trigger);
        if (!plan.script.empty()) e = record::InScript(e, plan.script, program);
        return e.WithKind(ErrorKind::kTrigger);
      }
      if (*lib) {
        const std::string file = fs::path((*lib)->path).filename().string();
        for (const record::LibraryTrigger::Function& f : (*lib)->functions) {
          plan.trigger_functions.push_back(f.name + " @ " + file + "+" + base::Hex(f.vaddr) +
                                           " (link-time)");
          plan.plugin_args.push_back("lib_trigger=" +
                                     FormatFileOffsetArg({f.offset, (*lib)->path}));
        }
        plan.plugin_args.push_back("trigger_name=" + opts.trigger);
        in_library = true;
      }
    }
    if (!in_library) {
      auto functions = record::MatchTriggerFunctions(
          *image, opts.trigger, program.string(),
          opts.slower_than_ns != 0 ? 1 : record::kMaxTriggerFunctions);
      if (!functions)
        return std::move(functions).error().AddContext(
            "--trigger " + opts.trigger + " (emulation resolves triggers in the main program" +
            (plan.script.empty() ? std::string() : " (here the script's interpreter)") +
            (opts.slower_than_ns != 0 ? " only" : " and the shared libraries it links") + ")");
      for (const elf::Function* f : *functions)
        plan.trigger_functions.push_back(elf::Demangle(f->name) + " @ " + base::Hex(f->value) +
                                         " (link-time)");
      if (opts.slower_than_ns != 0) {
        // --slower-than: the plugin times every call of it in virtual time
        // and snapshots where a slow one returns.
        plan.plugin_args.push_back("slow=" + std::to_string(functions->front()->value));
        plan.plugin_args.push_back("slow_ns=" + std::to_string(opts.slower_than_ns));
        plan.plugin_args.push_back("slow_name=" + opts.trigger);
      } else {
        for (const elf::Function* f : *functions)
          plan.plugin_args.push_back("trigger=" + std::to_string(f->value));
        plan.plugin_args.push_back("trigger_name=" + opts.trigger);
      }
    }
  }
  return Ok();
}

}  // namespace

Result<EmulationPlan> PlanEmulation(const record::RecordOptions& opts) {
  EmulationPlan plan;
  if (opts.scope != trace::Scope::kUser) {
    const std::string flag =
        opts.scope == trace::Scope::kKernel ? "--trace-kernel-only" : "--trace-include-kernel";
    return Error("--emulate traces user space only: " + flag +
                 " is not available under emulation (drop " + flag +
                 ", or record on a machine with Intel PT)");
  }
  if (!opts.pids.empty() || opts.command.empty())
    return Error("--emulate runs a new program (ptsnap run --emulate -- CMD): it cannot attach");

  // The program.
  fs::path& program = plan.program;
  const std::string& cmd0 = opts.command[0];
  // The same lookup, and so the same messages, as a native `run`.
  PTSNAP_ASSIGN_OR_RETURN(program, record::FindExecutable(cmd0));
  if (fs::is_directory(program)) return Error("cannot run '" + cmd0 + "': it is a directory");
  plan.argv = opts.command;
  if (base::ReadFileHead(program, 2).value_or("") == "#!") {
    // A script: its interpreter runs, as execve would run it (the plugin
    // resolves the scripts the program execs the same way).
    const ExecTarget t = ResolveExec(program.string(), opts.command, ReadExecFile);
    if (t.kind != ExecTarget::Kind::kFollow)
      return Error("cannot run " + program.string() + " under the emulator: " + t.why);
    plan.script = program;
    program = t.program;
    plan.argv = t.argv;
  }
  PTSNAP_TRY(CheckElf(program));
  PTSNAP_TRY(CheckNotSanitized(program));
  // Where a symbol was looked for, for messages.
  const std::string in_program =
      program.string() +
      (plan.script.empty() ? "" : " (the interpreter of the script " + plan.script.string() + ")");

  // The trigger, before the emulator's own pieces: a typo is reported as
  // such on any machine.
  PTSNAP_TRY(PlanTrigger(opts, in_program, plan));

  // --only-in: the plugin pauses tracing outside the function as Linux
  // 6.13's AUX pause does on hardware (resumed at its entry, paused at its
  // return), so the virtual CPU needs no kernel fallback.
  if (!opts.only_in.empty()) {
    // Named as users type names (elf/symbol_match.h); one function.
    auto image = elf::ReadFunctions(program);
    elf::FunctionMatch m;
    if (image) m = elf::MatchFunctions(*image, opts.only_in, program.string());
    if (m.functions.empty()) {
      const std::string near = elf::DidYouMean(m.closest);
      return Error("--only-in " + opts.only_in + ": no such function in " + in_program +
                   "'s symbol table" + (near.empty() ? "" : "; " + near) +
                   " (emulation resolves it in the main program only; check the spelling with "
                   "`nm -C " +
                   program.string() + "`: " + std::string(elf::kSpellingsHint) + ")");
    }
    if (m.functions.size() > 1)
      return Error("--only-in '" + opts.only_in + "' names " + std::to_string(m.functions.size()) +
                   " functions of " + in_program + " (" + elf::ListFunctions(m.functions) +
                   "): --only-in follows one; name one, e.g. '" +
                   elf::Demangle(m.functions.front()->name) + "'");
    plan.plugin_args.push_back("only_in=" + std::to_string(m.functions.front()->value));
  }

  // --filter, resolved and checked as on a Kaby Lake (two ranges), then
  // mapped by the plugin wherever the files are mapped, as the kernel does.
  if (!opts.filter.empty()) {
    PTSNAP_ASSIGN_OR_RETURN(std::vector<record::ResolvedAddrFilter> filters,
                            record::ParseAndResolveAddrFilters(opts.filter, program));
    PTSNAP_TRY(record::CheckAddrFilterSupport(filters, VirtualPmu()));
    PTSNAP_ASSIGN_OR_RETURN(plan.addr_filter, record::FormatKernelAddrFilters(filters));
    for (const record::ResolvedAddrFilter& f : filters)
      plan.plugin_args.push_back(
          "filter=" +
          FormatFilterArg({.trace_stop = f.action == record::AddrFilterAction::kTraceStop,
                           .offset = f.offset,
                           .size = f.size,
                           .path = f.path}));
  }

  PTSNAP_ASSIGN_OR_RETURN(plan.qemu, FindQemu());
  PTSNAP_ASSIGN_OR_RETURN(plan.qemu_version, QemuVersion(plan.qemu));
  const std::string& version = plan.qemu_version;
  const fs::path& qemu = plan.qemu;
  if (version.rfind("7.", 0) != 0)
    return Error("unsupported QEMU " + version + " at " + qemu.string() +
                 ": --emulate needs QEMU 7.x (plugin API version 1), e.g. Debian 12's qemu-user");
  PTSNAP_ASSIGN_OR_RETURN(plan.plugin, FindPlugin());

  // Plugin arguments. Timing packets as the hardware event would be
  // configured for --timer-resolution on the virtual CPU.
  PTSNAP_ASSIGN_OR_RETURN(plan.attr, EmulatedPtAttr(opts.timer));
  const perf::PtAttr& attr = plan.attr;
  const perf::PtTimingResolved& timing = attr.timing;
  plan.snapshot_size = opts.snapshot_size ? opts.snapshot_size : uint64_t{4} << 20;
  const uint64_t snapshot_size = plan.snapshot_size;
  const uint32_t psb_raw = timing.psb_period;
  const uint64_t psb_bytes = perf::PsbPeriodBytes(true, psb_raw);  // psb_periods caps: 0-5
  // The hardware's limits and warnings, so that a size means the same with
  // and without --emulate (a 1-byte ring once kept 3.2 us, without a word).
  PTSNAP_TRY(record::CheckAuxSize(snapshot_size, opts.full_execution));
  if (!opts.full_execution)
    if (auto w = record::PsbPeriodWarning(snapshot_size, psb_bytes))
      plan.attr.warnings.push_back(*w);
  const bool noretcomp = timing.noretcomp;
  std::vector<std::string>& pargs = plan.plugin_args;
  pargs.push_back("mode=" + std::string(opts.full_execution ? "full" : "snapshot"));
  pargs.push_back("size=" + std::to_string(snapshot_size));
  pargs.push_back("psb=" + std::to_string(psb_bytes));
  pargs.push_back(std::string("retcomp=") + (noretcomp ? "0" : "1"));
  pargs.push_back(std::string("mtc=") + (timing.mtc ? "1" : "0"));
  pargs.push_back("mtc_freq=" + std::to_string(timing.mtc_period));
  pargs.push_back(std::string("cyc=") + (timing.cyc ? "1" : "0"));
  pargs.push_back("cyc_thresh=" + std::to_string(timing.cyc_thresh));
  pargs.push_back(std::string("multi=") + (opts.multi_snapshot ? "1" : "0"));
  // --emulate-waits: each syscall's wall time on its thread's clock.
  if (opts.emulate_waits) pargs.push_back("waits=1");
  if (std::getenv("PTSNAP_EMULATE_HASH") != nullptr) pargs.push_back("hash=1");
  // Each snapshot stream the whole ring, as before incremental snapshot
  // streams (docs/emulation.md, "Files"): the tests' reference.
  if (const char* whole = std::getenv("PTSNAP_EMULATE_WHOLE_RINGS");
      whole != nullptr && std::string_view(whole) == "1")
    pargs.push_back("whole=1");
  // Benchmark baseline: no JIT code capture (docs/emulation.md, "JIT code").
  if (std::getenv("PTSNAP_EMULATE_NO_JIT") != nullptr) pargs.push_back("jit=0");
  if (opts.duration) pargs.push_back("duration_ms=" + std::to_string(opts.duration->count()));
  return plan;
}

namespace {

constexpr const char* kEmulatorLine =
    " + ptsnap TCG plugin; virtual Intel family 6 model 0x9e (Kaby Lake); virtual TSC = 1 tick "
    "per retired instruction of the thread, perf clock 1 ns per tick, core at the TSC rate (CBR "
    "10), 10 MHz crystal (TSC:CTC 100:1)";

// The emulator behind record::Record's session loop: a self-driven source
// (record/pt_source.h). qemu-x86_64 runs the program with the plugin, which
// writes events.<pid> logs and stream files into the trace directory's
// emulator-work/ (plugin_protocol.h); PluginIngest moves them into the
// trace as they come. Requests go to the plugin over a pipe: 's' a
// snapshot, 'c' the end (the plugin takes the last snapshot and passes
// SIGINT on to the program).
class EmulatedSource final : public record::PtSource {
 public:
  EmulatedSource(EmulationPlan plan, bool full, const fs::path& trace_dir)
      : plan_(std::move(plan)), full_(full), work_(trace_dir / "emulator-work") {}
  ~EmulatedSource() override {
    std::error_code ec;
    if (finished_) fs::remove_all(work_, ec);
  }
  EmulatedSource(const EmulatedSource&) = delete;
  EmulatedSource& operator=(const EmulatedSource&) = delete;

  [[nodiscard]] bool self_driven() const override { return true; }
  [[nodiscard]] bool host_vdso() const override { return false; }

  // The command is the plan's (PlanEmulation resolved it, a script to its interpreter).
  Result<Launch> LaunchCommand(const std::vector<std::string>& /*command*/) override {
    int ctl[2];
    if (::pipe2(ctl, O_CLOEXEC) != 0) return Error::FromErrno("pipe");
    ctl_read_.reset(ctl[0]);
    ctl_write_.reset(ctl[1]);
    std::string arg =
        EscapePluginArg(plan_.plugin.string()) + ",out=" + EscapePluginArg(work_.string());
    for (const std::string& a : plan_.plugin_args) arg += "," + EscapePluginArg(a);
    arg += ",ctl=" + std::to_string(ctl_read_.get());
    // argv[0] as the command named it (-0), as execvp would pass it.
    ExecTarget target;
    target.program = plan_.program.string();
    target.argv = plan_.argv;
    Launch l{QemuExecCommand(plan_.qemu.string(), arg, target), {ctl_read_.get()}};
    PTSNAP_LOG(kInfo) << "emulating " << plan_.program.string() << " under " << plan_.qemu.string();
    return l;
  }

  Result<void> Begin(trace::TraceWriter& writer) override {
    ctl_read_.reset();  // the program holds it now
    std::error_code ec;
    fs::create_directories(work_, ec);
    if (ec) return Error("creating " + work_.string() + ": " + ec.message());
    ingest_.emplace(work_, writer);
    return Ok();
  }

  Result<record::SidebandEvents> DrainSideband(trace::TraceWriter& /*writer*/) override {
    if (!ingest_) return record::SidebandEvents{};
    auto added = ingest_->Poll();
    if (!added) return std::move(added).error().AddContext("reading the emulator's output");
    Take(std::move(*added));
    return NewMappings();
  }

  Result<void> RequestSnapshot(const std::string& detail) override {
    if (full_)
      return Error("--full-execution records everything: there is no ring buffer to snapshot");
    Send('s');
    ingest_->Asked(detail);
    return Ok();
  }
  void RequestStop() override { Send('c'); }
  // --after=detach: the plugin stops recording for good (it keeps no
  // callback: QEMU runs the program on at its own speed) and what it wrote
  // is read as at an exit.
  Result<void> Detach() override {
    Send('d');
    PTSNAP_ASSIGN_OR_RETURN(std::vector<trace::Snapshot> last, ingest_->Finish());
    Take(std::move(last));
    detached_ = true;
    return Ok();
  }
  std::vector<trace::Snapshot> TakenSnapshots() override { return std::exchange(taken_, {}); }

  // What the plugin wrote at the end (exit snapshots, full-execution
  // streams), and whether the program's end was the plugin's failure.
  Result<void> TargetExited(int status) override {
    PTSNAP_ASSIGN_OR_RETURN(std::vector<trace::Snapshot> last, ingest_->Finish());
    Take(std::move(last));
    if (!ingest_->saw_logs()) {
      return Error("qemu-x86_64 did not load the ptsnap plugin (exit status " +
                   std::to_string(status) + "; its message is above): check that " +
                   plan_.qemu.string() + " is QEMU 7.x with plugin support");
    }
    // The plugin stops the emulation with status 125 when it cannot write
    // (plugin.cpp, Die) and then never logs its end: ptsnap's failure, not
    // the program's status.
    if (status == 125 && !ingest_->done()) {
      const fs::path dir = work_.parent_path();
      struct statvfs fs_info {};
      const bool full =
          ::statvfs(dir.c_str(), &fs_info) == 0 &&
          static_cast<uint64_t>(fs_info.f_bavail) * fs_info.f_frsize < (uint64_t{1} << 20);
      return Error((full ? "the file system holding " + dir.string() +
                               " is full (No space left on device): the emulator stopped recording"
                         : std::string("the emulator's plugin failed (its message is above) and "
                                       "stopped the recording")) +
                   "; what it wrote is kept in " + dir.string() +
                   " and decodes: free space or choose another --trace-dir");
    }
    return Ok();
  }

  // The processes the plugin followed, and what it retired per stream.
  Result<void> Finish(trace::TraceWriter& writer) override {
    if (!ingest_ || finished_) return Ok();
    finished_ = true;
    for (const auto& n : ingest_->notes()) PTSNAP_LOG(kWarning) << "emulator: " << n;
    std::vector<int32_t>& pids = writer.manifest().pids;
    for (const trace::Record& r : ingest_->records()) {
      if (r.type != PERF_RECORD_COMM && r.type != PERF_RECORD_FORK) continue;
      auto pid = static_cast<int32_t>(r.sample_id.pid);
      if (std::find(pids.begin(), pids.end(), pid) == pids.end()) pids.push_back(pid);
    }
    // The integration tests and tools/bench-emulate compare these with a decode.
    std::string stats;
    for (const auto& st : ingest_->stream_stats())
      stats += "stream " + std::to_string(st.id) + " " + std::to_string(st.tid) + " " +
               std::to_string(st.insns) + " " + std::to_string(st.hash) + "\n";
    if (auto r = base::WriteFileAtomic(writer.dir() / "emulator-stats.txt", stats, 0600); !r)
      PTSNAP_LOG(kWarning) << "emulator statistics not kept: " << r.error().ToString();
    return Ok();
  }
  [[nodiscard]] bool complete() const override { return detached_ || (ingest_ && ingest_->done()); }
  [[nodiscard]] std::string incomplete_reason() const override {
    if (!ingest_ || complete()) return {};
    const std::vector<std::string> pids = ingest_->Unfinished();
    if (pids.empty()) return {};
    return "the emulator did not finish in process" + std::string(pids.size() > 1 ? "es " : " ") +
           base::Join(pids, ", ") +
           " (killed by SIGKILL, which nothing can catch, or still running when the recording "
           "ended): the last stretch of each is not in the trace";
  }

  // The plugin follows threads, triggers and the clock itself.
  Result<void> AddThread(pid_t /*pid*/, pid_t /*tid*/, bool /*trace_pt*/) override { return Ok(); }
  Result<void> AddCpu(int /*cpu*/) override {
    return Error("--emulate traces one program: -a/--cpu (system-wide) needs hardware Intel PT");
  }
  Result<void> ArmTriggers(const std::vector<record::TriggerPoint>& /*points*/) override {
    return Ok();
  }
  Result<void> EnableAll() override { return Ok(); }
  Result<void> DrainAux(trace::TraceWriter& /*writer*/) override { return Ok(); }
  Result<std::vector<record::TriggerHit>> PollTriggers() override {
    return std::vector<record::TriggerHit>{};
  }
  Result<void> Snapshot(trace::TraceWriter& /*writer*/, uint32_t /*seq*/,
                        bool /*resume*/) override {
    return Error("the emulator takes its snapshots itself");
  }
  [[nodiscard]] uint64_t Now() const override { return 0; }  // virtual time is per thread
  [[nodiscard]] size_t traced_threads() const override { return 1; }
  [[nodiscard]] bool HasThread(pid_t /*tid*/) const override { return true; }
  [[nodiscard]] std::optional<trace::TimeConv> time_conv() const override {
    // Virtual clock: TSC ticks = retired instructions; perf ns = TSC ticks.
    return trace::TimeConv{0, 1, 0, true};
  }

 private:
  // QEMU may be gone (killed by the same Ctrl-C): no SIGPIPE for us then.
  void Send(char c) { (void)base::WriteToPipe(ctl_write_.get(), &c, 1); }
  void Take(std::vector<trace::Snapshot> added) {
    for (trace::Snapshot& s : added) taken_.push_back(std::move(s));
  }
  // The files mapped since the last call, from the plugin's MMAP2 records.
  record::SidebandEvents NewMappings() {
    record::SidebandEvents ev;
    const std::vector<trace::Record>& records = ingest_->records();
    for (; records_seen_ < records.size(); ++records_seen_) {
      const trace::Record& r = records[records_seen_];
      ++ev.records;
      if (r.type == PERF_RECORD_MMAP2)
        ev.mapped_files.push_back(std::get<trace::Mmap2>(r.body).filename);
    }
    return ev;
  }

  EmulationPlan plan_;
  bool full_;
  fs::path work_;
  base::UniqueFd ctl_read_, ctl_write_;
  std::optional<PluginIngest> ingest_;
  std::vector<trace::Snapshot> taken_;
  size_t records_seen_ = 0;
  bool finished_ = false;
  bool detached_ = false;
};

}  // namespace

record::Prepared PrepareEmulated(const EmulationPlan& plan, const record::RecordOptions& opts) {
  record::Prepared p;
  const perf::PtTimingResolved& timing = plan.attr.timing;
  p.pt.pmu_type = plan.attr.attr.type;
  p.pt.config = plan.attr.attr.config;
  p.pt.tsc = timing.tsc;
  p.pt.mtc = timing.mtc;
  p.pt.mtc_freq = timing.mtc_period;
  p.pt.cyc = timing.cyc;
  p.pt.nom_freq = kNominalRatio;
  p.pt.noretcomp = timing.noretcomp;
  p.pt.psb_period = timing.psb_period;
  p.pt.filter = plan.addr_filter;
  p.scope = trace::Scope::kUser;
  p.mode = opts.full_execution ? trace::Mode::kFull : trace::Mode::kSnapshot;
  p.aux_bytes = opts.full_execution ? 0 : plan.snapshot_size;
  p.warnings = plan.attr.warnings;
  p.cpu.available = true;
  p.cpu.vendor = "GenuineIntel";
  p.cpu.family = kCpuFamily;
  p.cpu.model = kCpuModel;
  p.cpu.stepping = kCpuStepping;
  p.cpu.leaf15 = sys::CpuidRegs{.eax = kCpuid15Eax, .ebx = kCpuid15Ebx};
  p.emulator = "qemu-x86_64 " + plan.qemu_version + kEmulatorLine;
  p.virtual_clock = opts.emulate_waits ? trace::VirtualClock::kInstructionsAndWaits
                                       : trace::VirtualClock::kInstructions;
  return p;
}

record::SourceFactory EmulatedSourceFactory(const EmulationPlan& plan,
                                            const record::RecordOptions& opts,
                                            const fs::path& trace_dir) {
  return [plan, full = opts.full_execution,
          trace_dir](const record::HardwareConfig&) -> Result<std::unique_ptr<record::PtSource>> {
    return std::unique_ptr<record::PtSource>(
        std::make_unique<EmulatedSource>(plan, full, trace_dir));
  };
}

Result<int> RecordEmulated(const EmulationPlan& plan, const record::RecordOptions& opts,
                           const fs::path& trace_dir, record::Control& control,
                           const record::EventFn& events) {
  for (const auto& w : plan.attr.warnings) Emit(events, {record::Event::Kind::kWarning, w});
  for (const std::string& t : plan.trigger_functions)
    Emit(events, {record::Event::Kind::kInfo, "Trigger armed: " + t});
  auto out = record::Record(opts, PrepareEmulated(plan, opts), trace_dir, base::RootPath(), control,
                            events, EmulatedSourceFactory(plan, opts, trace_dir));
  control.Close("the recording ended");  // later requests fail at once
  if (!out) return std::move(out).error();
  return out->program_status;
}

}  // namespace ptsnap::emulate
