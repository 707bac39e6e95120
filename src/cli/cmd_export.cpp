// `ptsnap export TRACE_DIR -o FILE [--force]`: writes the recording as
// perf.data for perf script, perf report and hotspot (docs/perf-interop.md).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "cli/command.h"
#include "export/exporter.h"

namespace ptsnap::cli {

void AddExportCommand(CLI::App& app, CommandFn* selected) {
  struct Args {
    std::string dir, output = "perf.data";
    bool force = false;
  };
  auto args = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "export", "Write a trace directory as perf.data (perf script, perf report, hotspot)");
  cmd->add_option("TRACE_DIR", args->dir, "The trace directory written by run/attach")->required();
  cmd->add_option("-o,--output", args->output,
                  "perf.data file to write (a directory, perf's format, for kernel recordings)")
      ->capture_default_str();
  cmd->add_flag("-f,--force", args->force, "Overwrite the output if it exists");
  cmd->callback([args, selected] {
    *selected = [args] {
      exporter::ExportOptions options;
      options.force = args->force;
      auto report = exporter::ExportTrace(args->dir, args->output, options);
      if (!report) {
        std::fprintf(stderr, "ptsnap: error: exporting %s: %s\n", args->dir.c_str(),
                     report.error().ToString().c_str());
        return kExitFailure;
      }
      if (report->sampled) {
        // A sampled trace: perf report reads it directly.
        std::printf("wrote %s: %llu samples, %llu sideband records, %llu build-ids, %llu bytes\n",
                    args->output.c_str(), static_cast<unsigned long long>(report->samples),
                    static_cast<unsigned long long>(report->sideband_records),
                    static_cast<unsigned long long>(report->build_ids),
                    static_cast<unsigned long long>(report->bytes));
        if (report->torn_bytes != 0) {
          std::printf("note: %llu bytes of cut-short sample records left out\n",
                      static_cast<unsigned long long>(report->torn_bytes));
        }
        std::printf("view it with: perf report -i %s --stdio --no-children\n",
                    args->output.c_str());
        return kExitOk;
      }
      std::printf(
          "wrote %s%s: %llu AUXTRACE buffers, %llu sideband records, %llu build-ids, %llu "
          "bytes\n",
          args->output.c_str(), report->directory ? " (perf directory with kcore_dir)" : "",
          static_cast<unsigned long long>(report->auxtrace_records),
          static_cast<unsigned long long>(report->sideband_records),
          static_cast<unsigned long long>(report->build_ids),
          static_cast<unsigned long long>(report->bytes));
      for (const std::string& w : report->warnings)
        std::fprintf(stderr, "ptsnap: warning: %s\n", w.c_str());
      if (report->jit_files != 0) {
        std::printf("JIT code: %llu ELF files in %s, mapped %llu times\n",
                    static_cast<unsigned long long>(report->jit_files), report->jit_dir.c_str(),
                    static_cast<unsigned long long>(report->jit_maps));
      }
      if (report->tsc_shift != 0) {
        // perf reads a TSC of 0 as "no time": the whole timeline moved.
        std::printf(
            "note: every time is %llu ns later than in the recording (a stream's TSC "
            "started at 0, which perf cannot decode)\n",
            static_cast<unsigned long long>(report->time_shift_ns));
      }
      std::printf("view it with: perf script -i %s --itrace=cr\n", args->output.c_str());
      return kExitOk;
    };
  });
}

}  // namespace ptsnap::cli
