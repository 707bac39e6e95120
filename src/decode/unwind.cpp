#include "decode/unwind.h"

#include <dwarf.h>
#include <elfutils/libdwfl.h>
#include <fcntl.h>
#include <unistd.h>

#include <cstring>
#include <set>

namespace ptsnap::decode {

// What the thread callbacks read while one sample unwinds.
struct UnwindContext {
  std::map<std::string, base::UniqueFd>* files = nullptr;  // open files, by path
  const Sample* sample = nullptr;
  const std::vector<CodeMapping>* maps = nullptr;
  pid_t tid = 0;
  bool thread_given = false;  // next_thread: the one thread, once
  bool read_failed = false;   // a read outside the stack copy and the code
  UnwindResult* result = nullptr;
  size_t max_depth = 0;
};

struct UserUnwinder::Space {
  Dwfl* dwfl = nullptr;
  bool usable = false;  // modules reported and the state attached
  std::vector<CodeMapping> maps;
  UnwindContext ctx;  // the callbacks' argument, set per sample
  ~Space() {
    if (dwfl != nullptr) dwfl_end(dwfl);
  }
};

namespace {

const Dwfl_Callbacks kOfflineCallbacks = {
    // The ELF files are reported by path (dwfl_report_elf): no find_elf.
    .find_elf = nullptr,
    // Separate debug info (.debug_frame) by build-id or debuglink.
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
    .debuginfo_path = nullptr,
};

pid_t NextThread(Dwfl* /*dwfl*/, void* arg, void** thread_argp) {
  auto* ctx = static_cast<UnwindContext*>(arg);
  if (ctx->thread_given) return 0;
  ctx->thread_given = true;
  *thread_argp = ctx;
  return ctx->tid;
}

bool GetThread(Dwfl* /*dwfl*/, pid_t /*tid*/, void* arg, void** thread_argp) {
  *thread_argp = arg;
  return true;
}

bool MemoryRead(Dwfl* /*dwfl*/, Dwarf_Addr addr, Dwarf_Word* result, void* arg);

// perf register index -> DWARF x86-64 register number (the System V psABI's
// table: rax rdx rcx rbx rsi rdi rbp rsp r8..r15, then the return address,
// rip, as 16).
constexpr uint8_t kDwarfToPerf[17] = {
    kPerfRegAx,     kPerfRegDx,     kPerfRegCx,     kPerfRegBx,     kPerfRegSi,     kPerfRegDi,
    kPerfRegBp,     kPerfRegSp,     kPerfRegR8,     kPerfRegR8 + 1, kPerfRegR8 + 2, kPerfRegR8 + 3,
    kPerfRegR8 + 4, kPerfRegR8 + 5, kPerfRegR8 + 6, kPerfRegR15,    kPerfRegIp};

bool SetInitialRegisters(Dwfl_Thread* thread, void* thread_arg) {
  auto* ctx = static_cast<UnwindContext*>(thread_arg);
  const Sample& s = *ctx->sample;
  Dwarf_Word regs[17];
  for (int i = 0; i < 17; ++i) {
    // Registers not recorded are 0: CFI rules that need them give garbage,
    // which the unwind stops at.
    regs[i] = (s.regs_mask >> kDwarfToPerf[i] & 1) != 0 ? s.regs[kDwarfToPerf[i]] : 0;
  }
  if (!dwfl_thread_state_registers(thread, 0, 17, regs)) return false;
  dwfl_thread_state_register_pc(thread, s.regs[kPerfRegIp]);
  return true;
}

const Dwfl_Thread_Callbacks kThreadCallbacks = {
    .next_thread = NextThread,
    .get_thread = GetThread,
    .memory_read = MemoryRead,
    .set_initial_registers = SetInitialRegisters,
    .detach = nullptr,
    .thread_detach = nullptr,
};

int OnFrame(Dwfl_Frame* state, void* arg) {
  auto* ctx = static_cast<UnwindContext*>(arg);
  Dwarf_Addr pc = 0;
  bool activation = false;
  if (!dwfl_frame_pc(state, &pc, &activation)) return DWARF_CB_ABORT;
  if (pc == 0) return DWARF_CB_ABORT;  // the outermost frame's return address
  if (ctx->result->frames.size() >= ctx->max_depth) {
    ctx->result->truncated = true;
    return DWARF_CB_ABORT;
  }
  // Not an activation: a return address (the caller's next instruction).
  ctx->result->frames.push_back({pc, !activation});
  return DWARF_CB_OK;
}

}  // namespace

namespace {

// Serves the stack copy [sp, sp + dyn_size), else the bytes of a mapped
// file's code (a CFI expression may read them; PLT stubs have none).
bool ReadUnwindMemory(UnwindContext* ctx, uint64_t addr, uint64_t* result) {
  const Sample& s = *ctx->sample;
  uint64_t sp = s.regs[kPerfRegSp];
  if (addr >= sp && addr - sp <= s.stack_dyn_size && s.stack_dyn_size - (addr - sp) >= 8) {
    std::memcpy(result, s.stack.data() + (addr - sp), 8);
    return true;
  }
  for (const CodeMapping& m : *ctx->maps) {
    if (addr < m.start || addr + 8 > m.end) continue;
    auto& fd = (*ctx->files)[m.file.string()];
    if (!fd) fd = base::UniqueFd(::open(m.file.c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) break;
    if (::pread(fd.get(), result, 8, static_cast<off_t>(addr - m.start + m.pgoff)) == 8) {
      return true;
    }
    break;
  }
  ctx->read_failed = true;
  return false;
}

bool MemoryRead(Dwfl* /*dwfl*/, Dwarf_Addr addr, Dwarf_Word* result, void* arg) {
  uint64_t v = 0;
  if (!ReadUnwindMemory(static_cast<UnwindContext*>(arg), addr, &v)) return false;
  *result = v;
  return true;
}
}  // namespace

UserUnwinder::UserUnwinder(MappingsFn mappings, Symbolizer* symbolizer)
    : mappings_(std::move(mappings)), symbolizer_(symbolizer) {}

UserUnwinder::~UserUnwinder() = default;

UserUnwinder::Space* UserUnwinder::GetSpace(int32_t space) {
  auto it = spaces_.find(space);
  if (it != spaces_.end()) return it->second.get();
  auto sp = std::make_unique<Space>();
  sp->maps = mappings_(space);
  sp->ctx.files = &files_;
  sp->ctx.maps = &sp->maps;
  sp->dwfl = dwfl_begin(&kOfflineCallbacks);
  if (sp->dwfl != nullptr) {
    dwfl_report_begin(sp->dwfl);
    std::set<std::string> reported;
    size_t modules = 0;
    for (const CodeMapping& m : sp->maps) {
      // One module per file, at the load bias its mapping implies: the
      // mapping puts file offset pgoff at `start`, and the ELF's load
      // segments say which virtual address that offset has.
      if (!reported.insert(m.file.string()).second) continue;
      const elf::SymbolFile* elf = symbolizer_->LoadElf(m.file);
      if (elf == nullptr) continue;
      std::optional<uint64_t> vaddr = elf->OffsetToVaddr(m.pgoff);
      if (!vaddr) continue;
      uint64_t bias = m.start - *vaddr;
      if (dwfl_report_elf(sp->dwfl, m.file.filename().c_str(), m.file.c_str(), -1, bias, true) !=
          nullptr) {
        modules++;
      }
    }
    dwfl_report_end(sp->dwfl, nullptr, nullptr);
    // The architecture (x86-64) comes from the first module's ELF.
    sp->usable =
        modules != 0 && dwfl_attach_state(sp->dwfl, nullptr, space, &kThreadCallbacks, &sp->ctx);
  }
  return spaces_.emplace(space, std::move(sp)).first->second.get();
}

UnwindResult UserUnwinder::Unwind(int32_t space, const Sample& s, size_t max_depth) {
  UnwindResult r;
  constexpr uint64_t kNeeded = (1ull << kPerfRegIp) | (1ull << kPerfRegSp);
  if (s.regs_abi == PERF_SAMPLE_REGS_ABI_NONE || (s.regs_mask & kNeeded) != kNeeded) {
    r.truncated = true;
    r.error = "no user registers";
    return r;
  }
  Space* sp = GetSpace(space);
  if (!sp->usable) {
    // Without modules, only the IP is known.
    if (max_depth > 0) r.frames.push_back({s.regs[kPerfRegIp], false});
    r.truncated = true;
    r.error = "no module with CFI for this process";
    return r;
  }
  sp->ctx.sample = &s;
  sp->ctx.tid = static_cast<pid_t>(s.tid != 0 ? s.tid : 1);
  sp->ctx.thread_given = false;
  sp->ctx.read_failed = false;
  sp->ctx.result = &r;
  sp->ctx.max_depth = max_depth;
  int rc = dwfl_getthread_frames(sp->dwfl, sp->ctx.tid, OnFrame, &sp->ctx);
  if (r.frames.empty() && max_depth > 0) r.frames.push_back({s.regs[kPerfRegIp], false});
  // libdwfl ends some complete unwinds with an error too (its header says
  // to treat that as the end); a read that fell outside the stack copy, or
  // the depth cap, is a truncation for certain.
  if (sp->ctx.read_failed) r.truncated = true;
  if (rc != 0 && !r.truncated) {
    const char* msg = dwfl_errmsg(-1);
    r.error = msg != nullptr ? msg : "";
  }
  sp->ctx.sample = nullptr;
  sp->ctx.result = nullptr;
  return r;
}

}  // namespace ptsnap::decode
