// Following execve under the emulator (docs/emulation.md, "exec"). QEMU 7.2
// runs an exec'd program natively, outside the emulator; the plugin instead
// replaces the process itself, in its execve syscall callback, with
// `qemu-x86_64 -plugin <the same plugin and arguments> -- PROGRAM ARGS`,
// as the kernel would have replaced it with PROGRAM: same pid, same open
// files, the guest's environment. The plugin in the new image goes on
// recording into the same event log and rings from the state the old one
// handed over (ExecCarry).
//
// Pure pieces, unit-tested: what an execve runs, resolved by the kernel's
// rules (an x86-64 ELF, or a `#!` script's interpreter, level by level:
// fs/binfmt_script.c, fs/exec.c), the qemu-x86_64 command line that runs
// it, and the format of the handed-over state. The plugin does the I/O.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/exec_script.h"
#include "ptsnap/result.h"

namespace ptsnap::emulate {

// A script's `#!` line (base/exec_script.h: the recorder reads it too).
using base::kExecHeadBytes;
using base::ParseScriptInterpreter;
using base::ScriptInterpreter;

// What execve(2) sees of a file (nullopt from the reader: it does not exist).
struct ExecFile {
  bool executable = false;  // access(X_OK), and not a directory
  bool readable = false;    // QEMU opens it to load it
  // A set-user-ID or set-group-ID file whose owner or group differs from
  // the caller's effective one: a native exec would change credentials,
  // which a program QEMU loads never gets.
  bool changes_credentials = false;
  std::string head;  // its first kExecHeadBytes bytes (fewer for a short file)
};
using ExecFileReader = std::function<std::optional<ExecFile>(const std::string& path)>;
// The reader on this machine: stat, faccessat(X_OK, AT_EACCESS), the head.
[[nodiscard]] std::optional<ExecFile> ReadExecFile(const std::string& path);

// What execve(path, argv) runs.
struct ExecTarget {
  enum class Kind {
    kFollow,  // an x86-64 ELF: run it under the emulator
    kNative,  // the exec may succeed, but not under qemu-x86_64 (`why`)
    kFails,   // the kernel refuses it (no such file, not executable, a bad #! line)
  };
  Kind kind = Kind::kFails;
  std::string program;            // kFollow: the ELF QEMU loads (a script's interpreter)
  std::vector<std::string> argv;  // kFollow: its argv, argv[0] included
  std::string why;                // kNative, kFails: one clause naming the file and the cause
};
// Resolves `path` as fs/exec.c does: an ELF is run as it is (kFollow when it
// is x86-64, else kNative); a `#!` script runs its interpreter with argv
// [interpreter, arg (if any), path, argv[1]...], itself resolved the same
// way, at most kMaxExecRewrites levels deep (the kernel's ELOOP beyond).
// Anything else (no known format) is kNative: binfmt_misc may run it.
inline constexpr int kMaxExecRewrites = 5;
[[nodiscard]] ExecTarget ResolveExec(const std::string& path, std::vector<std::string> argv,
                                     const ExecFileReader& read);

// The command that runs `target` under QEMU with the plugin:
// {qemu, "-plugin", plugin_arg, "-0", argv[0], "--", program, argv[1]...};
// argv[0] is "" when the guest passed none (as Linux since 5.18 makes it).
[[nodiscard]] std::vector<std::string> QemuExecCommand(const std::string& qemu,
                                                       const std::string& plugin_arg,
                                                       const ExecTarget& target);

// One value of QEMU's -plugin option (QemuOpts): a comma is written twice.
[[nodiscard]] std::string EscapePluginArg(std::string_view value);

// What the plugin hands to itself across an execve, in a file the new
// image's plugin reads (plugin argument exec=FILE) and removes.
struct CarriedThread {
  int32_t pid = 0, tid = 0;
  uint64_t clock = 0;            // its virtual time
  uint64_t insns = 0, hash = 0;  // retired (and hashed) so far in its stream
  bool wrapped = false;          // its ring dropped older bytes
  bool exited = false;           // its EXIT is in the log already
  bool self = false;             // the thread that called execve: it runs the new program
  int fd = -1;                   // full mode: its stream file, left open across the exec
  std::string file;              // full mode: the stream's file name ("" in snapshot mode)
  std::vector<std::vector<uint8_t>> ring;  // snapshot mode: the ring's chunks, oldest first
  bool operator==(const CarriedThread&) const = default;
};
struct ExecCarry {
  uint64_t clock = 0;             // the calling thread's time when execve retired
  uint32_t next_seq = 1;          // the next snapshot number (stream file names stay unique)
  int jit_fd = -1;                // the JIT code capture, left open (-1: none yet)
  uint64_t ctl_ino = 0;           // the control pipe's inode (0: none): the fd is checked
  uint64_t duration_left_ms = 0;  // --duration: what is left of it (0: none)
  uint64_t slow_skipped = 0;      // --slower-than: slow calls skipped so far
  std::string main;               // the program trigger addresses were resolved in
  std::vector<CarriedThread> threads;
  bool operator==(const ExecCarry&) const = default;
};
// Text lines, each ring chunk's bytes after its `chunk LEN` line.
[[nodiscard]] std::string FormatExecCarry(const ExecCarry& c);
[[nodiscard]] Result<ExecCarry> ParseExecCarry(std::string_view text);

}  // namespace ptsnap::emulate
