// The C ABI (ptsnap/ptsnap.h), linked against libptsnap.so. CApi.*: no
// recording happens (suite unit); CApiEmulated.*: records fib under the
// emulator through the C calls (suite integration, tests/api/meson.build).
#include "ptsnap/ptsnap.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <tuple>

#include "tests/support/temp_dir.h"

namespace fs = std::filesystem;

namespace {

using ::ptsnap::testing::TempDir;

struct Options {
  Options() : p(ptsnap_options_new()) {}
  ~Options() { ptsnap_options_free(p); }
  ptsnap_options* p;
};

TEST(CApi, Version) { EXPECT_STREQ(ptsnap_version(), PTSNAP_VERSION_STRING); }

TEST(CApi, KnownOptionsAreAccepted) {
  Options o;
  ASSERT_NE(o.p, nullptr);
  for (auto [k, v] : std::map<std::string, std::string>{{"emulate", "1"},
                                                        {"trace-dir", "/tmp/x"},
                                                        {"trigger", "main"},
                                                        {"filter", "filter main, tracestop f"},
                                                        {"only-in", "handle_request"},
                                                        {"snapshot-size", "4M"},
                                                        {"timer-resolution", "high"},
                                                        {"full-execution", "false"},
                                                        {"multi-snapshot", "yes"},
                                                        {"multi-thread", "0"},
                                                        {"duration-ms", "1500"},
                                                        {"copy-binaries", "true"},
                                                        {"ptw", "0"},
                                                        {"pwr-evt", "0"},
                                                        {"pid", "1"},
                                                        {"scope", "both"},
                                                        {"stop-signal", "SIGTERM"},
                                                        {"after", "wait"}}) {
    EXPECT_EQ(ptsnap_options_set(o.p, k.c_str(), v.c_str()), PTSNAP_OK)
        << k << ": " << ptsnap_last_error();
  }
  EXPECT_EQ(ptsnap_options_add_arg(o.p, "true"), PTSNAP_OK);
}

TEST(CApi, UnknownOptionNamesTheKey) {
  Options o;
  EXPECT_EQ(ptsnap_options_set(o.p, "snapshot-sise", "4M"), PTSNAP_ERR_INVALID_ARGUMENT);
  std::string msg = ptsnap_last_error();
  EXPECT_NE(msg.find("unknown option \"snapshot-sise\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("snapshot-size"), std::string::npos) << msg;
}

TEST(CApi, BadValuesNameTheKeyAndWhatItAccepts) {
  Options o;
  EXPECT_EQ(ptsnap_options_set(o.p, "emulate", "maybe"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ptsnap_last_error()).find("\"emulate\""), std::string::npos);
  EXPECT_EQ(ptsnap_options_set(o.p, "scope", "all"), PTSNAP_ERR_INVALID_ARGUMENT);
  std::string msg = ptsnap_last_error();
  EXPECT_NE(msg.find("user, kernel, both"), std::string::npos) << msg;
  EXPECT_EQ(ptsnap_options_set(o.p, "snapshot-size", "lots"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ptsnap_last_error()).find("snapshot-size"), std::string::npos);
  EXPECT_EQ(ptsnap_options_set(o.p, "pid", "-3"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ptsnap_options_set(o.p, "duration-ms", "1s"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ptsnap_options_set(o.p, "stop-signal", "SIGNOPE"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ptsnap_options_set(o.p, "after", "stop"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ptsnap_last_error()).find("kill, wait, detach"), std::string::npos);
  EXPECT_EQ(ptsnap_options_set(o.p, "after", "detach"), PTSNAP_OK) << ptsnap_last_error();
  EXPECT_EQ(ptsnap_options_set(nullptr, "emulate", "1"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ptsnap_options_set(o.p, "emulate", nullptr), PTSNAP_ERR_INVALID_ARGUMENT);
}

// "sampling" and "callgraph-mode" (docs: ptsnap.h's key list); sampling and
// emulate are two collection modes, so the second one set is refused.
TEST(CApi, SamplingOptions) {
  Options o;
  EXPECT_EQ(ptsnap_options_set(o.p, "sampling", "1"), PTSNAP_OK) << ptsnap_last_error();
  EXPECT_EQ(ptsnap_options_set(o.p, "callgraph-mode", "fp"), PTSNAP_OK) << ptsnap_last_error();
  EXPECT_EQ(ptsnap_options_set(o.p, "emulate", "1"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ptsnap_last_error()).find("choose one"), std::string::npos);
  EXPECT_EQ(ptsnap_options_set(o.p, "sampling", "0"), PTSNAP_OK);
  EXPECT_EQ(ptsnap_options_set(o.p, "emulate", "1"), PTSNAP_OK);
  EXPECT_EQ(ptsnap_options_set(o.p, "sampling", "1"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ptsnap_options_set(o.p, "sampling", "perhaps"), PTSNAP_ERR_INVALID_ARGUMENT);
  // callgraph-mode without sampling is refused when the recording is created.
  ASSERT_EQ(ptsnap_options_add_arg(o.p, "true"), PTSNAP_OK);
  ptsnap_recording* rec = nullptr;
  EXPECT_EQ(ptsnap_recording_create(o.p, nullptr, nullptr, &rec), PTSNAP_ERR_USAGE);
  EXPECT_EQ(rec, nullptr);
  EXPECT_NE(std::string(ptsnap_last_error()).find("--callgraph-mode only applies to --sampling"),
            std::string::npos)
      << ptsnap_last_error();
}

// "ptw" (`--ptw`) is a boolean; with "emulate" the recording is refused at
// create, as the CLI refuses the pair (docs/errors.md).
TEST(CApi, PtwWithEmulateIsUsage) {
  Options o;
  EXPECT_EQ(ptsnap_options_set(o.p, "ptw", "maybe"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ptsnap_last_error()).find("\"ptw\""), std::string::npos);
  ASSERT_EQ(ptsnap_options_set(o.p, "ptw", "1"), PTSNAP_OK) << ptsnap_last_error();
  ASSERT_EQ(ptsnap_options_set(o.p, "emulate", "1"), PTSNAP_OK) << ptsnap_last_error();
  ASSERT_EQ(ptsnap_options_add_arg(o.p, "true"), PTSNAP_OK);
  ptsnap_recording* rec = nullptr;
  EXPECT_EQ(ptsnap_recording_create(o.p, nullptr, nullptr, &rec), PTSNAP_ERR_USAGE);
  EXPECT_EQ(rec, nullptr);
  EXPECT_NE(std::string(ptsnap_last_error()).find("QEMU does not execute"), std::string::npos)
      << ptsnap_last_error();
}

// "pwr-evt" (`--pwr-evt`) is a boolean; with "emulate" the recording is
// refused at create, as the CLI refuses the pair (docs/errors.md).
TEST(CApi, PwrEvtWithEmulateIsUsage) {
  Options o;
  EXPECT_EQ(ptsnap_options_set(o.p, "pwr-evt", "maybe"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ptsnap_last_error()).find("\"pwr-evt\""), std::string::npos);
  ASSERT_EQ(ptsnap_options_set(o.p, "pwr-evt", "1"), PTSNAP_OK) << ptsnap_last_error();
  ASSERT_EQ(ptsnap_options_set(o.p, "emulate", "1"), PTSNAP_OK) << ptsnap_last_error();
  ASSERT_EQ(ptsnap_options_add_arg(o.p, "true"), PTSNAP_OK);
  ptsnap_recording* rec = nullptr;
  EXPECT_EQ(ptsnap_recording_create(o.p, nullptr, nullptr, &rec), PTSNAP_ERR_USAGE);
  EXPECT_EQ(rec, nullptr);
  EXPECT_NE(std::string(ptsnap_last_error()).find("the emulator does not write"), std::string::npos)
      << ptsnap_last_error();
}

// "emulate-waits" (`--emulate-waits`) is a boolean; without "emulate" the
// recording is refused at create, as the CLI refuses it (docs/errors.md).
TEST(CApi, EmulateWaitsWithoutEmulateIsUsage) {
  Options o;
  EXPECT_EQ(ptsnap_options_set(o.p, "emulate-waits", "often"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ptsnap_last_error()).find("\"emulate-waits\""), std::string::npos);
  ASSERT_EQ(ptsnap_options_set(o.p, "emulate-waits", "1"), PTSNAP_OK) << ptsnap_last_error();
  ASSERT_EQ(ptsnap_options_add_arg(o.p, "true"), PTSNAP_OK);
  ptsnap_recording* rec = nullptr;
  EXPECT_EQ(ptsnap_recording_create(o.p, nullptr, nullptr, &rec), PTSNAP_ERR_USAGE);
  EXPECT_EQ(rec, nullptr);
  EXPECT_NE(std::string(ptsnap_last_error()).find("--emulate-waits adds the time syscalls wait"),
            std::string::npos)
      << ptsnap_last_error();
}

TEST(CApi, LastErrorIsPerThread) {
  Options o;
  EXPECT_EQ(ptsnap_options_set(o.p, "bogus", "1"), PTSNAP_ERR_INVALID_ARGUMENT);
  std::string other = "unset";
  std::thread([&] { other = ptsnap_last_error(); }).join();
  EXPECT_EQ(other, "");
  EXPECT_NE(std::string(ptsnap_last_error()).find("bogus"), std::string::npos);
}

TEST(CApi, CreateWithoutCommandIsUsage) {
  Options o;
  ASSERT_EQ(ptsnap_options_set(o.p, "emulate", "1"), PTSNAP_OK);
  ptsnap_recording* rec = reinterpret_cast<ptsnap_recording*>(1);
  EXPECT_EQ(ptsnap_recording_create(o.p, nullptr, nullptr, &rec), PTSNAP_ERR_USAGE);
  EXPECT_EQ(rec, nullptr);
  EXPECT_STRNE(ptsnap_last_error(), "");
}

TEST(CApi, DecoderOpenOfAMissingDirectoryFails) {
  TempDir tmp;
  std::string dir = (tmp.path() / "missing.ptsnap").string();
  ptsnap_decoder* d = nullptr;
  EXPECT_NE(ptsnap_decoder_open(dir.c_str(), 0, &d), PTSNAP_OK);
  EXPECT_EQ(d, nullptr);
  std::string msg = ptsnap_last_error();
  EXPECT_NE(msg.find("missing.ptsnap"), std::string::npos) << msg;
  EXPECT_EQ(ptsnap_decoder_open(nullptr, 0, &d), PTSNAP_ERR_INVALID_ARGUMENT);
}

TEST(CApi, NullHandlesAreHarmless) {
  ptsnap_options_free(nullptr);
  ptsnap_recording_free(nullptr);
  ptsnap_decoder_free(nullptr);
  ptsnap_free(nullptr);
  ptsnap_recording_request_stop(nullptr);
  EXPECT_STREQ(ptsnap_recording_trace_dir(nullptr), "");
  EXPECT_EQ(ptsnap_recording_start(nullptr), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_EQ(ptsnap_decoder_decode(nullptr, nullptr, nullptr, nullptr), PTSNAP_ERR_INVALID_ARGUMENT);
}

TEST(CApi, ProbeJsonParses) {
  char* text = ptsnap_probe_json();
  ASSERT_NE(text, nullptr);
  auto j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  ptsnap_free(text);
  ASSERT_FALSE(j.is_discarded());
  EXPECT_TRUE(j.is_object());
  int pt = ptsnap_probe_pt_available();
  EXPECT_TRUE(pt == 0 || pt == 1);
}

struct Seen {
  int events = 0, snapshot_events = 0, threads = 0;
  std::map<std::string, int> calls;
};

// Marks through the C ABI: examples/c/requests.c marks request ids 0..99
// and "done"; the mark callback gets each, in order, on the program's thread.
TEST(CApiEmulated, TheMarkCallbackGetsEveryMark) {
  const char* dir = std::getenv("EMU_PROGRAMS_DIR");
  ASSERT_NE(dir, nullptr) << "EMU_PROGRAMS_DIR is not set";
  TempDir tmp;
  const std::string trace = (tmp.path() / "trace").string();
  const std::string prog = (fs::path(dir) / "emu_requests").string();
  Options o;
  ASSERT_EQ(ptsnap_options_set(o.p, "emulate", "1"), PTSNAP_OK);
  ASSERT_EQ(ptsnap_options_set(o.p, "trace-dir", trace.c_str()), PTSNAP_OK);
  ASSERT_EQ(ptsnap_options_set(o.p, "full-execution", "1"), PTSNAP_OK);
  ASSERT_EQ(ptsnap_options_add_arg(o.p, prog.c_str()), PTSNAP_OK);
  ASSERT_EQ(ptsnap_options_add_arg(o.p, "100"), PTSNAP_OK);
  ptsnap_recording* rec = nullptr;
  ASSERT_EQ(ptsnap_recording_create(o.p, nullptr, nullptr, &rec), PTSNAP_OK) << ptsnap_last_error();
  ASSERT_EQ(ptsnap_recording_start(rec), PTSNAP_OK) << ptsnap_last_error();
  int status = -1;
  ASSERT_EQ(ptsnap_recording_wait(rec, &status), PTSNAP_OK) << ptsnap_last_error();
  EXPECT_EQ(status, 0);
  ptsnap_recording_free(rec);
  ptsnap_decoder* d = nullptr;
  ASSERT_EQ(ptsnap_decoder_open(trace.c_str(), 0, &d), PTSNAP_OK) << ptsnap_last_error();
  EXPECT_EQ(ptsnap_decoder_set_mark_callback(nullptr, nullptr), PTSNAP_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(ptsnap_decoder_set_mark_callback(
                d,
                [](void* user, int32_t pid, int32_t tid, uint64_t ts_ns, uint64_t value) {
                  EXPECT_EQ(pid, tid);
                  EXPECT_GT(ts_ns, 0u);
                  static_cast<std::vector<uint64_t>*>(user)->push_back(value);
                }),
            PTSNAP_OK);
  std::vector<uint64_t> marks;
  ASSERT_EQ(ptsnap_decoder_decode(d, nullptr, &marks, nullptr), PTSNAP_OK) << ptsnap_last_error();
  ptsnap_decoder_free(d);
  ASSERT_EQ(marks.size(), 101u);
  for (uint64_t i = 0; i < 100; ++i) EXPECT_EQ(marks[i], i);
  EXPECT_EQ(marks[100], 0x656e6f64u);  // "done"
}

TEST(CApiEmulated, RecordSnapshotStopDecode) {
  const char* dir = std::getenv("EMU_PROGRAMS_DIR");
  ASSERT_NE(dir, nullptr) << "EMU_PROGRAMS_DIR is not set";
  TempDir tmp;
  std::string trace = (tmp.path() / "trace").string();
  std::string fib = (fs::path(dir) / "emu_fib").string();
  Options o;
  ASSERT_EQ(ptsnap_options_set(o.p, "emulate", "1"), PTSNAP_OK);
  ASSERT_EQ(ptsnap_options_set(o.p, "trace-dir", trace.c_str()), PTSNAP_OK);
  ASSERT_EQ(ptsnap_options_set(o.p, "snapshot-size", "256K"), PTSNAP_OK);
  ASSERT_EQ(ptsnap_options_add_arg(o.p, fib.c_str()), PTSNAP_OK);
  ASSERT_EQ(ptsnap_options_add_arg(o.p, "40"), PTSNAP_OK);

  Seen seen;
  auto on_event = [](void* user, int kind, const char* message, uint32_t) {
    auto* s = static_cast<Seen*>(user);
    ++s->events;
    if (kind == PTSNAP_EVENT_SNAPSHOT) ++s->snapshot_events;
    EXPECT_NE(message, nullptr);
  };
  ptsnap_recording* rec = nullptr;
  ASSERT_EQ(ptsnap_recording_create(o.p, on_event, &seen, &rec), PTSNAP_OK) << ptsnap_last_error();
  EXPECT_EQ(std::string(ptsnap_recording_trace_dir(rec)), trace);
  ASSERT_EQ(ptsnap_recording_start(rec), PTSNAP_OK) << ptsnap_last_error();
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  uint32_t seq = 0;
  ASSERT_EQ(ptsnap_recording_snapshot(rec, "from C", &seq), PTSNAP_OK) << ptsnap_last_error();
  EXPECT_GE(seq, 1u);
  int status = -1;
  ASSERT_EQ(ptsnap_recording_stop(rec, &status), PTSNAP_OK) << ptsnap_last_error();
  EXPECT_EQ(status, 128 + SIGINT);
  ptsnap_recording_free(rec);
  EXPECT_GE(seen.snapshot_events, 1);

  ptsnap_decoder* d = nullptr;
  ASSERT_EQ(ptsnap_decoder_open(trace.c_str(), seq, &d), PTSNAP_OK) << ptsnap_last_error();
  ptsnap_decode_callbacks cb{};
  cb.on_thread = [](void* user, int32_t, int32_t, const char* name, size_t len) {
    ++static_cast<Seen*>(user)->threads;
    EXPECT_EQ(name[len], '\0');
  };
  cb.on_slice = [](void* user, const ptsnap_slice* s) {
    EXPECT_EQ(s->name[s->name_len], '\0');
    EXPECT_LE(s->begin_ns, s->end_ns);
    ++static_cast<Seen*>(user)->calls[std::string(s->name, s->name_len)];
  };
  char* summary = nullptr;
  ASSERT_EQ(ptsnap_decoder_decode(d, &cb, &seen, &summary), PTSNAP_OK) << ptsnap_last_error();
  ASSERT_NE(summary, nullptr);
  auto j = nlohmann::json::parse(summary);
  ptsnap_free(summary);
  EXPECT_GT(j["slices"].get<uint64_t>(), 100u);
  EXPECT_GE(seen.threads, 1);
  EXPECT_GT(seen.calls["fib"], 100);

  std::string out = (tmp.path() / "out.events").string();
  ASSERT_EQ(ptsnap_decoder_write(d, out.c_str(), nullptr, nullptr), PTSNAP_OK)
      << ptsnap_last_error();
  EXPECT_GT(fs::file_size(out), 0u);

  // The decode flag by its name: libipt's decoder gives the same summary.
  EXPECT_EQ(ptsnap_decoder_set(d, "decoder", "fast"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ptsnap_last_error()).find("bad value \"fast\" (expected ours or libipt)"),
            std::string::npos);
  EXPECT_EQ(ptsnap_decoder_set(d, "engine", "ours"), PTSNAP_ERR_INVALID_ARGUMENT);
  EXPECT_NE(std::string(ptsnap_last_error()).find("unknown decode option \"engine\""),
            std::string::npos);
  ASSERT_EQ(ptsnap_decoder_set(d, "decoder", "libipt"), PTSNAP_OK) << ptsnap_last_error();
  char* libipt_summary = nullptr;
  ASSERT_EQ(ptsnap_decoder_decode(d, nullptr, nullptr, &libipt_summary), PTSNAP_OK)
      << ptsnap_last_error();
  auto lj = nlohmann::json::parse(libipt_summary);
  ptsnap_free(libipt_summary);
  EXPECT_EQ(lj["slices"], j["slices"]);
  EXPECT_EQ(lj["instructions"], j["instructions"]);

  // Thinning and inline frames by their flag names: the file written with
  // max-depth 1 leaves spans out and its summary counts them.
  for (auto [key, value, expected] : {std::tuple{"max-depth", "x", "a number of frames"},
                                      std::tuple{"min-duration", "5", "a duration such as 1us"},
                                      std::tuple{"no-inline", "maybe", "true or false"}}) {
    EXPECT_EQ(ptsnap_decoder_set(d, key, value), PTSNAP_ERR_INVALID_ARGUMENT) << key;
    EXPECT_NE(std::string(ptsnap_last_error()).find(expected), std::string::npos)
        << ptsnap_last_error();
  }
  ASSERT_EQ(ptsnap_decoder_set(d, "no-inline", "true"), PTSNAP_OK) << ptsnap_last_error();
  ASSERT_EQ(ptsnap_decoder_set(d, "min-duration", "0"), PTSNAP_OK) << ptsnap_last_error();
  ASSERT_EQ(ptsnap_decoder_set(d, "max-depth", "1"), PTSNAP_OK) << ptsnap_last_error();
  std::string thin = (tmp.path() / "thin.events").string();
  char* thin_summary = nullptr;
  ASSERT_EQ(ptsnap_decoder_write(d, thin.c_str(), nullptr, &thin_summary), PTSNAP_OK)
      << ptsnap_last_error();
  auto tj = nlohmann::json::parse(thin_summary);
  ptsnap_free(thin_summary);
  EXPECT_GT(tj["dropped_too_deep"].get<uint64_t>(), 0u) << tj.dump();
  EXPECT_LT(fs::file_size(thin), fs::file_size(out));
  ptsnap_decoder_free(d);
}

}  // namespace
