// Test support for the kernel tests: a "kernel world" built from real code.
//
// - TestKernel: the test kernel (tests/kernel/testkernel/*, linked at
//   0xffffffff81000000 with a module at 0xffffffffc0000000) read back from
//   its ELF, and what a machine running it would show: /proc/kallsyms,
//   /proc/modules and /proc/kcore (an ELF core whose PT_LOADs cover kernel
//   text, the module area and memory that is not text).
// - Walk: follows the real instruction bytes of the user program and the
//   kernel (decoded with Zydis) from an entry point, with a script for what
//   the code bytes alone cannot say (conditional outcomes, indirect targets,
//   where interrupts and faults arrive, when kernel text is patched). The
//   result is the ground truth: every executed instruction, in order.
// - EncodePt: turns that ground truth into the Intel PT a CPU would emit for
//   a tracing scope (user, kernel, user+kernel), with libipt's encoder and
//   the rules of /work/shared/reference/pt-emulation.md (TNT order and
//   flushing, return compression mirroring libipt's return stack, TIP.PGD
//   with a suppressed IP when tracing stops at a ring change, PSB+ with FUP).
// - CheckWithLibipt: decodes a stream with libipt's instruction decoder and
//   compares every instruction with the ground truth.
//
// Aborts (via the returned error) on anything the walk cannot follow, so a
// change in the test code cannot silently produce a wrong stream.
#pragma once

#include <cstdint>
#include <deque>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "ptsnap/result.h"
#include "trace/manifest.h"
#include "trace/perf_record.h"

namespace ptsnap::kworld {

inline bool IsKernelAddress(uint64_t ip) { return (ip >> 63) != 0; }

// One symbol of an ELF .symtab, with its kallsyms type letter.
struct ElfSym {
  uint64_t addr = 0, size = 0;
  char type = 't';  // T/t text, D/d data, R/r rodata, B/b bss
  std::string name;
};

// A PT_LOAD segment's bytes at its address.
struct Segment {
  uint64_t vaddr = 0;
  std::string bytes;
  bool exec = false;
};

// Code bytes by address; writable so tests can patch kernel text.
class Memory {
 public:
  void Add(Segment s) { segments_.push_back(std::move(s)); }
  // Copies up to `n` bytes at `addr` (stops at the end of the segment);
  // 0 when unmapped.
  size_t Read(uint64_t addr, uint8_t* out, size_t n) const;
  bool Write(uint64_t addr, const std::string& bytes);
  [[nodiscard]] const std::vector<Segment>& segments() const { return segments_; }

