// ptsnap command line. Only this module knows CLI11.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>
#include <new>
#include <string>

#include "base/log.h"
#include "base/version.h"
#include "cli/command.h"
#include "record/child.h"

namespace ptsnap::cli {
// One line per subcommand; each is defined in its cmd_*.cpp.
void AddRecordCommands(CLI::App& app, CommandFn* selected);  // run, attach
void RewriteMagicTraceSpellings(int argc, char** argv);      // -trigger -> --trigger, ...
}  // namespace ptsnap::cli

namespace {

int Main(int argc, char** argv) {
  using namespace ptsnap::cli;
  CLI::App app{
      "ptsnap: records Intel Processor Trace with perf_event_open, snapshots the moments\n"
      "that matter, and decodes them into a timeline of every function call."};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("ptsnap ") + ptsnap::base::kVersion);
  int verbosity = 0;
  app.add_flag("-v,--verbose", verbosity, "More output; repeat for more (-vv)");

  CommandFn selected;
  // Subcommands register here.
  AddRecordCommands(app, &selected);
  AddInfoCommand(app, &selected);
  AddProbeCommand(app, &selected);
  AddDecodeCommand(app, &selected);
  AddExportCommand(app, &selected);
  AddReportCommand(app, &selected);
  AddReplayCommand(app, &selected);
  AddServeCommand(app, &selected);

  RewriteMagicTraceSpellings(argc, argv);
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every other parse error is a usage error.
    const int rc = app.exit(e);
    // `ptsnap run ls -l`: CLI11 says only "The following argument was not
    // expected: -l". The program's own options need the `--` before it.
    if (dynamic_cast<const CLI::ExtrasError*>(&e) != nullptr && app.got_subcommand("run"))
      std::fprintf(stderr,
                   "The program's own options go after --: ptsnap run [options] -- CMD ARGS...\n");
    return rc == 0 ? kExitOk : kExitUsage;
  }
  ptsnap::base::SetVerbosity(verbosity);
  ptsnap::record::RaiseFdLimit();  // 1,000+ traced threads need more than 1024 fds
  return selected ? selected() : kExitUsage;
}

}  // namespace

// The one place exceptions are caught (docs/architecture.md, "Errors").
int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::bad_alloc&) {
    std::fputs("ptsnap: error: out of memory\n", stderr);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ptsnap: error: %s\n", e.what());
  } catch (...) {
    std::fputs("ptsnap: error: unknown exception\n", stderr);
  }
  return ptsnap::cli::kExitFailure;
}
