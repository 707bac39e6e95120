#include "serve/trace_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace ptsnap::serve {

namespace {

constexpr size_t kMaxHead = size_t{16} * 1024;
constexpr int kClientTimeoutMs = 10'000;

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Writes all of `data`, waiting up to the client timeout for room; false
// when the client is gone or stalled.
bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      pollfd p{fd, POLLOUT, 0};
      if (::poll(&p, 1, kClientTimeoutMs) <= 0) return false;
      continue;
    }
    return false;
  }
  return true;
}

// The request head (up to the blank line), or "" when the client sent
// none in time or too much.
std::string ReadHead(int fd) {
  std::string head;
  char buf[2048];
  while (head.find("\r\n\r\n") == std::string::npos && head.size() < kMaxHead) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, kClientTimeoutMs) <= 0) return "";
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return "";
    head.append(buf, static_cast<size_t>(n));
  }
  return head.find("\r\n\r\n") == std::string::npos ? "" : head;
}

}  // namespace

Result<Request> ParseRequest(std::string_view head) {
  const size_t eol = head.find("\r\n");
  const std::string_view line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp1 == std::string_view::npos || sp2 == std::string_view::npos || sp1 == 0 ||
      !line.substr(sp2 + 1).starts_with("HTTP/1."))
    return Error("not an HTTP/1.x request line: '" + std::string(line.substr(0, 80)) + "'");
  Request r;
  r.method = std::string(line.substr(0, sp1));
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find_first_of("?#"));
  if (!target.starts_with('/'))
    return Error("request target is not a path: " + std::string(target));
  for (size_t i = 0; i < target.size(); ++i) {
    if (target[i] == '%' && i + 2 < target.size() && HexDigit(target[i + 1]) >= 0 &&
        HexDigit(target[i + 2]) >= 0) {
      r.path.push_back(static_cast<char>(HexDigit(target[i + 1]) * 16 + HexDigit(target[i + 2])));
      i += 2;
    } else {
      r.path.push_back(target[i]);
    }
  }
  return r;
}

std::string PercentEncode(std::string_view s) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (const char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if ((u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') || u == '-' ||
        u == '.' || u == '_' || u == '~') {
      out.push_back(c);
    } else {
      out.push_back('%');
      out.push_back(kHex[u >> 4]);
      out.push_back(kHex[u & 15]);
    }
  }
  return out;
}

