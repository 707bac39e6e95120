// ptsnap command line. Only this module knows CLI11.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <exception>

#include "base/log.h"

int main(int argc, char** argv) {
  CLI::App app{"ptsnap: Intel Processor Trace snapshots, decoded into call timelines"};
  app.require_subcommand(1);
  int verbosity = 0;
  app.add_flag("-v,--verbose", verbosity, "More output; repeat for more (-vv)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  ptsnap::base::SetVerbosity(verbosity);
  return 0;
}
