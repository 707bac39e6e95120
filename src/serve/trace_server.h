// A one-file HTTP server on 127.0.0.1 that hands a trace to
// ui.perfetto.dev, as Perfetto's tools/open_trace_in_ui does: the file at
// /NAME on port 9001 (the only port the UI's content security policy lets
// it fetch from), with `Access-Control-Allow-Origin: https://ui.perfetto.dev`
// and `Cache-Control: no-cache`, opened by the link
// https://ui.perfetto.dev/#!/?url=http://127.0.0.1:9001/NAME.
// (`ptsnap serve`, `ptsnap decode --open`; docs/decoding.md.)
//
// Plain POSIX sockets, one connection at a time, one request per
// connection (Connection: close). GET and HEAD of /NAME send the file;
// OPTIONS (a CORS or private-network preflight) gets 204 with the allow
// headers; any other path 404, any other method 405. Requests are parsed
// by the pure ParseRequest.
#pragma once

#include <atomic>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "base/unique_fd.h"
#include "ptsnap/result.h"

namespace ptsnap::serve {

inline constexpr uint16_t kPerfettoPort = 9001;
inline constexpr std::string_view kPerfettoOrigin = "https://ui.perfetto.dev";

struct Request {
  std::string method;  // "GET", ...
  std::string path;    // percent-decoded, without the query
};

// The request line of an HTTP/1.x request head ("GET /a%20b?x HTTP/1.1\r\n
// ..."). Errors: not a request line.
Result<Request> ParseRequest(std::string_view head);

// "a b.fxt" -> "a%20b.fxt": every byte but RFC 3986 unreserved ones.
std::string PercentEncode(std::string_view s);

struct ServeOptions {
  uint16_t port = kPerfettoPort;  // 0: any free port (tests)
  std::string origin = std::string(kPerfettoOrigin);
  // Return after the file has been sent whole this many times; 0: never
  // (until `stop`).
  size_t count = 1;
};

struct ServeStats {
  size_t requests = 0;  // every request answered
  size_t sent = 0;      // complete GETs of the file
};

class TraceServer {
 public:
  // Checks the file (a readable regular file) and binds 127.0.0.1:port.
  // Errors: "FILE: No such file or directory" (or "is not a regular
  // file"); the port in use or refused, naming the port and --port.
  static Result<TraceServer> Open(const std::filesystem::path& file, ServeOptions options);

  [[nodiscard]] uint16_t port() const { return port_; }
  // http://127.0.0.1:PORT/NAME
  [[nodiscard]] std::string Url() const;
  // ORIGIN/#!/?url=URL: opens the trace in the UI.
  [[nodiscard]] std::string UiLink() const;

  // Answers requests until the file has been sent `count` times, or `stop`
  // (polled about every 100 ms) turns true. Blocks. A client that stalls
  // for 10 s is dropped. Errors: accept() failing for another reason than
  // EINTR; the file unreadable while sending.
  Result<ServeStats> Serve(const std::atomic<bool>* stop = nullptr);

 private:
  TraceServer() = default;
  // Answers one connection; true when the file was sent whole.
  bool Answer(int fd, ServeStats& stats);

  std::filesystem::path file_;
  std::string name_;  // the file's name, as served at /name_
  ServeOptions options_;
  base::UniqueFd listen_;
  uint16_t port_ = 0;
};

}  // namespace ptsnap::serve