Result<TraceServer> TraceServer::Open(const std::filesystem::path& file, ServeOptions options) {
  struct stat st {};
  if (::stat(file.c_str(), &st) != 0) return Error::FromErrno(file.string());
  if (!S_ISREG(st.st_mode)) return Error(file.string() + " is not a regular file");
  if (::access(file.c_str(), R_OK) != 0) return Error::FromErrno(file.string());

  TraceServer s;
  s.file_ = file;
  s.name_ = file.filename().string();
  s.options_ = std::move(options);
  s.listen_.reset(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!s.listen_) return Error::FromErrno("socket");
  // As open_trace_in_ui (allow_reuse_address): a restart right after the
  // last run is not refused while its connections sit in TIME_WAIT. (It
  // does not let two servers listen on one port.)
  const int one = 1;
  ::setsockopt(s.listen_.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(s.options_.port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::bind(s.listen_.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    const int err = errno;
    const std::string where = "127.0.0.1:" + std::to_string(s.options_.port);
    if (err == EADDRINUSE)
      return Error(where +
                   " is already in use (another `ptsnap serve`, or trace_processor --httpd, "
                   "which also listens on 9001): stop it, or pass --port N (ui.perfetto.dev "
                   "itself fetches from 9001 only)");
    return Error::FromErrno("binding " + where + " (pass another --port)", err);
  }
  if (::listen(s.listen_.get(), 8) != 0) return Error::FromErrno("listen");
  socklen_t len = sizeof addr;
  if (::getsockname(s.listen_.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    return Error::FromErrno("getsockname");
  s.port_ = ntohs(addr.sin_port);
  return s;
}

std::string TraceServer::Url() const {
  return "http://127.0.0.1:" + std::to_string(port_) + "/" + PercentEncode(name_);
}

std::string TraceServer::UiLink() const { return options_.origin + "/#!/?url=" + Url(); }

bool TraceServer::Answer(int fd, ServeStats& stats) {
  const std::string head = ReadHead(fd);
  if (head.empty()) return false;
  stats.requests++;
  const std::string cors = "Access-Control-Allow-Origin: " + options_.origin +
                           "\r\n"
                           "Cache-Control: no-cache\r\n"
                           "Connection: close\r\n";
  auto reply = [&](const char* status, const std::string& extra, std::string_view body) {
    SendAll(fd, std::string("HTTP/1.1 ") + status + "\r\n" + cors + extra + "Content-Length: " +
                    std::to_string(body.size()) + "\r\n\r\n" + std::string(body));
  };
  auto req = ParseRequest(head);
  if (!req) {
    reply("400 Bad Request", "Content-Type: text/plain\r\n", "bad request\n");
    return false;
  }
  if (req->method == "OPTIONS") {
    // A preflight: Chrome sends one before a public page fetches from a
    // private address (Private Network Access), and for non-simple requests.
    reply("204 No Content",
          "Access-Control-Allow-Methods: GET, HEAD, OPTIONS\r\n"
          "Access-Control-Allow-Headers: *\r\n"
          "Access-Control-Allow-Private-Network: true\r\n",
          "");
    return false;
  }
  if (req->method != "GET" && req->method != "HEAD") {
    reply("405 Method Not Allowed", "Allow: GET, HEAD, OPTIONS\r\nContent-Type: text/plain\r\n",
          "only GET, HEAD and OPTIONS\n");
    return false;
  }
  if (req->path != "/" + name_) {
    reply("404 Not Found", "Content-Type: text/plain\r\n",
          "this server has one file: /" + PercentEncode(name_) + "\n");
    return false;
  }
  base::UniqueFd in(::open(file_.c_str(), O_RDONLY | O_CLOEXEC));
  struct stat st {};
  if (!in || ::fstat(in.get(), &st) != 0) {
    reply("500 Internal Server Error", "Content-Type: text/plain\r\n",
          std::string("cannot read the file: ") + std::strerror(errno) + "\n");
    return false;
  }
  const auto size = static_cast<uint64_t>(st.st_size);
  if (!SendAll(fd, "HTTP/1.1 200 OK\r\n" + cors +
                       "Content-Type: application/octet-stream\r\n"
                       "Content-Length: " +
                       std::to_string(size) + "\r\n\r\n"))
    return false;
  if (req->method == "HEAD") return false;
  uint64_t done = 0;
  std::string buf(1 << 16, '\0');
  while (done < size) {
    const ssize_t n = ::read(in.get(), buf.data(), buf.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;  // truncated meanwhile: the client sees a short body
    if (!SendAll(fd, std::string_view(buf.data(), static_cast<size_t>(n)))) return false;
    done += static_cast<uint64_t>(n);
  }
  stats.sent++;
  return true;
}

Result<ServeStats> TraceServer::Serve(const std::atomic<bool>* stop) {
  ServeStats stats;
  while (options_.count == 0 || stats.sent < options_.count) {
    if (stop != nullptr && stop->load()) break;
    pollfd p{listen_.get(), POLLIN, 0};
    const int ready = ::poll(&p, 1, 100);
    if (ready < 0 && errno != EINTR) return Error::FromErrno("poll");
    if (ready <= 0) continue;
    base::UniqueFd client(::accept4(listen_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!client) {
      if (errno == EINTR || errno == EAGAIN || errno == ECONNABORTED) continue;
      return Error::FromErrno("accept");
    }
    Answer(client.get(), stats);
    // Let the client read the reply before the close (no RST on unread input).
    ::shutdown(client.get(), SHUT_WR);
  }
  return stats;
}

}  // namespace ptsnap::serve