 private:
  std::vector<Segment> segments_;
};

// What an ELF file holds for the tests (libelf).
struct ElfImage {
  std::filesystem::path path;
  uint64_t entry = 0;
  std::vector<Segment> loads;  // PT_LOAD, filesz bytes
  std::vector<ElfSym> symbols;
  uint64_t Sym(const std::string& name) const;  // aborts when absent
};
Result<ElfImage> LoadElf(const std::filesystem::path& path);

inline constexpr uint64_t kModuleBase = 0xffffffffc0000000;
inline constexpr uint64_t kDirectMap = 0xffff888000000000;
inline constexpr char kModuleName[] = "ptsnap_kmod";
// Bytes placed in the direct-map PT_LOAD of the fake /proc/kcore: memory that
// is not text, which no copy may contain.
inline constexpr char kSecret[] = "PTSNAP-DIRECT-MAP-NOT-TEXT";

// The test kernel and the /proc files describing it.
struct TestKernel {
  ElfImage elf;
  // /proc/kallsyms: sorted by address, `_text`/`_stext`/`_etext`, functions
  // (T global, t local), data symbols; module symbols tagged [ptsnap_kmod].
  std::string Kallsyms(bool masked = false) const;
  // /proc/modules: one line for ptsnap_kmod at kModuleBase.
  std::string Modules() const;
  // /proc/kcore: ET_CORE, a PT_NOTE and PT_LOADs for kernel text (64 KiB
  // from _text), kernel data, the direct map (kSecret repeated) and the
  // module area (64 KiB). Written by this file, not by ptsnap's own writer.
  // `hole_size` bytes at `hole` are left out of the module area (code
  // loaded after the copy: a BPF program's).
  std::string Kcore(uint64_t hole = 0, uint64_t hole_size = 0) const;
};
Result<TestKernel> LoadTestKernel();  // the ELF built by meson (PTSNAP_TEST_KERNEL)
Result<ElfImage> LoadUserProgram();   // tests/kernel/programs/kuser.S (PTSNAP_KUSER)

// Writes a fake root for the test kernel into `root`: proc/kallsyms,
// proc/modules, proc/kcore (mode 0400), proc/sys/kernel/{osrelease,
// kptr_restrict,perf_event_paranoid}, proc/self/status (root's capabilities).
// `kcore_hole`/`kcore_hole_size`: as TestKernel::Kcore's hole.
Result<void> WriteFakeRoot(const TestKernel& k, const std::filesystem::path& root,
                           const std::string& osrelease = "6.1.0-ptsnap-test",
                           uint64_t kcore_hole = 0, uint64_t kcore_hole_size = 0);

// ---- Ground truth ----------------------------------------------------------

enum class InsnClass : uint8_t {
  kOther,
  kCond,          // Jcc
  kJump,          // direct jmp
  kJumpIndirect,  // jmp *x
  kCall,          // direct call
  kCallIndirect,  // call *x
  kReturn,        // near ret
  kFarCall,       // syscall (int, far call)
  kFarReturn,     // sysret, iret
};

struct Step {
  enum Kind : uint8_t { kInsn, kAsync, kPoke } kind = kInsn;
  uint64_t ip = 0;    // kInsn: the instruction; kAsync: the interrupted IP (`from`)
  uint64_t next = 0;  // kInsn: the next instruction executed; kAsync: the handler
  uint8_t size = 0;   // kInsn: length
  InsnClass cls = InsnClass::kOther;
  bool taken = false;      // kCond
  bool zero_disp = false;  // kCall to the next instruction (not on the return stack)
  bool psb = false;        // a PSB+ is written before this instruction
  uint64_t time = 0;       // TSC (== perf ns in these tests) when it executes
  std::string what;        // kAsync: "page fault"/"interrupt"; kPoke: description
  uint64_t poke_addr = 0;  // kPoke
  std::string old_bytes, new_bytes;
};

struct Script {
  std::map<uint64_t, std::deque<bool>> cond;  // Jcc outcomes by address; default not taken
  std::map<uint64_t, uint64_t> indirect;      // call/jmp *x targets by address
  uint64_t syscall_entry = 0;                 // MSR_LSTAR
  struct Event {
    uint64_t at = 0;  // before the nth execution of this IP
    int nth = 1;
    enum Kind { kFault, kInterrupt, kPoke } kind = kFault;
    uint64_t handler = 0;    // kFault/kInterrupt
    uint64_t poke_addr = 0;  // kPoke: writes `bytes` there
    std::string bytes;
    std::string what;
  };
  std::vector<Event> events;
  std::set<uint64_t> psb_at;  // a PSB+ before each execution of these IPs
  uint64_t stop = 0;          // the walk ends after this IP (next = 0: tracing stops)
  uint64_t tsc0 = 1000000;    // time of the first instruction
  uint64_t ns_per_insn = 10;
  size_t max_steps = 100000;
};

// Linear disassembly helpers for building scripts: the address of the
// `n`th (0-based) instruction of class `cls` from `from`, or of the `n`th
// instruction; 0 when not found within 256 instructions.
uint64_t FindInsn(const Memory& mem, uint64_t from, InsnClass cls, int n = 0);
uint64_t NthInsn(const Memory& mem, uint64_t from, int n);
// The executable PT_LOADs of the given files.
Memory CodeOf(const std::vector<const ElfImage*>& files);

// Walks from `start`. `mem` is updated by pokes (it is the live text).
Result<std::vector<Step>> Walk(Memory* mem, uint64_t start, Script script);

// ---- PT --------------------------------------------------------------------

struct EncodeStats {
  uint64_t traced_insns = 0;  // instructions a decoder must reproduce
  uint64_t packets = 0;
};
// The PT bytes for `steps` under `scope`.
std::string EncodePt(const std::vector<Step>& steps, trace::Scope scope,
                     EncodeStats* stats = nullptr);

// Decodes `pt` with libipt's instruction decoder over `mem` (pokes in
// `steps` are applied when the decode passes them) and compares each
// instruction with the traced steps. Returns the number of instructions that
// matched; an error names the first difference.
Result<uint64_t> CheckWithLibipt(const std::string& pt, Memory mem, const std::vector<Step>& steps,
                                 trace::Scope scope);

// ---- Scenarios and trace directories ---------------------------------------

// The run every kernel test decodes: kuser's main under the test kernel.
//   say_hello -> write(): syscall, entry_SYSCALL_64 -> do_syscall_64 ->
//     (indirect) ksys_write -> fdget_pos, vfs_write -> static-key jump ->
//     trace_vfs_write, (indirect) kmod_write [module] -> kmod_copy_from_user,
//     account_write; sysret back to say_hello, then check_result.
//   touch_page: page fault at its store -> asm_exc_page_fault ->
//     exc_page_fault -> handle_mm_fault; iret to the same store.
//   compute: timer interrupt before the second `decl` ->
//     asm_sysvec_apic_timer_interrupt -> sysvec_apic_timer_interrupt ->
//     (indirect) kmod_timer_tick [module]; iret.
//   say_hello again, finish; the walk stops at _start's exit syscall.
// With `poke`, the static key in vfs_write is turned off (jmp -> 5-byte
// nop) just before main's second say_hello, so the second write skips
// trace_vfs_write. PSB+ precede each call in main.
struct Scenario {
  TestKernel kernel;
  ElfImage user;
  Memory text;  // as at the start of the run (before any poke)
  std::vector<Step> steps;
  const Step* poke = nullptr;  // into steps
};
Result<Scenario> BuildScenario(bool poke);

struct TraceOptions {
  trace::Scope scope = trace::Scope::kUserKernel;
  bool kcore = true;              // run ptsnap's copier on a fake root (else "disabled")
  bool text_poke_record = true;   // write the poke (if any) as PERF_RECORD_TEXT_POKE
  std::string kcore_disabled_by;  // manifest reason when !kcore
  // >= 0: write the PT as that CPU's per-CPU stream (system-wide mode),
  // the thread named by the ITRACE_START on that CPU.
  int32_t per_cpu = -1;
  // More sideband (e.g. PERF_RECORD_KSYMBOL), merged in by time.
  std::vector<trace::Record> extra_sideband;
  // Module-area bytes missing from the fake /proc/kcore, so from the copy:
  // code loaded after the copy (TestKernel::Kcore).
  uint64_t kcore_hole = 0, kcore_hole_size = 0;
};
inline constexpr int32_t kPid = 4242;
// Writes a trace directory with TraceWriter: manifest, sideband (COMM exec,
// MMAP2 of kuser, ITRACE_START, TEXT_POKE), one PT stream for thread kPid,
// and (kcore) the copy made by record::CopyKcore from a fake root.
Result<void> WriteTrace(const Scenario& sc, const std::filesystem::path& dir,
                        const TraceOptions& opts);

}  // namespace ptsnap::kworld
