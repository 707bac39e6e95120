#include "record/only_in.h"

#include <filesystem>
#include <vector>

#include "elf/elf_file.h"
#include "elf/symbol_file.h"
#include "elf/symbol_match.h"
#include "perf/attr.h"
#include "record/addr_filter.h"
#include "record/elf_symbols.h"

namespace ptsnap::record {

namespace fs = std::filesystem;

namespace {

// The file --only-in's function is looked up in.
Result<fs::path> OnlyInProgram(const RecordOptions& opts) {
  if (!opts.command.empty()) return FindExecutable(opts.command[0]);
  if (opts.pids.empty()) return Error("--only-in needs a program: a command or -p PID");
  std::error_code ec;
  const std::string exe = "/proc/" + std::to_string(opts.pids[0]) + "/exe";
  fs::path program = fs::read_symlink(exe, ec);
  if (ec) return Error::FromErrno("--only-in: reading " + exe, ec.value());
  return program;
}

std::string KernelName(const std::optional<sys::KernelVersion>& kernel) {
  if (!kernel) return "this kernel (release unknown)";
  return "this kernel (" + std::to_string(kernel->major) + "." + std::to_string(kernel->minor) +
         ")";
}

}  // namespace

Result<fs::path> FindOnlyInFunction(const RecordOptions& opts) {
  const std::string& func = opts.only_in;
  PTSNAP_ASSIGN_OR_RETURN(fs::path program, OnlyInProgram(opts));
  auto image = elf::ReadFunctions(program);
  // Named as users type names (elf/symbol_match.h); one function.
  elf::FunctionMatch m;
  if (image) m = elf::MatchFunctions(*image, func, program.string());
  if (m.functions.empty()) {
    const std::string near = elf::DidYouMean(m.closest);
    return Error("--only-in: no function named '" + func + "' in " + program.string() +
                 (near.empty() ? "" : "; " + near) + " (check the spelling with `nm -C " +
                 program.string() + "`: " + std::string(elf::kSpellingsHint) +
                 "; --only-in looks in the program's own executable)")
        .WithKind(ErrorKind::kTrigger);
  }
  if (m.functions.size() > 1)
    return Error("--only-in '" + func + "' names " + std::to_string(m.functions.size()) +
                 " functions of " + program.string() + " (" + elf::ListFunctions(m.functions) +
                 "): --only-in follows one; name one, e.g. '" +
                 elf::Demangle(m.functions.front()->name) + "'")
        .WithKind(ErrorKind::kTrigger);
  return program;
}

Result<OnlyInPlan> PlanOnlyIn(const RecordOptions& opts, const base::RootPath& root,
                              const std::optional<sys::KernelVersion>& kernel,
                              const sys::PmuInfo& intel_pt, bool system_wide) {
  OnlyInPlan plan;
  const std::string& func = opts.only_in;
  if (func.empty()) return plan;
  PTSNAP_ASSIGN_OR_RETURN(fs::path program, FindOnlyInFunction(opts));
  AddrFilter f;
  f.symbol = func;
  // Its file offset (and size, for the fallback) as --filter resolves it.
  auto resolved = ResolveAddrFilters(std::vector<AddrFilter>{f}, program);
  if (!resolved) return std::move(resolved).error().AddContext("--only-in " + func);
  const ResolvedAddrFilter& r = resolved->front();

  if (perf::HasAuxPause(kernel)) {
    const sys::PmuInfo uprobe = sys::ReadPmu(root, "uprobe");
    AuxActionProbes p;
    p.symbol = func;
    p.path = r.path;
    p.offset = r.offset;
    PTSNAP_ASSIGN_OR_RETURN(p.resume,
                            perf::BuildAuxActionUprobeAttr(uprobe, nullptr, r.offset, false));
    PTSNAP_ASSIGN_OR_RETURN(p.pause,
                            perf::BuildAuxActionUprobeAttr(uprobe, nullptr, r.offset, true));
    plan.probes = std::move(p);
    return plan;
  }
  // No AUX pause: tracing only inside FUNC's own code, with an address
  // filter (kernel 4.7+), as --filter FUNC would.
  const std::string why = KernelName(kernel) + " has no AUX pause/resume (Linux 6.13+)";
  if (system_wide)
    return Error("--only-in " + func + ": " + why +
                 " and its fallback, an address filter on the function, needs per-thread tracing "
                 "(the kernel takes file filters only for events bound to a task): drop -a/--cpu, "
                 "or record on Linux 6.13 or later");
  if (intel_pt.Cap("ip_filtering") == 0)
    return Error("--only-in " + func + ": " + why +
                 " and this CPU's Intel PT has no IP filtering for the fallback "
                 "(caps/ip_filtering is 0 or missing): drop --only-in, record on Linux 6.13 or "
                 "later, or record with --emulate");
  plan.fallback_filter = "filter " + func;
  plan.note = "--only-in " + func + ": " + why + ": tracing only " + func +
              "'s own code instead (as --filter " + func +
              ": the functions it calls are not traced)";
  return plan;
}

}  // namespace ptsnap::record
