// Debian's python3 (stripped, -O2, GCC's hot/cold partitioning, static
// functions without names) recorded from its first instruction under the
// emulator: the timeline must add up (docs/decoding.md, "Call stacks on
// optimized code", "Impossible results"). Before .eh_frame ranges and the
// call-site rule for returns, this recording gave _PyEval_EvalFrameDefault
// 817 ms of inclusive time in a 74.8 ms trace and 64 frames "begun before
// the trace".
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "elf/symbol_file.h"
#include "ptsnap/ptsnap.h"
#include "tests/support/run_ptsnap.h"
#include "tests/support/shell.h"
#include "tests/support/temp_dir.h"

namespace ptsnap::testing {
namespace {

constexpr const char* kPython = "/usr/bin/python3.11";

TEST(DebianBinaries, PythonFullExecutionAddsUp) {
  if (!std::filesystem::exists(kPython)) GTEST_SKIP() << kPython << " is not installed";
  TempDir dir;
  const std::string trace = (dir.path() / "py.ptsnap").string();
  const PtsnapRun run = RunPtsnap("run --emulate --full-execution --trace-dir '" + trace +
                                  "' -o '" + (dir.path() / "py.fxt").string() + "' -- " + kPython +
                                  " -c 'import json; json.dumps(list(range(2000)))'");
  ASSERT_EQ(run.rc, 0) << run.out;
  EXPECT_EQ(run.out.find("Impossible results"), std::string::npos) << run.out;
  EXPECT_THAT(run.out, ::testing::HasSubstr("Decode errors: 0"));

  const PtsnapRun rep = RunPtsnap("report '" + trace + "' --json --limit 0", {.stdout_only = true});
  ASSERT_EQ(rep.rc, 0) << rep.out.substr(0, 2000);
  const auto j = nlohmann::json::parse(rep.out);
  auto python = elf::SymbolFile::Open(kPython);
  ASSERT_TRUE(python.has_value());
  ASSERT_GT(python->fdes().size(), 1000u);
  const uint64_t span = j["span_ns"];
  EXPECT_EQ(j["impossible"]["count"], 0);
  bool saw_eval = false;
  uint64_t unnamed = 0, unknown_python = 0;
  for (const auto& f : j["functions"]) {
    const std::string name = f["name"];
    // Every function's inclusive time (recursion counted once) fits the span.
    EXPECT_LE(f["total_ns"].get<uint64_t>(), span) << name;
    // Nothing began before a trace that starts at exec.
    EXPECT_EQ(f["unseen_start"].get<uint64_t>(), 0u) << name;
    saw_eval = saw_eval || name == "_PyEval_EvalFrameDefault";
    unnamed += name.starts_with("python3.11+0x");
    // Code of python3 itself that is unknown (named by its link-time
    // address) must be code no FDE bounds (crtstuff's helpers, .init, .fini).
    static constexpr std::string_view kUnknownPython = "[unknown @ python3.11+0x";
    if (name.starts_with(kUnknownPython)) {
      const uint64_t addr = std::stoull(name.substr(kUnknownPython.size()), nullptr, 16);
      for (const elf::FdeRange& r : python->fdes()) {
        if (addr >= r.start && addr < r.end) {
          ++unknown_python;
          ADD_FAILURE() << name << " lies in the FDE [" << r.start << ", " << r.end << ")";
        }
      }
    }
  }
  EXPECT_TRUE(saw_eval);
  EXPECT_GT(unnamed, 10u) << "static functions of the stripped binary, named by their FDE";
  EXPECT_EQ(unknown_python, 0u);
}

// Both decoders give the same timeline on Debian's own optimized code,
// branches not taken folded away by each (docs/decoding.md, "Pipeline",
// step 3): perl, whose glibc __memmove_chk_* falls through such a branch
// into memmove's body, and python3 killed by SIGSEGV.
TEST(DebianBinaries, BothDecodersAgreeOnPerlAndACrash) {
  if (!std::filesystem::exists("/usr/bin/perl") || !std::filesystem::exists(kPython))
    GTEST_SKIP() << "/usr/bin/perl or " << kPython << " is not installed";
  TempDir dir;
  const std::string d = dir.path().string();
  const std::pair<const char*, std::string> programs[] = {
      {"perl",
       "/usr/bin/perl -e 'my %h; $h{\"k$_\"} = $_ for 1..3000; print scalar(grep { /7/ } "
       "keys %h), \"\\n\"'"},
      {"crash", std::string(kPython) + " -c 'import os; os.kill(os.getpid(), 11)'"}};
  for (const auto& [name, command] : programs) {
    SCOPED_TRACE(name);
    const std::string trace = d + "/" + name + ".ptsnap";
    const PtsnapRun run = RunPtsnap("run --emulate --full-execution --no-decode --trace-dir '" +
                                    trace + "' -- " + command);
    ASSERT_NE(run.out.find("Finished recording"), std::string::npos) << run.out;
    EXPECT_EQ(run.rc, std::string(name) == "crash" ? 128 + 11 : 0) << run.out;
    std::string events[2];
    const char* decoders[] = {"ours", "libipt"};
    for (int i = 0; i < 2; ++i) {
      const std::string out = d + "/" + name + "." + decoders[i] + ".events";
      const PtsnapRun dec = RunPtsnap("decode --decoder " + std::string(decoders[i]) + " -o '" +
                                      out + "' '" + trace + "'");
      ASSERT_EQ(dec.rc, 0) << dec.out;
      EXPECT_THAT(dec.out, ::testing::HasSubstr("Decode errors: 0 "));
      events[i] = RunShell("cat '" + out + "'").out;
    }
    EXPECT_GT(events[0].size(), 100000u);
    EXPECT_TRUE(events[0] == events[1]) << "the two decoders' .events differ";
  }
}

// A stripped program whose debug file lies in a folder of the user's
// (an unpacked -dbgsym package): `decode --debug-dir` names its functions
// from it, by build-id; without it they are FILE+0xVADDR.
TEST(DebianBinaries, DebugDirNamesAStrippedProgram) {
  TempDir dir;
  const std::string d = dir.path().string();
  const std::string fib = RequiredEnv("PTSNAP_EMU_FIB");
  auto prep = RunShell("cd " + d + " && strip --strip-all -o fib " + fib +
                       " && objcopy --only-keep-debug " + fib + " fib.debug" +
                       " && id=$(readelf -n fib | sed -n 's/.*Build ID: //p') && test -n \"$id\"" +
                       " && mkdir -p dbg/.build-id/${id%${id#??}} && mv fib.debug " +
                       "dbg/.build-id/${id%${id#??}}/${id#??}.debug");
  ASSERT_EQ(prep.status, 0) << prep.out;
  const PtsnapRun run = RunPtsnap("run --emulate --full-execution --no-decode --trace-dir '" + d +
                                  "/t' -- '" + d + "/fib' 8");
  ASSERT_EQ(run.rc, 0) << run.out;
  const PtsnapRun bare = RunPtsnap("decode '" + d + "/t' -o '" + d + "/bare.events'");
  ASSERT_EQ(bare.rc, 0) << bare.out;
  const PtsnapRun named =
      RunPtsnap("decode '" + d + "/t' --debug-dir '" + d + "/dbg' -o '" + d + "/named.events'");
  ASSERT_EQ(named.rc, 0) << named.out;
  const auto bare_text = RunShell("cat '" + d + "/bare.events'").out;
  const auto named_text = RunShell("cat '" + d + "/named.events'").out;
  EXPECT_EQ(bare_text.find(" B fib "), std::string::npos);
  EXPECT_NE(bare_text.find(" B fib+0x"), std::string::npos) << "FDE-bounded, named by address";
  EXPECT_NE(named_text.find(" B fib via=call"), std::string::npos);
  const PtsnapRun rep = RunPtsnap("report '" + d + "/t' fib --debug-dir '" + d + "/dbg'");
  EXPECT_EQ(rep.rc, 0) << rep.out;
  EXPECT_THAT(rep.out, ::testing::HasSubstr("fib: "));
  EXPECT_THAT(rep.out, ::testing::Not(::testing::HasSubstr("not in this trace")));
  // The C ABI's "debug-dir" decode option, as the flag.
  ptsnap_decoder* dec = nullptr;
  ASSERT_EQ(ptsnap_decoder_open((d + "/t").c_str(), 0, &dec), PTSNAP_OK) << ptsnap_last_error();
  EXPECT_EQ(ptsnap_decoder_set(dec, "debug-dir", ""), PTSNAP_ERR_INVALID_ARGUMENT);
  ASSERT_EQ(ptsnap_decoder_set(dec, "debug-dir", (d + "/dbg").c_str()), PTSNAP_OK)
      << ptsnap_last_error();
  const std::string api_out = d + "/api.events";
  ASSERT_EQ(ptsnap_decoder_write(dec, api_out.c_str(), nullptr, nullptr), PTSNAP_OK)
      << ptsnap_last_error();
  ptsnap_decoder_free(dec);
  EXPECT_NE(RunShell("cat '" + api_out + "'").out.find(" B fib via=call"), std::string::npos);
}

}  // namespace
}  // namespace ptsnap::testing
