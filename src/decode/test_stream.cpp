#include "decode/test_stream.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "ptsnap/result.h"

#ifndef PTSNAP_DECODE_CALLS
#define PTSNAP_DECODE_CALLS ""
#endif
#ifndef PTSNAP_DECODE_REPLACED
#define PTSNAP_DECODE_REPLACED ""
#endif
#ifndef PTSNAP_DECODE_MARKS
#define PTSNAP_DECODE_MARKS ""
#endif

namespace ptsnap::decode::testing {

using emulate::IpCompression;
using emulate::IpPacket;

void StreamBuilder::FlushTnt() {
  if (tnt_count_ == 0) return;
  out_.Tnt(tnt_bits_, tnt_count_);
  tnt_bits_ = 0;
  tnt_count_ = 0;
}

void StreamBuilder::Tnt(bool taken) {
  // The oldest branch is the most significant of the bit_size payload bits.
  tnt_bits_ = (tnt_bits_ << 1) | (taken ? 1 : 0);
  if (++tnt_count_ == 6) FlushTnt();
}

void StreamBuilder::Psb(uint64_t tsc) {
  FlushTnt();
  out_.Psb();
  out_.Tsc(tsc);
  out_.ModeExec64();
  out_.PsbEnd();
}

void StreamBuilder::PsbWithoutTsc() {
  FlushTnt();
  out_.Psb();
  out_.ModeExec64();
  out_.PsbEnd();
}

void StreamBuilder::Tsc(uint64_t tsc) {
  FlushTnt();
  out_.Tsc(tsc);
}

void StreamBuilder::Tip(uint64_t ip) {
  FlushTnt();
  out_.Ip(IpPacket::kTip, ip, IpCompression::kSext48);
}
void StreamBuilder::TipPge(uint64_t ip) {
  FlushTnt();
  out_.Ip(IpPacket::kTipPge, ip, IpCompression::kSext48);
}
void StreamBuilder::TipPgd() {
  FlushTnt();
  out_.Ip(IpPacket::kTipPgd, 0, IpCompression::kSuppressed);
}
void StreamBuilder::TipPgd(uint64_t ip) {
  FlushTnt();
  out_.Ip(IpPacket::kTipPgd, ip, IpCompression::kSext48);
}
void StreamBuilder::Fup(uint64_t ip) {
  FlushTnt();
  out_.Ip(IpPacket::kFup, ip, IpCompression::kSext48);
}
void StreamBuilder::Ovf() {
  FlushTnt();
  out_.Ovf();
}
void StreamBuilder::ModeTsx(bool intx, bool abrt) {
  FlushTnt();
  out_.ModeTsx(intx, abrt);
}
void StreamBuilder::Raw(const std::string& bytes) {
  FlushTnt();
  out_.Raw(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}
std::string StreamBuilder::Finish() {
  FlushTnt();
  auto bytes = out_.bytes();
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

uint64_t CallsProgram::Sym(const std::string& name) const {
  auto it = labels.find(name);
  if (it != labels.end()) return it->second;
  std::fprintf(stderr, "calls program has no symbol %s\n", name.c_str());
  std::abort();
}

CallsProgram LoadCallsProgram() { return LoadProgram(PTSNAP_DECODE_CALLS); }
CallsProgram LoadReplacedProgram() { return LoadProgram(PTSNAP_DECODE_REPLACED); }
CallsProgram LoadMarksProgram() { return LoadProgram(PTSNAP_DECODE_MARKS); }

CallsProgram LoadProgram(const std::string& path) {
  CallsProgram p;
  p.path = path;
  auto elf = elf::SymbolFile::Open(p.path);
  if (!elf) {
    std::fprintf(stderr, "%s\n", elf.error().ToString().c_str());
    std::abort();
  }
  p.symbols = elf->symbols();
  for (const auto& s : p.symbols.symbols()) p.labels[s.name] = s.start;
  // Labels (main_landing, ...) are not function symbols: ask nm, once.
  std::string cmd = "nm " + p.path;
  if (FILE* f = ::popen(cmd.c_str(), "r")) {
    char line[512];
    while (std::fgets(line, sizeof line, f) != nullptr) {
      unsigned long long addr = 0;
      char type = 0;
      char sym[400];
      if (std::sscanf(line, "%llx %c %399s", &addr, &type, sym) == 3) p.labels.emplace(sym, addr);
    }
    ::pclose(f);
  }
  return p;
}

void FibTnt(StreamBuilder& b, int n) {
  b.Tnt(n < 2);  // jl 1f
  if (n >= 2) {
    FibTnt(b, n - 1);
    FibTnt(b, n - 2);
  }
  b.Tnt(true);  // compressed ret
}

uint64_t CallsUpToFirstSyscall(StreamBuilder& b, const CallsProgram& p, uint64_t t, uint64_t step) {
  b.Psb(t);
  b.TipPge(p.Sym("_start"));
  b.Tsc(t += step);
  b.Tnt(true);  // leaf -> mid
  b.Tnt(true);  // mid -> main
  b.Tsc(t += step);
  b.Tnt(true);  // leaf (via tail_caller) -> main
  b.Tsc(t += step);
  b.Tip(p.Sym("leaf"));  // call *%rax
  b.Tnt(true);           // leaf -> main
  return t;
}

std::string CallsProgramStream(const CallsProgram& p, uint64_t tsc0, uint64_t step) {
  StreamBuilder b;
  uint64_t t = CallsUpToFirstSyscall(b, p, tsc0, step);
  b.Tsc(t += step);
  b.TipPgd();  // syscall (getpid)
  b.Tsc(t += step);
  b.TipPge(p.Sym("main_after_syscall"));
  b.Tsc(t += step);
  FibTnt(b, 6);
  b.Tsc(t += step);
  b.Tip(p.Sym("main_landing"));  // lj2: jmp *%rcx
  b.Tsc(t += step);
  b.Tip(p.Sym("_start") + 5);  // main's ret: not the return-stack address, so a TIP
  b.Tsc(t += step);
  b.TipPgd();  // exit syscall
  return b.Finish();
}

trace::Manifest CallsManifest(int32_t pid) {
  trace::Manifest m;
  m.source = trace::Source::kEmulated;
  m.state = trace::State::kComplete;
  m.pids = {pid};
  m.cpu.vendor = "GenuineIntel";
  m.cpu.family = 6;
  m.cpu.model = 85;
  m.cpu.stepping = 4;
  m.pt.tsc = true;
  m.scope = trace::Scope::kUser;
  m.mode = trace::Mode::kFull;
  m.time_conv.time_mult = 1;
  m.time_conv.time_shift = 0;
  m.time_conv.time_zero = 0;
  m.command = {"decode_calls"};
  return m;
}

std::vector<trace::Record> CallsSideband(const CallsProgram& p, int32_t pid) {
  return ProgramSideband(p, pid, "decode_calls", 1);
}

std::vector<trace::Record> ProgramSideband(const CallsProgram& p, int32_t pid,
                                           const std::string& comm_name, uint64_t time, bool exec) {
  std::vector<trace::Record> out;
  auto upid = static_cast<uint32_t>(pid);
  if (exec) {
    trace::Record comm;
    comm.type = PERF_RECORD_COMM;
    comm.misc = trace::kMiscCommExec;
    comm.sample_id = {upid, upid, time, 0, 0, 0};
    comm.body = trace::Comm{upid, upid, comm_name, true};
    out.push_back(comm);
  }
  auto elf = elf::SymbolFile::Open(p.path);
  for (const auto& seg : elf->segments()) {
    if (!seg.exec) continue;
    trace::Record r;
    r.type = PERF_RECORD_MMAP2;
    r.sample_id = {upid, upid, time + 1, 0, 0, 0};
    trace::Mmap2 m;
    m.pid = m.tid = upid;
    m.addr = seg.vaddr & ~uint64_t{0xfff};
    m.pgoff = seg.offset & ~uint64_t{0xfff};
    m.len = ((seg.vaddr + seg.memsz + 0xfff) & ~uint64_t{0xfff}) - m.addr;
    m.prot = 5;   // r-x
    m.flags = 2;  // MAP_PRIVATE
    m.filename = p.path;
    r.body = m;
    out.push_back(r);
  }
  return out;
}

trace::Record SwitchRecord(uint32_t cpu, uint64_t time, bool out,
                           std::pair<uint32_t, uint32_t> self,
                           std::pair<uint32_t, uint32_t> other) {
  trace::Record r;
  r.type = PERF_RECORD_SWITCH_CPU_WIDE;
  r.misc = out ? trace::kMiscSwitchOut : 0;
  r.sample_id = {self.first, self.second, time, cpu, 0, 0};
  trace::Switch s;
  s.out = out;
  s.cpu_wide = true;
  s.next_prev_pid = other.first;
  s.next_prev_tid = other.second;
  r.body = s;
  return r;
}

trace::Record ItraceStartRecord(uint32_t cpu, uint64_t time, uint32_t pid, uint32_t tid) {
  trace::Record r;
  r.type = PERF_RECORD_ITRACE_START;
  r.sample_id = {pid, tid, time, cpu, 0, 0};
  r.body = trace::ItraceStart{pid, tid};
  return r;
}

uint64_t MapSrcline(Symbolizer* s, int32_t pid, const std::string& path) {
  s->AddMapping(pid, kSrclineBase, 0x10000, 0, path, "srcline");
  auto elf = elf::SymbolFile::Open(path);
  if (!elf) return 0;
  for (const auto& sym : elf->symbols().symbols()) {
    if (sym.name == "srcline_target") return kSrclineBase + sym.start;
  }
  return 0;
}

JitdumpBuilder::JitdumpBuilder(int32_t pid) : pid_(static_cast<uint32_t>(pid)) {
  U32(0x4A695444), U32(1), U32(40), U32(62), U32(0), U32(pid_), U64(0), U64(0);
}

void JitdumpBuilder::Begin(uint32_t id, uint64_t ts) {
  start_ = s_.size();
  U32(id), U32(0), U64(ts);
}

void JitdumpBuilder::End() {
  const auto size = static_cast<uint32_t>(s_.size() - start_);
  std::memcpy(&s_[start_ + 4], &size, 4);
}

JitdumpBuilder& JitdumpBuilder::Load(uint64_t ts, uint64_t addr, const std::string& name,
                                     const std::string& code, uint64_t index) {
  Begin(0, ts);
  U32(pid_), U32(pid_), U64(addr), U64(addr), U64(code.size()), U64(index);
  s_ += name;
  s_.push_back('\0');
  s_ += code;
  End();
  return *this;
}

JitdumpBuilder& JitdumpBuilder::Move(uint64_t ts, uint64_t from, uint64_t to, uint64_t size,
                                     uint64_t index) {
  Begin(1, ts);
  U32(pid_), U32(pid_), U64(0), U64(from), U64(to), U64(size), U64(index);
  End();
  return *this;
}

JitdumpBuilder& JitdumpBuilder::DebugInfo(uint64_t ts, uint64_t code_addr,
                                          const std::vector<Line>& lines) {
  Begin(2, ts);
  U64(code_addr), U64(lines.size());
  for (const Line& l : lines) {
    U64(l.addr), U32(static_cast<uint32_t>(l.line)), U32(0);
    s_ += l.file;
    s_.push_back('\0');
  }
  End();
  return *this;
}

}  // namespace ptsnap::decode::testing
