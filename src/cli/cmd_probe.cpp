// `ptsnap probe [--json] [--root DIR]`: what this machine can record.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "cli/command.h"
#include "probe/probe.h"
#include "probe/render.h"

namespace ptsnap::cli {

namespace {

struct ProbeArgs {
  bool json = false;
  std::string root;
};

int RunProbeCommand(const ProbeArgs& args) {
  probe::ProbeEnv env = probe::LiveEnv();
  if (!args.root.empty()) {
    auto root_env = probe::RootEnv(args.root);
    if (!root_env) {
      std::fprintf(stderr, "ptsnap: error: %s\n", root_env.error().ToString().c_str());
      return kExitFailure;
    }
    env = std::move(*root_env);
  }
  probe::ProbeReport report = probe::RunProbe(env);
  std::string out = args.json ? probe::RenderJson(report) : probe::RenderTable(report);
  std::fwrite(out.data(), 1, out.size(), stdout);
  std::fflush(stdout);
  return report.pt_available ? kExitOk : kExitProbeNoPt;
}

}  // namespace

void AddProbeCommand(CLI::App& app, CommandFn* selected) {
  auto args = std::make_shared<ProbeArgs>();
  CLI::App* cmd = app.add_subcommand(
      "probe",
      "Check whether this machine can record Intel PT, in which scopes, with kernel images; "
      "exit 0 if it can, 3 if not");
  cmd->add_flag("--json", args->json, "Print JSON (schema in docs/probe.md) instead of a table");
  cmd->add_option("--root", args->root,
                  "Read sys/ and proc/ from this captured tree instead of the live system "
                  "(no CPUID or live perf_event_open checks)");
  cmd->callback([selected, args] { *selected = [args] { return RunProbeCommand(*args); }; });
}

}  // namespace ptsnap::cli
