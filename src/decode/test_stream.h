// Test support: writes genuine Intel PT packet streams with the PT packet
// writer (emulate/pt_packets.h), and a minimal manifest/sideband for the decoder test program
// (tests/programs/decode/calls.S). Used by decode, model, output and cli tests.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "decode/symbols.h"
#include "emulate/pt_packets.h"
#include "trace/manifest.h"
#include "trace/perf_record.h"

namespace ptsnap::decode::testing {

// Appends packets; conditional branches and compressed returns are buffered
// as TNT bits and flushed (as TNT-8 packets) before any other packet.
class StreamBuilder {
 public:
  // PSB, TSC, MODE.exec(64-bit), PSBEND.
  void Psb(uint64_t tsc);
  // PSB, MODE.exec, PSBEND: a stream recorded without timing packets.
  void PsbWithoutTsc();
  void Tsc(uint64_t tsc);
  void Tnt(bool taken);
  void Tip(uint64_t ip);
  void TipPge(uint64_t ip);
  void TipPgd();  // IP suppressed: tracing stops (e.g. at a syscall into the untraced kernel)
  // With the target IP: a branch left the address filters (--filter).
  void TipPgd(uint64_t ip);
  void Fup(uint64_t ip);
  void Ovf();
  // MODE.TSX (bound to the FUP that must follow): `intx` a transaction is
  // running (speculative), `abrt` it aborted.
  void ModeTsx(bool intx, bool abrt);
  void Raw(const std::string& bytes);
  // All bytes so far (flushes pending TNT bits).
  std::string Finish();

 private:
  void FlushTnt();
  emulate::PacketWriter out_;
  uint64_t tnt_bits_ = 0;
  int tnt_count_ = 0;
};

// The decoder test program: its path (built by meson) and symbol addresses.
struct CallsProgram {
  std::string path;
  uint64_t Sym(const std::string& name) const;  // aborts the test if absent
  elf::SymbolTable symbols;
  std::map<std::string, uint64_t> labels;  // functions and labels (nm)
};
CallsProgram LoadProgram(const std::string& path);  // aborts the test if unreadable
CallsProgram LoadCallsProgram();
// tests/programs/decode/replaced.S: other code at calls.S's addresses.
CallsProgram LoadReplacedProgram();
// tests/programs/decode/marks.S: emulated PTWRITE (both shapes) and PTWRITE.
CallsProgram LoadMarksProgram();

// The TNT bits of fib(n) in calls.S (its branches and compressed returns).
void FibTnt(StreamBuilder& b, int n);

// calls.S's stream from its PSB (TSC `t`) up to the branch before its first
// syscall, a TSC every few branches advancing by `step`; returns the last
// TSC written.
uint64_t CallsUpToFirstSyscall(StreamBuilder& b, const CallsProgram& p, uint64_t t, uint64_t step);

// The full PT stream of one run of calls.S, user-only, with a TSC packet
// every few branches (time advances by `tsc_step` per TSC).
std::string CallsProgramStream(const CallsProgram& p, uint64_t tsc0 = 1000, uint64_t tsc_step = 10);

// A manifest (user scope, time_conv = identity) and MMAP2 records mapping the
// program's executable PT_LOAD segments for `pid`.
trace::Manifest CallsManifest(int32_t pid);
std::vector<trace::Record> CallsSideband(const CallsProgram& p, int32_t pid);
// The sideband of `pid` exec'ing `p` at `time`: COMM (exec flag, unless
// !exec) at `time`, MMAP2 of its executable segments at `time` + 1.
std::vector<trace::Record> ProgramSideband(const CallsProgram& p, int32_t pid,
                                           const std::string& comm, uint64_t time,
                                           bool exec = true);
// PERF_RECORD_SWITCH_CPU_WIDE on `cpu` at `time`: switch-out of `self`
// (next: `other`) when `out`, else switch-in of `self` (previous: `other`).
// Threads are {pid, tid}; {0, 0} is the idle task.
trace::Record SwitchRecord(uint32_t cpu, uint64_t time, bool out,
                           std::pair<uint32_t, uint32_t> self, std::pair<uint32_t, uint32_t> other);
// PERF_RECORD_ITRACE_START: tracing started on `cpu` with `pid`/`tid` running.
trace::Record ItraceStartRecord(uint32_t cpu, uint64_t time, uint32_t pid, uint32_t tid);

// Maps the srcline test program (`path`, built with -g) for `pid` at
// kSrclineBase and returns the process address of srcline_target, whose
// entry is on line 5 of srcline.c; 0 if the program cannot be read.
inline constexpr uint64_t kSrclineBase = 0x555500000000;
uint64_t MapSrcline(Symbolizer* s, int32_t pid, const std::string& path);

// A jitdump (trace/jitdump.h) of process `pid`, built record by record
// (x86-64, CLOCK_MONOTONIC timestamps).
class JitdumpBuilder {
 public:
  explicit JitdumpBuilder(int32_t pid);
  JitdumpBuilder& Load(uint64_t ts, uint64_t addr, const std::string& name, const std::string& code,
                       uint64_t index);
  JitdumpBuilder& Move(uint64_t ts, uint64_t from, uint64_t to, uint64_t size, uint64_t index);
  struct Line {
    uint64_t addr = 0;
    int32_t line = 0;
    std::string file;
  };
  JitdumpBuilder& DebugInfo(uint64_t ts, uint64_t code_addr, const std::vector<Line>& lines);
  [[nodiscard]] const std::string& bytes() const { return s_; }

 private:
  void U32(uint32_t v) { s_.append(reinterpret_cast<const char*>(&v), 4); }
  void U64(uint64_t v) { s_.append(reinterpret_cast<const char*>(&v), 8); }
  void Begin(uint32_t id, uint64_t ts);
  void End();
  std::string s_;
  uint32_t pid_;
  size_t start_ = 0;
};

}  // namespace ptsnap::decode::testing
