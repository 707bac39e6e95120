// `ptsnap serve FILE [--port N] [--count N]`: hands a decoded trace to
// ui.perfetto.dev from 127.0.0.1, as Perfetto's tools/open_trace_in_ui
// does (serve/trace_server.h), and ServeFile, which `decode --open` calls.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>

#include "cli/command.h"
#include "serve/trace_server.h"

namespace ptsnap::cli {

namespace {

std::atomic<bool> g_interrupted{false};

void OnInterrupt(int) { g_interrupted = true; }

}  // namespace

int ServeFile(const std::filesystem::path& file, uint16_t port, size_t count, std::FILE* out) {
  std::error_code ec;
  if (std::filesystem::is_regular_file(file / "manifest.json", ec)) {
    std::fprintf(stderr,
                 "ptsnap: error: serving %s: it is a trace directory (the raw recording), not a "
                 "decoded trace: decode it first, e.g. `ptsnap decode %s --open` decodes and "
                 "serves it\n",
                 file.c_str(), file.c_str());
    return kExitFailure;
  }
  auto server = serve::TraceServer::Open(file, {.port = port, .count = count});
  if (!server) {
    std::fprintf(stderr, "ptsnap: error: serving %s: %s\n", file.c_str(),
                 server.error().ToString().c_str());
    return kExitFailure;
  }
  std::fprintf(out, "Serving %s at %s\nOpen it in Perfetto: %s\n", file.c_str(),
               server->Url().c_str(), server->UiLink().c_str());
  if (server->port() != serve::kPerfettoPort)
    std::fprintf(out,
                 "note: ui.perfetto.dev fetches traces from port %u only; on port %u, fetch the "
                 "URL with another tool or a UI you host yourself\n",
                 serve::kPerfettoPort, server->port());
  std::string until = "Serving until Ctrl-C.";
  if (count == 1) until = "Exits once the trace has been downloaded (Ctrl-C stops sooner).";
  if (count > 1)
    until = "Exits once the trace has been downloaded " + std::to_string(count) +
            " times (Ctrl-C stops sooner).";
  std::fprintf(out, "%s\n", until.c_str());
  std::fflush(out);
  // SIGINT without SA_RESTART: poll() returns EINTR and Serve sees the flag.
  struct sigaction sa {
  }, old{};
  sa.sa_handler = OnInterrupt;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  auto stats = server->Serve(&g_interrupted);
  sigaction(SIGINT, &old, nullptr);
  if (!stats) {
    std::fprintf(stderr, "ptsnap: error: serving %s: %s\n", file.c_str(),
                 stats.error().ToString().c_str());
    return kExitFailure;
  }
  std::fprintf(out, "Sent %s %zu time(s) (%zu request(s)).\n", file.filename().c_str(), stats->sent,
               stats->requests);
  return g_interrupted ? kExitInterrupted : kExitOk;
}

void AddServeCommand(CLI::App& app, CommandFn* selected) {
  struct Args {
    std::string file;
    uint16_t port = serve::kPerfettoPort;
    size_t count = 1;
  };
  auto a = std::make_shared<Args>();
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a decoded trace on 127.0.0.1 and print the link that opens it in ui.perfetto.dev");
  cmd->footer(
      "The file is served at http://127.0.0.1:PORT/NAME with Access-Control-Allow-Origin: "
      "https://ui.perfetto.dev, as Perfetto's tools/open_trace_in_ui does; open the printed "
      "https://ui.perfetto.dev/#!/?url=... link in a browser on this machine (over SSH: forward "
      "the port first, ssh -L 9001:127.0.0.1:9001 HOST).\n"
      "Examples:\n"
      "  ptsnap serve trace.fxt.gz                 until the UI has downloaded it once\n"
      "  ptsnap serve trace.fxt.gz --count 0       until Ctrl-C");
  cmd->add_option("FILE", a->file, "The trace file (.fxt, .fxt.gz, .json, ...)")->required();
  cmd->add_option("--port", a->port, "Port on 127.0.0.1 (ui.perfetto.dev fetches from 9001 only)")
      ->capture_default_str();
  cmd->add_option("--count", a->count,
                  "Exit after the file has been downloaded this many times; 0: serve until "
                  "Ctrl-C")
      ->capture_default_str();
  cmd->callback(
      [a, selected] { *selected = [a] { return ServeFile(a->file, a->port, a->count, stdout); }; });
}

}  // namespace ptsnap::cli
