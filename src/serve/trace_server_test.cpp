#include "serve/trace_server.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <thread>

#include "tests/support/temp_dir.h"

namespace ptsnap::serve {
namespace {

using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

// A raw HTTP client: sends `request`, reads until the server closes.
std::string Fetch(uint16_t port, const std::string& request) {
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(fd.valid());
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    ADD_FAILURE() << "connect to port " << port << ": " << std::strerror(errno);
    return "";
  }
  EXPECT_EQ(::send(fd.get(), request.data(), request.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(request.size()));
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = ::recv(fd.get(), buf, sizeof buf, 0)) > 0) out.append(buf, static_cast<size_t>(n));
  return out;
}

std::string Body(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

TEST(TraceServer, ServesTheFileWithPerfettosHeadersThenReturns) {
  TempDir tmp;
  std::string content;
  for (int i = 0; i < 200000; ++i) content.push_back(static_cast<char>(i * 7));  // binary, 200 KB
  const auto file = tmp.Write("my trace.fxt", content);
  auto server = TraceServer::Open(file, {.port = 0});
  ASSERT_TRUE(server.has_value()) << server.error().ToString();
  const uint16_t port = server->port();
  ASSERT_NE(port, 0);
  EXPECT_EQ(server->Url(), "http://127.0.0.1:" + std::to_string(port) + "/my%20trace.fxt");
  EXPECT_EQ(server->UiLink(), "https://ui.perfetto.dev/#!/?url=" + server->Url());

  Result<ServeStats> stats = Error("not run");
  std::thread t([&] { stats = server->Serve(); });
  // Not the file: 404, and the server goes on.
  const std::string missing = Fetch(port, "GET /other.fxt HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(missing, StartsWith("HTTP/1.1 404 "));
  EXPECT_THAT(missing, HasSubstr("Access-Control-Allow-Origin: https://ui.perfetto.dev\r\n"));
  // The preflight Chrome sends before a public page reads a local address.
  const std::string preflight = Fetch(port,
                                      "OPTIONS /my%20trace.fxt HTTP/1.1\r\n"
                                      "Origin: https://ui.perfetto.dev\r\n"
                                      "Access-Control-Request-Method: GET\r\n"
                                      "Access-Control-Request-Private-Network: true\r\n\r\n");
  EXPECT_THAT(preflight, StartsWith("HTTP/1.1 204 "));
  EXPECT_THAT(preflight, HasSubstr("Access-Control-Allow-Origin: https://ui.perfetto.dev\r\n"));
  EXPECT_THAT(preflight, HasSubstr("Access-Control-Allow-Methods: GET"));
  EXPECT_THAT(preflight, HasSubstr("Access-Control-Allow-Private-Network: true\r\n"));
  EXPECT_THAT(Fetch(port, "POST /my%20trace.fxt HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 405 "));
  // HEAD: the headers, no body; it does not count as the download.
  const std::string head = Fetch(port, "HEAD /my%20trace.fxt HTTP/1.1\r\n\r\n");
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_EQ(Body(head), "");
  // The download, as the UI asks for it (a query string is ignored).
  const std::string got = Fetch(port,
                                "GET /my%20trace.fxt?x=1 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                "Origin: https://ui.perfetto.dev\r\n\r\n");
  t.join();
  EXPECT_THAT(got, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(got, HasSubstr("Access-Control-Allow-Origin: https://ui.perfetto.dev\r\n"));
  EXPECT_THAT(got, HasSubstr("Cache-Control: no-cache\r\n"));
  EXPECT_THAT(got, HasSubstr("Content-Length: 200000\r\n"));
  EXPECT_EQ(Body(got), content);  // byte for byte
  ASSERT_TRUE(stats.has_value()) << stats.error().ToString();
  EXPECT_EQ(stats->sent, 1u);  // then Serve returned (count 1)
  EXPECT_EQ(stats->requests, 5u);
}

TEST(TraceServer, StopEndsServing) {
  TempDir tmp;
  auto server = TraceServer::Open(tmp.Write("t.json", "{}"), {.port = 0, .count = 0});
  ASSERT_TRUE(server.has_value());
  std::atomic<bool> stop{false};
  Result<ServeStats> stats = Error("not run");
  std::thread t([&] { stats = server->Serve(&stop); });
  EXPECT_EQ(Body(Fetch(server->port(), "GET /t.json HTTP/1.1\r\n\r\n")), "{}");
  EXPECT_EQ(Body(Fetch(server->port(), "GET /t.json HTTP/1.1\r\n\r\n")), "{}");
  stop = true;
  t.join();
  ASSERT_TRUE(stats.has_value());
  EXPECT_EQ(stats->sent, 2u);
}

TEST(TraceServer, AMissingFileOrADirectoryIsAClearError) {
  TempDir tmp;
  auto r = TraceServer::Open(tmp.path() / "nope.fxt", {.port = 0});
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().ToString(), HasSubstr("nope.fxt: No such file or directory"));
  r = TraceServer::Open(tmp.path(), {.port = 0});
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().ToString(), HasSubstr("is not a regular file"));
}

TEST(TraceServer, APortInUseNamesThePortAndTheFlag) {
  TempDir tmp;
  const auto file = tmp.Write("t.fxt", "x");
  auto first = TraceServer::Open(file, {.port = 0});
  ASSERT_TRUE(first.has_value());
  auto second = TraceServer::Open(file, {.port = first->port()});
  ASSERT_FALSE(second.has_value());
  const std::string msg = second.error().ToString();
  EXPECT_THAT(msg, HasSubstr("127.0.0.1:" + std::to_string(first->port()) + " is already in use"));
  EXPECT_THAT(msg, HasSubstr("--port"));
}

TEST(TraceServer, ParseRequestDecodesThePath) {
  auto r = ParseRequest("GET /a%20b%2Fc.fxt?q=1 HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->method, "GET");
  EXPECT_EQ(r->path, "/a b/c.fxt");
  EXPECT_FALSE(ParseRequest("hello\r\n\r\n").has_value());
  EXPECT_FALSE(ParseRequest("GET x HTTP/1.1\r\n\r\n").has_value());
  EXPECT_FALSE(ParseRequest("GET /x SPDY/3\r\n\r\n").has_value());
  EXPECT_EQ(PercentEncode("t 1&2.fxt.gz"), "t%201%262.fxt.gz");
}

}  // namespace
}  // namespace ptsnap::serve
