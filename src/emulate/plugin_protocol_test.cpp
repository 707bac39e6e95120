#include "emulate/plugin_protocol.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace ptsnap::emulate {
namespace {

constexpr uint64_t kMax64 = std::numeric_limits<uint64_t>::max();
constexpr uint32_t kMax32 = std::numeric_limits<uint32_t>::max();

// The error ParseMessage gives for `line`, or "" when it parses.
std::string ErrorOf(std::string_view line) {
  auto m = ParseMessage(line);
  return m ? "" : m.error().ToString();
}

TEST(PluginProtocol, WriterWritesOneLinePerMessage) {
  EXPECT_EQ(FormatMessage(MmapMessage{.time = 5,
                                      .pid = 10,
                                      .tid = 11,
                                      .addr = 0x400000,
                                      .len = 8192,
                                      .pgoff = 4096,
                                      .maj = 254,
                                      .min = 0,
                                      .ino = 77,
                                      .prot = 5,
                                      .flags = 2,
                                      .path = "/bin/my prog"}),
            "mmap2 5 10 11 4194304 8192 4096 254 0 77 5 2 /bin/my prog\n");
  EXPECT_EQ(FormatMessage(CommMessage{.time = 0, .pid = 10, .tid = 10, .exec = true, .name = "a"}),
            "comm 0 10 10 1 a\n");
  EXPECT_EQ(FormatMessage(
                TaskMessage{.exit = false, .time = 9, .pid = 1, .ppid = 2, .tid = 3, .ptid = 4}),
            "fork 9 1 2 3 4\n");
  EXPECT_EQ(
      FormatMessage(TaskMessage{.exit = true, .time = 9, .pid = 1, .ppid = 2, .tid = 3, .ptid = 4}),
      "exit 9 1 2 3 4\n");
  EXPECT_EQ(FormatMessage(ItraceMessage{.time = 0, .pid = 10, .tid = 12}), "itrace 0 10 12\n");
  EXPECT_EQ(FormatMessage(StreamMessage{.seq = 1,
                                        .pid = 10,
                                        .tid = 12,
                                        .wrapped = true,
                                        .insns = 1234,
                                        .hash = kStreamHashSeed,
                                        .file = "pt-10-12-1.pt"}),
            "stream 1 10 12 1 1234 14695981039346656037 0 0 pt-10-12-1.pt\n");
  // A snapshot's stream that continues the thread's stream of snapshot 3.
  EXPECT_EQ(FormatMessage(StreamMessage{.seq = 4,
                                        .pid = 10,
                                        .tid = 12,
                                        .insns = 2000,
                                        .hash = 7,
                                        .follows = 3,
                                        .ring = 65536,
                                        .file = "pt-10-12-4.pt"}),
            "stream 4 10 12 0 2000 7 3 65536 pt-10-12-4.pt\n");
  EXPECT_EQ(FormatMessage(SnapshotMessage{
                .seq = 2, .time = 100, .tid = 10, .reason = "trigger", .detail = "fib"}),
            "snapshot 2 100 10 trigger fib\n");
  // No detail: the line ends after the reason.
  EXPECT_EQ(FormatMessage(SnapshotMessage{.seq = 3, .time = 7, .tid = 0, .reason = "ctrl-c"}),
            "snapshot 3 7 0 ctrl-c\n");
  EXPECT_EQ(FormatMessage(SlowCallMessage{.seq = 4, .begin = 1000, .length = 5123}),
            "slowcall 4 1000 5123\n");
  EXPECT_EQ(FormatMessage(NoteMessage{"execve: not traced"}), "note execve: not traced\n");
  EXPECT_EQ(FormatMessage(DoneMessage{120}), "done 120\n");
}

TEST(PluginProtocol, EveryMessageRoundTrips) {
  const std::vector<PluginMessage> messages = {
      MmapMessage{.time = kMax64,
                  .pid = kMax32,
                  .tid = 1,
                  .addr = kMax64,
                  .len = 1,
                  .pgoff = 0,
                  .maj = kMax32,
                  .min = 7,
                  .ino = kMax64,
                  .prot = 7,
                  .flags = 2,
                  .path = "/odd/ name \\ with\nnewline\\n "},
      CommMessage{.time = 1, .pid = 2, .tid = 3, .exec = false, .name = "two words"},
      TaskMessage{.exit = true, .time = 1, .pid = 2, .ppid = 3, .tid = 4, .ptid = 5},
      TaskMessage{.exit = false, .time = 0, .pid = 0, .ppid = 0, .tid = 0, .ptid = 0},
      ItraceMessage{.time = 3, .pid = 4, .tid = 5},
      StreamMessage{.seq = kMax32,
                    .pid = std::numeric_limits<int32_t>::max(),
                    .tid = 1,
                    .wrapped = false,
                    .insns = kMax64,
                    .hash = 0,
                    .file = "pt-1-1-0.pt"},
      StreamMessage{.seq = 2,
                    .pid = 1,
                    .tid = 1,
                    .insns = 5,
                    .hash = 6,
                    .follows = kMax32,
                    .ring = kMax64,
                    .file = "pt-1-1-2.pt"},
      SnapshotMessage{.seq = 1, .time = 2, .tid = 3, .reason = "exit", .detail = "execve"},
      SnapshotMessage{.seq = 1, .time = 2, .tid = 3, .reason = "trigger", .detail = " a b\\ "},
      SnapshotMessage{.seq = 1, .time = 2, .tid = 3, .reason = "duration", .detail = ""},
      SlowCallMessage{.seq = 1, .begin = kMax64, .length = 0},
      NoteMessage{"a note\nover two lines"},
      NoteMessage{""},
      DoneMessage{kMax64},
  };
  std::string log;
  for (const auto& m : messages) log += FormatMessage(m);
  auto parsed = ParseMessages(log);
  ASSERT_TRUE(parsed) << parsed.error().ToString();
  ASSERT_EQ(parsed->size(), messages.size()) << log;
  for (size_t i = 0; i < messages.size(); ++i) {
    EXPECT_TRUE((*parsed)[i] == messages[i])
        << "message " << i << ": " << FormatMessage(messages[i]);
  }
}

TEST(PluginProtocol, MalformedLinesNameTheField) {
  EXPECT_EQ(ErrorOf("mmap2 x"), "mmap2: time 'x' is not an unsigned decimal number");
  EXPECT_EQ(ErrorOf("itrace 0 10"), "itrace: tid is missing");
  EXPECT_EQ(ErrorOf("itrace 0 10 11 12"), "itrace: unexpected '12' after the last field");
  EXPECT_EQ(ErrorOf("itrace 0  11"), "itrace: pid is empty");
  EXPECT_EQ(ErrorOf("itrace 0 -1 11"), "itrace: pid '-1' is not an unsigned decimal number");
  EXPECT_EQ(ErrorOf("itrace 0 +1 11"), "itrace: pid '+1' is not an unsigned decimal number");
  EXPECT_EQ(ErrorOf("itrace 0 0x10 11"), "itrace: pid '0x10' is not an unsigned decimal number");
  EXPECT_EQ(ErrorOf("itrace 0 4294967296 11"), "itrace: pid 4294967296 is out of range");
  EXPECT_EQ(ErrorOf("done 18446744073709551616"),
            "done: time '18446744073709551616' is not an unsigned decimal number");
  EXPECT_EQ(ErrorOf("stream 1 2147483648 3 0 5 6 0 0 f.pt"),
            "stream: pid 2147483648 is out of range");
  EXPECT_EQ(ErrorOf("comm 0 1 1 2 prog"), "comm: exec is 2, not 0 or 1");
  EXPECT_EQ(ErrorOf("comm 0 1 1 1"), "comm: name is missing");
  EXPECT_EQ(ErrorOf("comm 0 1 1 1 "), "comm: name is missing");
  EXPECT_EQ(ErrorOf("mmap2 0 1 1 0 0 0 0 0 0 0 0"), "mmap2: path is missing");
  EXPECT_EQ(ErrorOf("note a\\x"), "note: text has a backslash that is not \\\\ or \\n");
  EXPECT_EQ(ErrorOf("note trailing\\"), "note: text has a backslash that is not \\\\ or \\n");
  EXPECT_EQ(ErrorOf("stream 1 2 3 0 5 6 0 0 ../escape.pt"),
            "stream: file '../escape.pt' is not a file name in the plugin's directory");
  EXPECT_EQ(ErrorOf("stream 1 2 3 0 5 6 0 0 .."),
            "stream: file '..' is not a file name in the plugin's directory");
  EXPECT_EQ(ErrorOf("stream 1 2 3 0 5 6 4294967296 0 f.pt"),
            "stream: follows 4294967296 is out of range");
  EXPECT_EQ(ErrorOf("snapshot 1 2 3"), "snapshot: reason is missing");
  EXPECT_EQ(ErrorOf("done"), "done: time is missing");
  EXPECT_EQ(ErrorOf("bogus 1"), "unknown message kind 'bogus'");
  EXPECT_EQ(ErrorOf(""), "unknown message kind ''");
}

TEST(PluginProtocol, LogErrorsNameTheLineAndTornTailIsIgnored) {
  auto bad = ParseMessages("done 1\nitrace 0 10\n");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().ToString(),
            "emulator event log line 2 is malformed: 'itrace 0 10': itrace: tid is missing");
  auto torn = ParseMessages("itrace 0 10 10\nmmap2 5 10");
  ASSERT_TRUE(torn) << torn.error().ToString();
  ASSERT_EQ(torn->size(), 1u);
  EXPECT_TRUE((*torn)[0] == PluginMessage(ItraceMessage{.time = 0, .pid = 10, .tid = 10}));
  auto empty = ParseMessages("");
  ASSERT_TRUE(empty);
  EXPECT_TRUE(empty->empty());
}

