// The ptsnap binary's `run`/`attach` failures a user can meet on this
// machine: one clear line on stderr, a documented exit code
// (docs/errors.md), and nothing half-written.
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "tests/support/run_ptsnap.h"
#include "tests/support/temp_dir.h"

namespace {

using ::ptsnap::testing::TempDir;
using ::testing::HasSubstr;
using ::testing::StartsWith;

struct Exit {
  int code = -1;
  std::string err;
};

// Runs ptsnap with `args` in `cwd`; returns its exit code and stderr.
Exit Ptsnap(const std::filesystem::path& cwd, std::vector<std::string> args) {
  const auto run = ::ptsnap::testing::RunPtsnapArgv(std::move(args), cwd.string());
  return {run.rc, run.out};
}

bool HasIntelPt() { return std::filesystem::exists("/sys/bus/event_source/devices/intel_pt"); }

class CliErrors : public ::testing::Test {
 protected:
  void SetUp() override {
    // meson sets it (tests/recorder/meson.build): losing that line must fail
    // every test here, not turn them into skips.
    if (std::getenv("PTSNAP_BIN") == nullptr)
      FAIL() << "PTSNAP_BIN is not set: run through `meson test`";
  }
  // Nothing but what the test itself created.
  void ExpectEmpty() const {
    EXPECT_TRUE(std::filesystem::is_empty(dir_.path())) << "ptsnap left files behind";
  }
  TempDir dir_;
};

TEST_F(CliErrors, NoPmuIsOneLineWithExitCode3AndNothingWritten) {
  if (HasIntelPt()) GTEST_SKIP() << "this machine has an intel_pt PMU: the no-PMU path cannot run";
  Exit r = Ptsnap(dir_.path(), {"run", "--", "/bin/true"});
  EXPECT_EQ(r.code, 3);
  EXPECT_THAT(r.err, StartsWith("ptsnap: error: no Intel PT on this machine"));
  EXPECT_THAT(r.err, HasSubstr("--emulate"));
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << r.err;
  ExpectEmpty();
}

TEST_F(CliErrors, MissingTriggerSymbol) {
  Exit r = Ptsnap(dir_.path(), {"run", "--trigger", "no_such_function", "--", "/bin/true"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("trigger symbol 'no_such_function' not found"));
  ExpectEmpty();
}

TEST_F(CliErrors, MagicTraceSpellingMissingStopIndicator) {
  Exit r = Ptsnap(dir_.path(), {"run", "-trigger", ".", "--", "/bin/true"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("has no stop indicator"));
  ExpectEmpty();
}

TEST_F(CliErrors, ProcessGoneBeforeAttach) {
  pid_t pid = fork();
  if (pid == 0) _exit(0);
  waitpid(pid, nullptr, 0);
  Exit r = Ptsnap(dir_.path(), {"attach", "-p", std::to_string(pid)});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("process " + std::to_string(pid) + " does not exist"));
  ExpectEmpty();
}

// attach's `--trigger ?` lists the functions of -p's process (here a child
// of this test, its executable this test's): it once read no process and
// asked for the -p it had been given.
TEST_F(CliErrors, AttachTriggerPickListsTheProcessFunctions) {
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(child, 0);
  Exit r = Ptsnap(dir_.path(), {"attach", "-p", std::to_string(child), "--trigger", "?"});
  ::kill(child, SIGKILL);
  ::waitpid(child, nullptr, 0);
  EXPECT_EQ(r.code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("Functions of /proc/" + std::to_string(child) + "/exe:"));
  EXPECT_THAT(r.err, HasSubstr("stdin is not a terminal, so there is no one to pick"));
  ExpectEmpty();
}

TEST_F(CliErrors, DuplicatePidsAreAUsageError) {
  Exit r = Ptsnap(dir_.path(), {"attach", "-pid", "1,1"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("lists process 1 twice"));
}

// A trace directory the user named is never replaced.
TEST_F(CliErrors, ExistingNamedTraceDirIsRefused) {
  dir_.Write("trace.ptsnap/manifest.json", "{}");
  Exit r = Ptsnap(dir_.path(), {"run", "--trace-dir", "trace.ptsnap", "--", "/bin/true"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("trace directory trace.ptsnap already exists"));
  EXPECT_EQ(std::filesystem::file_size(dir_.path() / "trace.ptsnap" / "manifest.json"), 2u);
}

// -o names the output file, not the recording: the directory beside it
// follows the default's rule (moved aside), so the same command line can be
// run again, as with the default output.
TEST_F(CliErrors, TheTraceDirBesideOutputIsMovedAside) {
  dir_.Write("trace.ptsnap/manifest.json", "{}");
  Exit o = Ptsnap(dir_.path(),
                  {"run", "--emulate", "--no-decode", "-o", "trace.json", "--", "/bin/true"});
  ASSERT_EQ(o.code, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("[ Moved the previous recording trace.ptsnap to trace.ptsnap.old"));
  EXPECT_EQ(std::filesystem::file_size(dir_.path() / "trace.ptsnap.old" / "manifest.json"), 2u);
}

// The default one is moved aside (one generation, like perf.data.old), but
// only once the recording really starts: a run that fails its checks
// leaves it where it is.
TEST_F(CliErrors, DefaultTraceDirIsMovedAsideOnlyByARecording) {
  dir_.Write("trace.ptsnap/manifest.json", "{}");
  dir_.Write("trace.ptsnap.old/manifest.json", "{\"older\": 1}");
  Exit fails = Ptsnap(dir_.path(), {"run", "--trigger", "no_such_fn", "--", "/bin/true"});
  EXPECT_EQ(fails.code, 1);
  EXPECT_EQ(std::filesystem::file_size(dir_.path() / "trace.ptsnap" / "manifest.json"), 2u);
  Exit r = Ptsnap(dir_.path(), {"run", "--emulate", "--no-decode", "--", "/bin/true"});
  ASSERT_EQ(r.code, 0) << r.err;
  // The older recording it deletes is said, not deleted silently.
  EXPECT_THAT(r.err, HasSubstr("[ Moved the previous recording trace.ptsnap to trace.ptsnap.old "
                               "(the older recording that was there is deleted) ]"));
  // The previous recording is the .old one now; the older one is gone.
  EXPECT_EQ(std::filesystem::file_size(dir_.path() / "trace.ptsnap.old" / "manifest.json"), 2u);
  EXPECT_GT(std::filesystem::file_size(dir_.path() / "trace.ptsnap" / "manifest.json"), 2u);
  // With no .old there, the line says only the move.
  std::filesystem::remove_all(dir_.path() / "trace.ptsnap.old");
  r = Ptsnap(dir_.path(), {"run", "--emulate", "--no-decode", "--", "/bin/true"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err,
              HasSubstr("[ Moved the previous recording trace.ptsnap to trace.ptsnap.old ]"));
}

// A trigger that never fires: the exit's snapshot is kept, and said to be
// the exit's (it once was, silently).
TEST_F(CliErrors, ATriggerThatNeverFiresIsSaid) {
  Exit r = Ptsnap(dir_.path(),
                  {"run", "--emulate", "--no-decode", "--trigger", "addr:0x1", "--", "/bin/true"});
  ASSERT_EQ(r.code, 0) << r.err;
  EXPECT_THAT(r.err, HasSubstr("warning: the trigger addr:0x1 never fired (the code never ran): "
                               "the snapshot was taken at the end instead (exit)"));
}

TEST_F(CliErrors, UnwritableOutput) {
  Exit r = Ptsnap(dir_.path(), {"run", "-output", "missing/dir/out.fxt", "--", "/bin/true"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot write output missing/dir/out.fxt"));
  ExpectEmpty();
  // A directory by the output's name is refused before recording, not at the decode.
  dir_.Write("out.fxt/keep", "");
  r = Ptsnap(dir_.path(), {"run", "--emulate", "-o", "out.fxt", "--", "/bin/true"});
  EXPECT_EQ(r.code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot write output out.fxt: it is a directory"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "out.ptsnap"));
}

// An output name decode cannot write is refused before recording, in the
// words decode uses (output::ChooseOutputFormat, the one list of formats).
TEST_F(CliErrors, AnOutputFormatDecodeCannotWriteIsRefusedBeforeRecording) {
  Exit r = Ptsnap(dir_.path(), {"run", "--emulate", "-o", "out.txt", "--", "/bin/true"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("cannot tell the output format from 'out.txt': name it .fxt, .json "
                               "or .events (optionally .gz), or pass --format"));
  EXPECT_FALSE(std::filesystem::exists(dir_.path() / "out.ptsnap"));
  r = Ptsnap(dir_.path(),
             {"run", "--emulate", "-o", "out.txt", "--format", "svg", "--", "/bin/true"});
  EXPECT_EQ(r.code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown output format 'svg' (use fxt, json or events)"));
  ExpectEmpty();
}

TEST_F(CliErrors, BadOptionValuesAreUsageErrors) {
  Exit size = Ptsnap(dir_.path(), {"run", "-snapshot-size", "huge", "--", "/bin/true"});
  EXPECT_EQ(size.code, 2);
  EXPECT_THAT(size.err, HasSubstr("bad size 'huge'"));
  // 0 once meant the default silently.
  Exit zero = Ptsnap(dir_.path(), {"run", "--snapshot-size", "0", "--", "/bin/true"});
  EXPECT_EQ(zero.code, 2);
  EXPECT_THAT(zero.err, HasSubstr("--snapshot-size 0: a buffer needs at least 4K"));
  Exit timer = Ptsnap(dir_.path(), {"run", "-timer-resolution", "custom:cyc=2", "--", "/bin/true"});
  EXPECT_EQ(timer.code, 2);
  EXPECT_THAT(timer.err, HasSubstr("not a boolean"));
  Exit dur = Ptsnap(dir_.path(), {"attach", "-p", "1", "-duration", "soon"});
  EXPECT_EQ(dur.code, 2);
  EXPECT_THAT(dur.err, HasSubstr("bad --duration 'soon'"));
  // Under perf's 4 KiB: a bad command line too (it was exit 1).
  Exit small =
      Ptsnap(dir_.path(), {"run", "--emulate", "--snapshot-size", "1K", "--", "/bin/true"});
  EXPECT_EQ(small.code, 2);
  EXPECT_THAT(small.err, HasSubstr("--snapshot-size 1 KiB is too small"));
  // The program's options without `--` before the program: CLI11's line,
  // then where they go.
  Exit extras = Ptsnap(dir_.path(), {"run", "--emulate", "ls", "-l"});
  EXPECT_EQ(extras.code, 2);
  EXPECT_THAT(extras.err, HasSubstr("The following argument was not expected: -l"));
  EXPECT_THAT(extras.err,
              HasSubstr("The program's own options go after --: ptsnap run [options] -- CMD"));
  Exit cmd = Ptsnap(dir_.path(), {"run", "--", "no-such-command-xyz"});
  EXPECT_EQ(cmd.code, 1);
  EXPECT_THAT(cmd.err, HasSubstr("command not found"));
  ExpectEmpty();
}

// --decoder is ours or libipt, for decode, run, attach and report; a bad
// value fails before anything is recorded or read.
TEST_F(CliErrors, BadDecoderIsAUsageError) {
  for (const std::vector<std::string>& args :
       std::vector<std::vector<std::string>>{{"decode", "--decoder", "fast", "no-such-dir"},
                                             {"run", "--decoder", "fast", "--", "/bin/true"},
                                             {"attach", "--decoder", "fast", "-p", "1"},
                                             {"report", "--decoder", "fast", "no-such-dir"}}) {
    Exit e = Ptsnap(dir_.path(), args);
    EXPECT_EQ(e.code, 2) << args[0];
    EXPECT_THAT(e.err, HasSubstr("--decoder: fast not in {ours,libipt}")) << args[0];
  }
  ExpectEmpty();
}

TEST_F(CliErrors, SystemWideUsageErrors) {
  Exit none = Ptsnap(dir_.path(), {"attach"});
  EXPECT_EQ(none.code, 2);
  EXPECT_THAT(none.err,
              HasSubstr("attach needs -p PID[,PID...] (or -a to trace the whole system)"));
  Exit cpu = Ptsnap(dir_.path(), {"attach", "--cpu", "3-1"});
  EXPECT_EQ(cpu.code, 2);
  EXPECT_THAT(cpu.err, HasSubstr("bad --cpu '3-1': expected a CPU list such as 0-3,7"));
  Exit emu = Ptsnap(dir_.path(), {"run", "-a", "--emulate", "--", "/bin/true"});
  EXPECT_EQ(emu.code, 2);
  EXPECT_THAT(emu.err, HasSubstr("-a/--cpu (system-wide) needs hardware Intel PT"));
  Exit trig = Ptsnap(dir_.path(), {"attach", "-a", "--trigger", "main"});
  EXPECT_EQ(trig.code, 2);
  EXPECT_THAT(trig.err, HasSubstr("--trigger needs -p PID"));
  ExpectEmpty();
}

// --ptw: a usage error (2) with the collections that have no PTWRITE to
// record, before the machine is looked at (this host may have no PT).
TEST_F(CliErrors, PtwWithEmulateOrSamplingIsAUsageError) {
  Exit emu = Ptsnap(dir_.path(), {"run", "--ptw", "--emulate", "--", "/bin/true"});
  EXPECT_EQ(emu.code, 2);
  EXPECT_THAT(emu.err,
              HasSubstr("--ptw records the PTWRITE instruction, which QEMU does not execute: drop "
                        "--ptw under --emulate; ptsnap_mark() (<ptsnap/mark.h>) uses its emulated "
                        "encoding by default, and the emulator records that"));
  Exit sampling = Ptsnap(dir_.path(), {"run", "--ptw", "--sampling", "--", "/bin/true"});
  EXPECT_EQ(sampling.code, 2);
  EXPECT_THAT(sampling.err, HasSubstr("--ptw records PTWRITE in Intel PT; --sampling takes stack"));
  ExpectEmpty();
}

// --pwr-evt: a usage error (2) with the collections that write no power
// events, before the machine is looked at (this host may have no PT).
TEST_F(CliErrors, PwrEvtWithEmulateOrSamplingIsAUsageError) {
  Exit emu = Ptsnap(dir_.path(), {"run", "--pwr-evt", "--emulate", "--", "/bin/true"});
  EXPECT_EQ(emu.code, 2);
  EXPECT_THAT(emu.err,
              HasSubstr("--pwr-evt records Intel PT power events (C-state changes), which the "
                        "emulator does not write: drop --pwr-evt under --emulate"));
  Exit sampling = Ptsnap(dir_.path(), {"run", "--pwr-evt", "--sampling", "--", "/bin/true"});
  EXPECT_EQ(sampling.code, 2);
  EXPECT_THAT(sampling.err,
              HasSubstr("--pwr-evt records power events in Intel PT; --sampling takes stack"));
  Exit attach = Ptsnap(dir_.path(), {"attach", "--pwr-evt", "--sampling", "-p", "1"});
  EXPECT_EQ(attach.code, 2);
  EXPECT_THAT(attach.err, HasSubstr("drop --pwr-evt"));
  ExpectEmpty();
}

// --emulate-waits changes the emulator's clock: a usage error (2) without
// --emulate, for run and attach, before the machine is looked at.
TEST_F(CliErrors, EmulateWaitsWithoutEmulateIsAUsageError) {
  const std::string message =
      "--emulate-waits adds the time syscalls wait to the emulator's virtual clock: add --emulate "
      "(without it the times are the CPU's real clock, waits included)";
  Exit run = Ptsnap(dir_.path(), {"run", "--emulate-waits", "--", "/bin/true"});
  EXPECT_EQ(run.code, 2);
  EXPECT_THAT(run.err, HasSubstr(message));
  Exit attach = Ptsnap(dir_.path(), {"attach", "--emulate-waits", "-p", "1"});
  EXPECT_EQ(attach.code, 2);
  EXPECT_THAT(attach.err, HasSubstr(message));
  ExpectEmpty();
}

// --filter: its syntax and combinations are usage errors (2), a function
// that is not there an error (1), all before the machine is looked at.
TEST_F(CliErrors, FilterErrorsComeFirst) {
  Exit syntax = Ptsnap(dir_.path(), {"run", "--filter", "trace main", "--", "/bin/true"});
  EXPECT_EQ(syntax.code, 2);
  EXPECT_THAT(syntax.err, HasSubstr("bad --filter 'trace main': unknown action 'trace'"));
  Exit all = Ptsnap(dir_.path(), {"run", "-a", "--filter", "main", "--", "/bin/true"});
  EXPECT_EQ(all.code, 2);
  EXPECT_THAT(all.err, HasSubstr("--filter needs per-thread tracing"));
  Exit sampling = Ptsnap(dir_.path(), {"run", "--sampling", "--filter", "main", "--", "/bin/true"});
  EXPECT_EQ(sampling.code, 2);
  EXPECT_THAT(sampling.err, HasSubstr("--filter limits Intel PT to address ranges"));
  Exit missing = Ptsnap(dir_.path(), {"run", "--filter", "no_such_fn", "--", "/bin/true"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_THAT(missing.err, HasSubstr("--filter: no function named 'no_such_fn' in "));
  ExpectEmpty();
}

// --only-in: a malformed name and a missing function are reported before
// the machine is looked at (here: no Intel PT), so a typo is a typo.
TEST_F(CliErrors, OnlyInErrorsComeFirst) {
  Exit range = Ptsnap(dir_.path(), {"run", "--only-in", "0x1000/16", "--", "/bin/true"});
  EXPECT_EQ(range.code, 2);
  EXPECT_THAT(range.err, HasSubstr("--only-in takes one function name of the program"));
  Exit sampling =
      Ptsnap(dir_.path(), {"run", "--sampling", "--only-in", "main", "--", "/bin/true"});
  EXPECT_EQ(sampling.code, 2);
  EXPECT_THAT(sampling.err, HasSubstr("--only-in pauses Intel PT outside a function"));
  Exit missing = Ptsnap(dir_.path(), {"run", "--only-in", "no_such_fn", "--", "/bin/true"});
  EXPECT_EQ(missing.code, 1);
  EXPECT_THAT(missing.err, HasSubstr("--only-in: no function named 'no_such_fn' in "));
  ExpectEmpty();
}

// `run -a` keeps the no-PMU error; `attach -a` falls back to sampling
// every CPU (magic-trace's rule), said in one line.
TEST_F(CliErrors, SystemWideWithoutPtIsTheNoPmuErrorForRunAndSamplesForAttach) {
  if (HasIntelPt()) GTEST_SKIP() << "this machine has an intel_pt PMU: the no-PMU path cannot run";
  Exit r = Ptsnap(dir_.path(), {"run", "-a", "--cpu", "0", "--", "/bin/true"});
  EXPECT_EQ(r.code, 3);
  EXPECT_THAT(r.err, StartsWith("ptsnap: error: no Intel PT on this machine"));
  EXPECT_THAT(r.err, HasSubstr("--sampling"));
  ExpectEmpty();
  Exit a = Ptsnap(dir_.path(), {"attach", "-a", "--cpu", "0", "--duration", "300ms", "--no-decode",
                                "--trace-dir", "sw.ptsnap"});
  EXPECT_EQ(a.code, 0) << a.err;
  EXPECT_THAT(a.err, HasSubstr("Intel PT not found: recording with stack sampling instead"));
  EXPECT_TRUE(std::filesystem::exists(dir_.path() / "sw.ptsnap" / "manifest.json"));
}

}  // namespace
