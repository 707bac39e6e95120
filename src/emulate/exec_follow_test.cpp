#include "emulate/exec_follow.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace ptsnap::emulate {
namespace {

using Kind = ExecTarget::Kind;

std::optional<ScriptInterpreter> Parse(std::string_view head) {
  return ParseScriptInterpreter(head);
}

TEST(ScriptInterpreter, ParsesAsBinfmtScriptDoes) {
  EXPECT_EQ(Parse("#!/bin/sh\necho hi\n"), (ScriptInterpreter{"/bin/sh", std::nullopt}));
  // Spaces and tabs around the name; the argument is the rest of the line,
  // trimmed, spaces inside it kept.
  EXPECT_EQ(Parse("#! \t/usr/bin/env  python3 -u \t\nx"),
            (ScriptInterpreter{"/usr/bin/env", "python3 -u"}));
  EXPECT_EQ(Parse("#!/bin/sh \n"), (ScriptInterpreter{"/bin/sh", std::nullopt}));
  EXPECT_EQ(Parse("#!/bin/sh"), (ScriptInterpreter{"/bin/sh", std::nullopt}));  // short file
  EXPECT_EQ(Parse("#!relative/interp -x\n"), (ScriptInterpreter{"relative/interp", "-x"}));
  // A NUL ends the name, and there is no argument after it.
  EXPECT_EQ(Parse(std::string_view("#!/bin/sh\0 -e\n", 14)),
            (ScriptInterpreter{"/bin/sh", std::nullopt}));
}

TEST(ScriptInterpreter, RefusesWhatTheKernelRefuses) {
  EXPECT_FALSE(Parse("echo hi\n"));
  EXPECT_FALSE(Parse("#!\n"));
  EXPECT_FALSE(Parse("#!   \t\n"));
  EXPECT_FALSE(
      Parse("\x7f"
            "ELF"));
  // No newline in the first 256 bytes and no space after the name: the
  // name may be cut, so ENOEXEC.
  EXPECT_FALSE(Parse("#!/" + std::string(300, 'a')));
  // With a space after the name the cut falls in the argument: accepted,
  // the argument being what fits.
  const auto cut = Parse("#!/bin/x " + std::string(300, 'b'));
  ASSERT_TRUE(cut);
  EXPECT_EQ(cut->path, "/bin/x");
  EXPECT_EQ(cut->arg, std::string(kExecHeadBytes - 1 - 9, 'b'));
}

// A fake file system for ResolveExec.
struct Files {
  std::map<std::string, ExecFile> files;
  ExecFileReader Reader() const {
    return [this](const std::string& p) -> std::optional<ExecFile> {
      auto it = files.find(p);
      if (it == files.end()) return std::nullopt;
      return it->second;
    };
  }
};

std::string ElfHead(uint16_t machine, uint8_t cls = 2) {
  std::string h(64, '\0');
  h.replace(0, 4,
            "\x7f"
            "ELF");
  h[4] = static_cast<char>(cls);
  h[5] = 1;
  h[16] = 3;  // ET_DYN
  h[18] = static_cast<char>(machine & 0xff);
  h[19] = static_cast<char>(machine >> 8);
  return h;
}

ExecFile Exe(std::string head) { return {.executable = true, .readable = true, .head = head}; }

TEST(ResolveExec, RunsAnX86ElfAsItIs) {
  Files fs;
  fs.files["/bin/prog"] = Exe(ElfHead(62));
  const ExecTarget t = ResolveExec("/bin/prog", {"prog", "a"}, fs.Reader());
  EXPECT_EQ(t.kind, Kind::kFollow);
  EXPECT_EQ(t.program, "/bin/prog");
  EXPECT_EQ(t.argv, (std::vector<std::string>{"prog", "a"}));
}

TEST(ResolveExec, RunsAScriptsInterpreterLevelByLevel) {
  Files fs;
  fs.files["/usr/bin/python3"] = Exe(ElfHead(62));
  fs.files["/usr/bin/env"] =
      Exe("#!/usr/bin/python3 -E\n");  // a script interpreter that is a script
  fs.files["./tool"] = Exe("#!/usr/bin/env python3\nprint()\n");
  const ExecTarget t = ResolveExec("./tool", {"tool", "x", "y"}, fs.Reader());
  EXPECT_EQ(t.kind, Kind::kFollow);
  EXPECT_EQ(t.program, "/usr/bin/python3");
  // load_script twice: argv[0] dropped, [interp, arg, file] in front.
  EXPECT_EQ(t.argv, (std::vector<std::string>{"/usr/bin/python3", "-E", "/usr/bin/env", "python3",
                                              "./tool", "x", "y"}));
}

TEST(ResolveExec, SaysWhenTheKernelWouldFail) {
  Files fs;
  fs.files["/bin/noexec"] = {.executable = false, .readable = true, .head = ElfHead(62)};
  fs.files["/s/bad"] = Exe("#!\n");
  fs.files["/s/missing-interp"] = Exe("#!/nonexistent\n");
  fs.files["/s/loop"] = Exe("#!/s/loop\n");
  EXPECT_EQ(ResolveExec("/nonexistent", {"x"}, fs.Reader()).kind, Kind::kFails);
  EXPECT_EQ(ResolveExec("/bin/noexec", {"x"}, fs.Reader()).kind, Kind::kFails);
  EXPECT_EQ(ResolveExec("/s/bad", {"x"}, fs.Reader()).kind, Kind::kFails);
  EXPECT_EQ(ResolveExec("/s/missing-interp", {"x"}, fs.Reader()).kind, Kind::kFails);
  EXPECT_EQ(ResolveExec("/s/loop", {"x"}, fs.Reader()).kind, Kind::kFails);  // ELOOP
}

TEST(ResolveExec, LeavesToTheKernelWhatQemuX86_64CannotRun) {
  Files fs;
  fs.files["/bin/arm"] = Exe(ElfHead(183));  // EM_AARCH64
  fs.files["/bin/i386"] = Exe(ElfHead(3, 1));
  fs.files["/bin/data"] = Exe("MZ\x90");  // binfmt_misc may know it
  fs.files["/bin/su"] = Exe(ElfHead(62));
  fs.files["/bin/su"].changes_credentials = true;
  fs.files["/bin/secret"] = Exe(ElfHead(62));
  fs.files["/bin/secret"].readable = false;
  for (const char* p : {"/bin/arm", "/bin/i386", "/bin/data", "/bin/su", "/bin/secret"}) {
    SCOPED_TRACE(p);
    const ExecTarget t = ResolveExec(p, {"x"}, fs.Reader());
    EXPECT_EQ(t.kind, Kind::kNative);
    EXPECT_NE(t.why.find(p), std::string::npos) << t.why;
  }
}

TEST(QemuExecCommand, KeepsArgvZeroAndEndsQemusOptions) {
  ExecTarget t;
  t.kind = Kind::kFollow;
  t.program = "-odd";
  t.argv = {"name", "-h", "b"};
  EXPECT_EQ(QemuExecCommand("/usr/bin/qemu-x86_64", "/p.so,out=d", t),
            (std::vector<std::string>{"/usr/bin/qemu-x86_64", "-plugin", "/p.so,out=d", "-0",
                                      "name", "--", "-odd", "-h", "b"}));
  t.argv.clear();  // execve with no argv: argv[0] is "" as Linux makes it
  EXPECT_EQ(QemuExecCommand("q", "p", t),
            (std::vector<std::string>{"q", "-plugin", "p", "-0", "", "--", "-odd"}));
  EXPECT_EQ(EscapePluginArg("a,b,,c"), "a,,b,,,,c");
}

TEST(ExecCarry, RoundTrips) {
  ExecCarry c;
  c.clock = 123456;
  c.next_seq = 7;
  c.jit_fd = 9;
  c.ctl_ino = 424242;
  c.duration_left_ms = 850;
  c.slow_skipped = 3;
  c.main = "/path with spaces/and\nnewline";
  CarriedThread self;
  self.pid = 100;
  self.tid = 100;
  self.clock = 123456;
  self.insns = 99;
  self.hash = 0xcbf29ce484222325ull;
  self.self = true;
  self.fd = 12;
  self.file = "pt-100-100-0.pt";
  CarriedThread other;
  other.pid = 100;
  other.tid = 101;
  other.wrapped = true;
  other.exited = true;
  other.ring = {{0x02, 0x82, '\n', 0x00}, {}, {'e', 'n', 'd', '\n'}};
  c.threads = {self, other};
  const std::string text = FormatExecCarry(c);
  auto back = ParseExecCarry(text);
  ASSERT_TRUE(back) << back.error().ToString();
  EXPECT_EQ(*back, c);
  // Cut anywhere, it is refused rather than misread.
  for (size_t n = 0; n < text.size(); n += 7) EXPECT_FALSE(ParseExecCarry(text.substr(0, n))) << n;
  EXPECT_FALSE(ParseExecCarry("ptsnap-exec-carry 2\n"));
}

}  // namespace
}  // namespace ptsnap::emulate