TEST(PluginProtocol, FilterArgumentsRoundTrip) {
  FilterRange f{.trace_stop = false, .offset = 0x1136, .size = 64, .path = "/usr/bin/a:b"};
  EXPECT_EQ(FormatFilterArg(f), "filter:4406:64:/usr/bin/a:b");
  EXPECT_EQ(ParseFilterArg(FormatFilterArg(f)), f);
  FilterRange s{.trace_stop = true, .offset = 0, .size = 1, .path = "/lib/libc.so.6"};
  EXPECT_EQ(ParseFilterArg(FormatFilterArg(s)), s);
  for (const char* bad : {"", "filter", "filter:1:2", "filter:1:2:", "start:1:2:/x",
                          "filter:x:2:/x", "filter:1:0:/x", "filter:1:-2:/x"}) {
    SCOPED_TRACE(bad);
    EXPECT_FALSE(ParseFilterArg(bad));
  }
}

// The lib_trigger argument (a shared-library trigger for the plugin:
// record/linked_libraries.h finds it).
TEST(PluginProtocol, LibTriggerArgumentRoundTrips) {
  const FileOffset f{0x2a0f0, "/usr/lib/x86_64-linux-gnu/lib:odd.so"};
  EXPECT_EQ(FormatFileOffsetArg(f), "172272:/usr/lib/x86_64-linux-gnu/lib:odd.so");
  EXPECT_EQ(ParseFileOffsetArg(FormatFileOffsetArg(f)), f);
  EXPECT_EQ(ParseFileOffsetArg("12:"), std::nullopt);
  EXPECT_EQ(ParseFileOffsetArg("x:/lib"), std::nullopt);
  EXPECT_EQ(ParseFileOffsetArg("/lib"), std::nullopt);
}

}  // namespace
}  // namespace ptsnap::emulate
