#include "kernel/kernel_world.h"

#include <Zydis/Zydis.h>
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <intel-pt.h>
#include <libelf.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "base/file_util.h"
#include "base/root_path.h"
#include "emulate/pt_packets.h"
#include "record/kcore_copy.h"
#include "sys/kcore_image.h"
#include "trace/perf_record.h"
#include "trace/trace_dir.h"

#ifndef PTSNAP_TEST_KERNEL
#define PTSNAP_TEST_KERNEL ""
#endif
#ifndef PTSNAP_KUSER
#define PTSNAP_KUSER ""
#endif

namespace ptsnap::kworld {

namespace {

std::string Hex16(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

std::string HexAddr(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

}  // namespace

size_t Memory::Read(uint64_t addr, uint8_t* out, size_t n) const {
  for (const auto& s : segments_) {
    if (addr < s.vaddr || addr >= s.vaddr + s.bytes.size()) continue;
    size_t k = std::min<size_t>(n, s.vaddr + s.bytes.size() - addr);
    std::memcpy(out, s.bytes.data() + (addr - s.vaddr), k);
    return k;
  }
  return 0;
}

bool Memory::Write(uint64_t addr, const std::string& bytes) {
  for (auto& s : segments_) {
    if (addr < s.vaddr || addr + bytes.size() > s.vaddr + s.bytes.size()) continue;
    std::memcpy(s.bytes.data() + (addr - s.vaddr), bytes.data(), bytes.size());
    return true;
  }
  return false;
}

uint64_t ElfImage::Sym(const std::string& name) const {
  for (const auto& s : symbols) {
    if (s.name == name) return s.addr;
  }
  std::fprintf(stderr, "%s: no symbol %s\n", path.c_str(), name.c_str());
  std::abort();
}

Result<ElfImage> LoadElf(const std::filesystem::path& path) {
  PTSNAP_ASSIGN_OR_RETURN(std::string data, base::ReadFile(path));
  ElfImage img;
  img.path = path;
  elf_version(EV_CURRENT);
  Elf* elf = elf_memory(data.data(), data.size());
  if (elf == nullptr) return Error(path.string() + ": not ELF");
  GElf_Ehdr eh;
  if (gelf_getehdr(elf, &eh) == nullptr) {
    elf_end(elf);
    return Error(path.string() + ": no ELF header");
  }
  img.entry = eh.e_entry;
  size_t phnum = 0;
  elf_getphdrnum(elf, &phnum);
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr ph;
    if (gelf_getphdr(elf, static_cast<int>(i), &ph) == nullptr || ph.p_type != PT_LOAD) continue;
    if (ph.p_offset + ph.p_filesz > data.size()) continue;
    img.loads.push_back(
        {ph.p_vaddr, data.substr(ph.p_offset, ph.p_filesz), (ph.p_flags & PF_X) != 0});
  }
  Elf_Scn* scn = nullptr;
  while ((scn = elf_nextscn(elf, scn)) != nullptr) {
    GElf_Shdr sh;
    if (gelf_getshdr(scn, &sh) == nullptr || sh.sh_type != SHT_SYMTAB) continue;
    Elf_Data* d = elf_getdata(scn, nullptr);
    size_t n = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
    for (size_t i = 0; i < n; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(d, static_cast<int>(i), &sym) == nullptr) continue;
      const char* name = elf_strptr(elf, sh.sh_link, sym.st_name);
      if (name == nullptr || *name == '\0' || sym.st_shndx == SHN_UNDEF) continue;
      if (sym.st_shndx == SHN_ABS && GELF_ST_TYPE(sym.st_info) != STT_NOTYPE) continue;
      ElfSym s;
      s.addr = sym.st_value;
      s.size = sym.st_size;
      s.name = name;
      bool global = GELF_ST_BIND(sym.st_info) != STB_LOCAL;
      int type = GELF_ST_TYPE(sym.st_info);
      if (type == STT_FUNC) {
        s.type = global ? 'T' : 't';
      } else if (type == STT_OBJECT) {
        // .rodata in the first data page, the rest .data/.bss.
        bool ro = s.name == "sys_call_table";
        s.type = ro ? (global ? 'R' : 'r') : (global ? 'D' : 'd');
      } else if (s.name == "_text" || s.name == "_stext" || s.name == "_etext") {
        s.type = 'T';
      } else {
        s.type = '?';  // labels (e.g. jump sites): not in kallsyms
      }
      img.symbols.push_back(s);
    }
  }
  elf_end(elf);
  std::stable_sort(img.symbols.begin(), img.symbols.end(),
                   [](const ElfSym& a, const ElfSym& b) { return a.addr < b.addr; });
  return img;
}

std::string TestKernel::Kallsyms(bool masked) const {
  std::string out;
  for (const auto& s : elf.symbols) {
    if (s.type == '?') continue;
    out += Hex16(masked ? 0 : s.addr) + " " + s.type + " " + s.name;
    if (s.addr >= kModuleBase) out += std::string("\t[") + kModuleName + "]";
    out += "\n";
  }
  return out;
}

std::string TestKernel::Modules() const {
  return std::string(kModuleName) + " 16384 0 - Live " + HexAddr(kModuleBase) + "\n";
}

std::string TestKernel::Kcore(uint64_t hole, uint64_t hole_size) const {
  // Regions as a running kernel's /proc/kcore shows them (fs/proc/kcore.c):
  // KCORE_TEXT, KCORE_RAM (direct map), KCORE_VMALLOC (modules); data after
  // text is part of the kernel image mapping.
  std::vector<std::pair<uint64_t, std::string>> regions;
  auto from_elf = [&](uint64_t vaddr, size_t size) {
    std::string b(size, '\0');
    for (const auto& l : elf.loads) {
      if (l.vaddr >= vaddr && l.vaddr < vaddr + size) {
        size_t k = std::min(l.bytes.size(), size - (l.vaddr - vaddr));
        std::memcpy(b.data() + (l.vaddr - vaddr), l.bytes.data(), k);
      }
    }
    return b;
  };
  const uint64_t text = elf.Sym("_text");
  regions.push_back({text, from_elf(text, 0x10000)});
  regions.push_back({0xffffffff82000000, from_elf(0xffffffff82000000, 0x1000)});
  std::string ram;
  while (ram.size() < 0x4000) ram += kSecret;
  regions.push_back({kDirectMap, ram});
  const std::string modules = from_elf(kModuleBase, 0x10000);
  if (hole_size != 0 && hole >= kModuleBase && hole + hole_size <= kModuleBase + modules.size()) {
    const size_t cut = hole - kModuleBase, resume = cut + hole_size;
    if (cut > 0) regions.push_back({kModuleBase, modules.substr(0, cut)});
    regions.push_back({hole + hole_size, modules.substr(resume)});
  } else {
    regions.push_back({kModuleBase, modules});
  }

  // A PT_NOTE like the kernel's (CORE/NT_PRSTATUS, zeroed).
  std::string note;
  {
    Elf64_Nhdr nh{};
    nh.n_namesz = 5;
    nh.n_descsz = 336;  // sizeof(struct elf_prstatus) on x86-64
    nh.n_type = NT_PRSTATUS;
    note.append(reinterpret_cast<const char*>(&nh), sizeof nh);
    note.append("CORE\0\0\0\0", 8);
    note.append(336, '\0');
  }
  std::vector<sys::CoreSegment> segments = {{.type = PT_NOTE, .bytes = note}};
  for (const auto& [vaddr, bytes] : regions) {
    segments.push_back({.vaddr = vaddr,
                        .paddr = vaddr >= kModuleBase ? 0 : vaddr - 0xffffffff80000000,
                        .flags = PF_R | PF_W | PF_X,  // kcore marks every load RWX
                        .bytes = bytes});
  }
  return sys::BuildCoreImage(segments);
}

Result<TestKernel> LoadTestKernel() {
  TestKernel k;
  PTSNAP_ASSIGN_OR_RETURN(k.elf, LoadElf(PTSNAP_TEST_KERNEL));
  return k;
}

Result<ElfImage> LoadUserProgram() { return LoadElf(PTSNAP_KUSER); }

Result<void> WriteFakeRoot(const TestKernel& k, const std::filesystem::path& root,
                           const std::string& osrelease, uint64_t kcore_hole,
                           uint64_t kcore_hole_size) {
  std::error_code ec;
  std::filesystem::create_directories(root / "proc/sys/kernel", ec);
  std::filesystem::create_directories(root / "proc/self", ec);
  std::filesystem::create_directories(root / "sys/kernel", ec);
  if (ec) return Error::FromErrno("creating " + root.string(), ec.value());
  PTSNAP_TRY(base::WriteFileAtomic(root / "proc/kallsyms", k.Kallsyms(), 0444));
  PTSNAP_TRY(base::WriteFileAtomic(root / "proc/modules", k.Modules(), 0444));
  PTSNAP_TRY(
      base::WriteFileAtomic(root / "proc/kcore", k.Kcore(kcore_hole, kcore_hole_size), 0400));
  PTSNAP_TRY(base::WriteFileAtomic(root / "proc/sys/kernel/osrelease", osrelease + "\n", 0444));
  PTSNAP_TRY(base::WriteFileAtomic(root / "proc/sys/kernel/kptr_restrict", "0\n", 0444));
  PTSNAP_TRY(base::WriteFileAtomic(root / "proc/sys/kernel/perf_event_paranoid", "2\n", 0444));
  PTSNAP_TRY(base::WriteFileAtomic(root / "proc/self/status",
                                   "Name:\tptsnap\nUid:\t0\t0\t0\t0\nCapInh:\t0000000000000000\n"
                                   "CapPrm:\t000001ffffffffff\nCapEff:\t000001ffffffffff\n",
                                   0444));
  return Ok();
}

// ---- Walk ------------------------------------------------------------------

namespace {

struct Decoded {
  uint8_t size = 0;
  InsnClass cls = InsnClass::kOther;
  uint64_t target = 0;  // direct branches
};

Result<Decoded> DecodeAt(const Memory& mem, uint64_t ip) {
  static ZydisDecoder dec = [] {
    ZydisDecoder d;
    ZydisDecoderInit(&d, ZYDIS_MACHINE_MODE_LONG_64, ZYDIS_STACK_WIDTH_64);
    return d;
  }();
  uint8_t buf[16];
  size_t n = mem.Read(ip, buf, sizeof buf);
  if (n == 0) return Error("no code at " + HexAddr(ip));
  ZydisDecodedInstruction insn;
  ZydisDecodedOperand ops[ZYDIS_MAX_OPERAND_COUNT];
  if (!ZYAN_SUCCESS(ZydisDecoderDecodeFull(&dec, buf, n, &insn, ops))) {
    return Error("undecodable instruction at " + HexAddr(ip));
  }
  Decoded d;
  d.size = insn.length;
  bool direct = insn.operand_count_visible > 0 && ops[0].type == ZYDIS_OPERAND_TYPE_IMMEDIATE &&
                ops[0].imm.is_relative;
  if (direct) {
    ZyanU64 t = 0;
    ZydisCalcAbsoluteAddress(&insn, &ops[0], ip, &t);
    d.target = t;
  }
  switch (insn.mnemonic) {
    case ZYDIS_MNEMONIC_CALL: d.cls = direct ? InsnClass::kCall : InsnClass::kCallIndirect; break;
    case ZYDIS_MNEMONIC_JMP: d.cls = direct ? InsnClass::kJump : InsnClass::kJumpIndirect; break;
    case ZYDIS_MNEMONIC_RET: d.cls = InsnClass::kReturn; break;
    case ZYDIS_MNEMONIC_SYSCALL: d.cls = InsnClass::kFarCall; break;
    case ZYDIS_MNEMONIC_SYSRET:
    case ZYDIS_MNEMONIC_IRETQ: d.cls = InsnClass::kFarReturn; break;
    default:
      if (insn.meta.category == ZYDIS_CATEGORY_COND_BR) {
        d.cls = InsnClass::kCond;
      } else if (insn.meta.category == ZYDIS_CATEGORY_INTERRUPT ||
                 insn.meta.category == ZYDIS_CATEGORY_SYSCALL ||
                 insn.meta.category == ZYDIS_CATEGORY_SYSRET ||
                 insn.meta.category == ZYDIS_CATEGORY_UNCOND_BR ||
                 insn.meta.category == ZYDIS_CATEGORY_CALL ||
                 insn.meta.category == ZYDIS_CATEGORY_RET) {
        return Error("branch the walk does not model at " + HexAddr(ip));
      }
  }
  return d;
}

}  // namespace

uint64_t FindInsn(const Memory& mem, uint64_t from, InsnClass cls, int n) {
  uint64_t ip = from;
  for (int i = 0; i < 256; ++i) {
    auto d = DecodeAt(mem, ip);
    if (!d) return 0;
    if (d->cls == cls && n-- == 0) return ip;
    ip += d->size;
  }
  return 0;
}

uint64_t NthInsn(const Memory& mem, uint64_t from, int n) {
  uint64_t ip = from;
  for (int i = 0; i < n; ++i) {
    auto d = DecodeAt(mem, ip);
    if (!d) return 0;
    ip += d->size;
  }
  return ip;
}

Memory CodeOf(const std::vector<const ElfImage*>& files) {
  Memory m;
  for (const ElfImage* f : files) {
    for (const auto& l : f->loads) {
      if (l.exec) m.Add(l);
    }
  }
  return m;
}

Result<std::vector<Step>> Walk(Memory* mem, uint64_t start, Script script) {
  std::vector<Step> out;
  std::vector<uint64_t> calls;  // near return addresses (the real stack)
  std::vector<uint64_t> far;    // sysret/iret destinations
  std::map<uint64_t, int> seen;
  std::vector<bool> fired(script.events.size(), false);
  uint64_t ip = start;
  uint64_t t = script.tsc0;
  bool last = false;
  while (!last) {
    last = ip == script.stop;  // executed, then the trace ends
    if (out.size() >= script.max_steps) return Error("walk did not reach the stop address");
    int nth = ++seen[ip];
    bool psb = script.psb_at.count(ip) != 0;
    bool redirected = false;
    for (size_t e = 0; e < script.events.size(); ++e) {
      const auto& ev = script.events[e];
      if (fired[e] || ev.at != ip || ev.nth != nth) continue;
      fired[e] = true;
      if (ev.kind == Script::Event::kPoke) {
        Step p;
        p.kind = Step::kPoke;
        p.ip = ip;
        p.time = t;
        p.what = ev.what;
        p.poke_addr = ev.poke_addr;
        p.old_bytes.resize(ev.bytes.size());
        mem->Read(ev.poke_addr, reinterpret_cast<uint8_t*>(p.old_bytes.data()), ev.bytes.size());
        p.new_bytes = ev.bytes;
        if (!mem->Write(ev.poke_addr, ev.bytes)) return Error("poke outside text");
        out.push_back(p);
        t += script.ns_per_insn;
      } else {
        // The instruction at `ip` has not executed: a fault re-executes it
        // after iret, an interrupt runs it next.
        Step a;
        a.kind = Step::kAsync;
        a.ip = ip;
        a.next = ev.handler;
        a.time = t;
        a.what = ev.kind == Script::Event::kFault ? "page fault" : "interrupt";
        a.psb = psb;
        out.push_back(a);
        far.push_back(ip);
        ip = ev.handler;
        t += script.ns_per_insn;
        redirected = true;
        --seen[a.ip];  // it runs after the iret
        break;
      }
    }
    if (redirected) {
      last = false;
      continue;
    }
    PTSNAP_ASSIGN_OR_RETURN(Decoded d, DecodeAt(*mem, ip));
    Step s;
    s.ip = ip;
    s.size = d.size;
    s.cls = d.cls;
    s.time = t;
    s.psb = psb;
    uint64_t fall = ip + d.size;
    switch (d.cls) {
      case InsnClass::kOther: s.next = fall; break;
      case InsnClass::kCond: {
        auto& q = script.cond[ip];
        s.taken = !q.empty() && q.front();
        if (!q.empty()) q.pop_front();
        s.next = s.taken ? d.target : fall;
        break;
      }
      case InsnClass::kJump: s.next = d.target; break;
      case InsnClass::kCall:
        s.zero_disp = d.target == fall;
        s.next = d.target;
        calls.push_back(fall);
        break;
      case InsnClass::kJumpIndirect:
      case InsnClass::kCallIndirect: {
        auto it = script.indirect.find(ip);
        if (it == script.indirect.end())
          return Error("no target for the indirect branch at " + HexAddr(ip));
        s.next = it->second;
        if (d.cls == InsnClass::kCallIndirect) calls.push_back(fall);
        break;
      }
      case InsnClass::kReturn:
        if (calls.empty()) return Error("return with an empty stack at " + HexAddr(ip));
        s.next = calls.back();
        calls.pop_back();
        break;
      case InsnClass::kFarCall:
        if (script.syscall_entry == 0) return Error("syscall without an entry point");
        s.next = script.syscall_entry;
        far.push_back(fall);
        break;
      case InsnClass::kFarReturn:
        if (far.empty()) return Error("sysret/iret with nothing to return to at " + HexAddr(ip));
        s.next = far.back();
        far.pop_back();
        break;
    }
    if (last) s.next = 0;  // tracing ends here (the process exits)
    out.push_back(s);
    ip = s.next;
    t += script.ns_per_insn;
  }
  return out;
}

// ---- Encode ----------------------------------------------------------------

namespace {

class Encoder {
 public:
  explicit Encoder(trace::Scope scope) : scope_(scope) {}

  bool Traced(uint64_t ip) const {
    switch (scope_) {
      case trace::Scope::kUser: return !IsKernelAddress(ip);
      case trace::Scope::kKernel: return IsKernelAddress(ip);
      case trace::Scope::kUserKernel: return true;
    }
    return false;
  }

  void Psb(uint64_t tsc, uint64_t fup) {
    FlushTnt();
    out_.Psb();
    ++packets_;
    Tsc(tsc);
    out_.ModeExec64();
    ++packets_;
    if (enabled_) Ip(emulate::IpPacket::kFup, fup);
    out_.PsbEnd();
    ++packets_;
    ret_stack_.clear();  // PSB resets return compression
  }
  void Tsc(uint64_t tsc) {
    if (tsc == last_tsc_) return;
    FlushTnt();
    out_.Tsc(tsc);
    ++packets_;
    last_tsc_ = tsc;
  }
  void Tnt(bool taken) {
    tnt_ = (tnt_ << 1) | (taken ? 1 : 0);
    if (++tnt_n_ == 6) FlushTnt();
  }
  // A branch whose destination the trace must give: TIP, or TIP.PGD with the
  // IP suppressed when the destination is not traced (a ring change out of
  // the traced scope).
  void Branch(uint64_t to, uint64_t tsc) {
    Tsc(tsc);
    if (to != 0 && Traced(to)) {
      Ip(emulate::IpPacket::kTip, to);
    } else {
      Disable();
    }
  }
  void Disable() {
    FlushTnt();
    out_.Ip(emulate::IpPacket::kTipPgd, 0, emulate::IpCompression::kSuppressed);
    ++packets_;
    enabled_ = false;
    ret_stack_.clear();
  }
  void Enable(uint64_t to, uint64_t tsc) {
    Tsc(tsc);
    Ip(emulate::IpPacket::kTipPge, to);
    enabled_ = true;
  }
  void Ip(emulate::IpPacket type, uint64_t ip) {
    FlushTnt();
    out_.Ip(type, ip, emulate::IpCompression::kSext48);
    ++packets_;
  }
  void Call(uint64_t ret) {
    // libipt's return stack: 64 entries, the oldest dropped.
    if (ret_stack_.size() == 64) ret_stack_.erase(ret_stack_.begin());
    ret_stack_.push_back(ret);
  }
  void Ret(uint64_t to, uint64_t tsc) {
    if (!ret_stack_.empty() && ret_stack_.back() == to && Traced(to)) {
      ret_stack_.pop_back();
      Tnt(true);  // compressed return
    } else {
      Branch(to, tsc);
    }
  }
  std::string Finish() {
    FlushTnt();
    auto bytes = out_.bytes();
    return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
  }
  bool enabled() const { return enabled_; }
  uint64_t packets() const { return packets_; }

 private:
  void FlushTnt() {
    if (tnt_n_ == 0) return;
    out_.Tnt(tnt_, tnt_n_);  // oldest branch in the most significant bit
    ++packets_;
    tnt_ = 0;
    tnt_n_ = 0;
  }

  trace::Scope scope_;
  emulate::PacketWriter out_;
  uint64_t tnt_ = 0;
  int tnt_n_ = 0;
  bool enabled_ = false;
  uint64_t last_tsc_ = ~uint64_t{0};
  uint64_t packets_ = 0;
  std::vector<uint64_t> ret_stack_;
};

}  // namespace

std::string EncodePt(const std::vector<Step>& steps, trace::Scope scope, EncodeStats* stats) {
  Encoder e(scope);
  EncodeStats st;
  // Tracing starts disabled: PSB+ without FUP, then TIP.PGE at the first
  // traced instruction.
  e.Psb(steps.empty() ? 0 : steps.front().time, 0);
  for (const Step& s : steps) {
    if (s.kind == Step::kPoke) {
      e.Tsc(s.time);  // the patch happens at this time (TEXT_POKE's timestamp)
      continue;
    }
    if (s.psb) e.Psb(s.time, s.ip);
    if (s.kind == Step::kAsync) {
      // Interrupt/exception: FUP(interrupted IP) + TIP(handler) when both are
      // traced; FUP + TIP.PGD when the handler is not; TIP.PGE alone when
      // only the handler is.
      e.Tsc(s.time);
      if (e.enabled() && e.Traced(s.ip)) {
        e.Ip(emulate::IpPacket::kFup, s.ip);
        if (e.Traced(s.next)) {
          e.Ip(emulate::IpPacket::kTip, s.next);
        } else {
          e.Disable();
        }
      } else if (e.Traced(s.next)) {
        e.Enable(s.next, s.time);
      }
      continue;
    }
    if (!e.enabled()) {
      if (!e.Traced(s.ip)) {
        // Untraced code: a branch from it into traced code enables tracing.
        if (s.cls != InsnClass::kOther && e.Traced(s.next)) e.Enable(s.next, s.time);
        continue;
      }
      e.Enable(s.ip, s.time);  // the very first traced instruction
    }
    st.traced_insns++;
    switch (s.cls) {
      case InsnClass::kOther:
      case InsnClass::kJump: break;
      case InsnClass::kCond: e.Tnt(s.taken); break;
      case InsnClass::kCall:
        if (!s.zero_disp) e.Call(s.ip + s.size);
        break;
      case InsnClass::kCallIndirect:
        e.Call(s.ip + s.size);
        e.Branch(s.next, s.time);
        break;
      case InsnClass::kJumpIndirect: e.Branch(s.next, s.time); break;
      case InsnClass::kReturn: e.Ret(s.next, s.time); break;
      case InsnClass::kFarCall:
      case InsnClass::kFarReturn: e.Branch(s.next, s.time); break;
    }
  }
  std::string pt = e.Finish();
  st.packets = e.packets();
  if (stats != nullptr) *stats = st;
  return pt;
}

// ---- Check -----------------------------------------------------------------

namespace {

struct CheckCtx {
  Memory* mem;
};

int ReadMem(uint8_t* buffer, size_t size, const struct pt_asid*, uint64_t ip, void* context) {
  auto* ctx = static_cast<CheckCtx*>(context);
  size_t n = ctx->mem->Read(ip, buffer, size);
  return n == 0 ? -pte_nomap : static_cast<int>(n);
}

}  // namespace

Result<uint64_t> CheckWithLibipt(const std::string& pt, Memory mem, const std::vector<Step>& steps,
                                 trace::Scope scope) {
  // The traced instructions, and after which of them each poke applies.
  Encoder filter(scope);
  std::vector<uint64_t> expect;
  std::vector<std::pair<size_t, const Step*>> pokes;  // (instructions before, poke)
  for (const Step& s : steps) {
    if (s.kind == Step::kPoke) pokes.emplace_back(expect.size(), &s);
    if (s.kind == Step::kInsn && filter.Traced(s.ip)) expect.push_back(s.ip);
  }
  struct pt_config cfg;
  pt_config_init(&cfg);
  cfg.begin = reinterpret_cast<uint8_t*>(const_cast<char*>(pt.data()));
  cfg.end = cfg.begin + pt.size();
  struct pt_insn_decoder* dec = pt_insn_alloc_decoder(&cfg);
  if (dec == nullptr) return Error("libipt refused the config");
  CheckCtx ctx{&mem};
  struct pt_image* image = pt_insn_get_image(dec);
  pt_image_set_callback(image, ReadMem, &ctx);
  size_t i = 0, next_poke = 0;
  std::string failure;
  int status = pt_insn_sync_forward(dec);
  while (status >= 0 && failure.empty()) {
    while (status & pts_event_pending) {
      struct pt_event ev;
      status = pt_insn_event(dec, &ev, sizeof ev);
      if (status < 0) break;
    }
    if (status < 0 || (status & pts_eos)) break;
    while (next_poke < pokes.size() && pokes[next_poke].first == i) {
      mem.Write(pokes[next_poke].second->poke_addr, pokes[next_poke].second->new_bytes);
      ++next_poke;
    }
    struct pt_insn insn;
    status = pt_insn_next(dec, &insn, sizeof insn);
    if (status < 0) break;
    if (i >= expect.size()) {
      failure = "libipt decoded more instructions than ran: " + HexAddr(insn.ip);
    } else if (insn.ip != expect[i]) {
      failure = "instruction " + std::to_string(i) + ": libipt " + HexAddr(insn.ip) +
                ", ground truth " + HexAddr(expect[i]);
    }
    ++i;
  }
  pt_insn_free_decoder(dec);
  if (!failure.empty()) return Error(failure);
  if (status < 0 && status != -pte_eos) {
    return Error("libipt: " + std::string(pt_errstr(pt_errcode(status))) + " after " +
                 std::to_string(i) + " of " + std::to_string(expect.size()) + " instructions");
  }
  if (i != expect.size()) {
    return Error("libipt decoded " + std::to_string(i) + " of " + std::to_string(expect.size()) +
                 " instructions");
  }
  return static_cast<uint64_t>(i);
}

// ---- Scenarios -------------------------------------------------------------

Result<Scenario> BuildScenario(bool poke) {
  Scenario sc;
  PTSNAP_ASSIGN_OR_RETURN(sc.kernel, LoadTestKernel());
  PTSNAP_ASSIGN_OR_RETURN(sc.user, LoadUserProgram());
  const ElfImage& k = sc.kernel.elf;
  const ElfImage& u = sc.user;
  sc.text = CodeOf({&k, &u});
  const Memory& m = sc.text;
  Script s;
  s.syscall_entry = k.Sym("entry_SYSCALL_64");
  s.indirect[FindInsn(m, k.Sym("do_syscall_64"), InsnClass::kCallIndirect)] = k.Sym("ksys_write");
  s.indirect[FindInsn(m, k.Sym("vfs_write"), InsnClass::kCallIndirect)] = k.Sym("kmod_write");
  s.indirect[FindInsn(m, k.Sym("sysvec_apic_timer_interrupt"), InsnClass::kCallIndirect)] =
      k.Sym("kmod_timer_tick");
  s.cond[FindInsn(m, u.Sym("compute"), InsnClass::kCond)] = {true, true, false};
  Script::Event fault;
  fault.at = NthInsn(m, u.Sym("touch_page"), 1);  // movl $1, (%rax)
  fault.kind = Script::Event::kFault;
  fault.handler = k.Sym("asm_exc_page_fault");
  s.events.push_back(fault);
  Script::Event irq;
  irq.at = NthInsn(m, u.Sym("compute"), 3);  // decl %ecx
  irq.nth = 2;
  irq.kind = Script::Event::kInterrupt;
  irq.handler = k.Sym("asm_sysvec_apic_timer_interrupt");
  s.events.push_back(irq);
  if (poke) {
    Script::Event p;
    p.at = FindInsn(m, u.Sym("main"), InsnClass::kCall, 3);  // the second say_hello
    p.kind = Script::Event::kPoke;
    p.poke_addr = k.Sym("__jump_site_vfs_write");
    p.bytes = std::string("\x0f\x1f\x44\x00\x00", 5);  // nopl 0x0(%rax,%rax,1)
    p.what = "static key vfs_write off";
    s.events.push_back(p);
  }
  for (int i = 0; i < 5; ++i) s.psb_at.insert(FindInsn(m, u.Sym("main"), InsnClass::kCall, i));
  s.stop = FindInsn(m, u.Sym("_start"), InsnClass::kFarCall);
  Memory live = sc.text;
  PTSNAP_ASSIGN_OR_RETURN(sc.steps, Walk(&live, u.entry, s));
  for (const Step& st : sc.steps) {
    if (st.kind == Step::kPoke) sc.poke = &st;
  }
  return sc;
}

namespace {

trace::Record Rec(uint32_t type, uint64_t time, trace::RecordBody body, uint16_t misc = 0,
                  uint32_t pid = kPid) {
  trace::Record r;
  r.type = type;
  r.misc = misc;
  r.sample_id = {pid, pid, time, 0, 0, 1};
  r.body = std::move(body);
  return r;
}

}  // namespace

Result<void> WriteTrace(const Scenario& sc, const std::filesystem::path& dir,
                        const TraceOptions& opts) {
  const uint64_t t0 = sc.steps.empty() ? 0 : sc.steps.front().time;
  trace::Manifest m;
  m.source = trace::Source::kEmulated;
  m.emulator = "ptsnap kernel test world (libipt encoder over walked code)";
  m.state = trace::State::kRecording;
  m.pids = {kPid};
  m.command = {"kuser"};  // argv as run (a path here would tie goldens to the build dir)
  m.kernel_release = "6.1.0-ptsnap-test";
  m.kernel_start = sc.kernel.elf.Sym("_text");
  m.cpu.vendor = "GenuineIntel";
  m.cpu.family = 6;
  m.cpu.model = 85;
  m.cpu.stepping = 4;
  m.pt.tsc = true;
  m.scope = opts.scope;
  m.mode = trace::Mode::kFull;
  m.time_conv.time_mult = 1;  // TSC == perf ns
  m.binaries.push_back({sc.user.path.string(), "", ""});
  PTSNAP_ASSIGN_OR_RETURN(trace::TraceWriter w, trace::TraceWriter::Create(dir, m));

  const bool kernel = opts.scope != trace::Scope::kUser;
  if (kernel && opts.kcore) {
    // The recorder's own copier, on a fake root holding the test kernel.
    auto root = dir.parent_path() / (dir.filename().string() + ".root");
    PTSNAP_TRY(
        WriteFakeRoot(sc.kernel, root, "6.1.0-ptsnap-test", opts.kcore_hole, opts.kcore_hole_size));
    PTSNAP_ASSIGN_OR_RETURN(record::KcoreCopy copy,
                            record::CopyKcore(base::RootPath(root), dir / "kcore"));
    w.manifest().kcore = {trace::KcoreStatus::kCopied, "", "kcore"};
    if (copy.kernel_start) w.manifest().kernel_start = copy.kernel_start;
  } else if (kernel) {
    w.manifest().kcore = {trace::KcoreStatus::kDisabled, opts.kcore_disabled_by, ""};
  }

  std::vector<trace::Record> sb;
  sb.push_back(Rec(PERF_RECORD_COMM, t0 - 300, trace::Comm{kPid, kPid, "kuser", true},
                   trace::kMiscCommExec));
  for (const auto& l : sc.user.loads) {
    if (!l.exec) continue;
    trace::Mmap2 mm;
    mm.pid = mm.tid = kPid;
    mm.addr = l.vaddr & ~uint64_t{0xfff};
    mm.len = ((l.vaddr + l.bytes.size() + 0xfff) & ~uint64_t{0xfff}) - mm.addr;
    mm.pgoff = mm.addr - 0x400000;  // static non-PIE: file offset == vaddr - 0x400000
    mm.prot = 5;
    mm.flags = 2;
    mm.filename = sc.user.path.string();
    sb.push_back(Rec(PERF_RECORD_MMAP2, t0 - 200, mm));
  }
  sb.push_back(Rec(PERF_RECORD_ITRACE_START, t0 - 100, trace::ItraceStart{kPid, kPid}));
  if (opts.per_cpu >= 0) sb.back().sample_id.cpu = static_cast<uint32_t>(opts.per_cpu);
  if (sc.poke != nullptr && opts.text_poke_record) {
    // Kernel text pokes come from a system-wide dummy event: pid/tid of
    // whoever patched (here a kworker), PERF_RECORD_MISC_KERNEL.
    trace::TextPoke tp{sc.poke->poke_addr, sc.poke->old_bytes, sc.poke->new_bytes};
    sb.push_back(Rec(trace::kRecordTextPoke, sc.poke->time, tp, PERF_RECORD_MISC_KERNEL, 77));
  }
  sb.insert(sb.end(), opts.extra_sideband.begin(), opts.extra_sideband.end());
  std::stable_sort(sb.begin(), sb.end(), [](const trace::Record& a, const trace::Record& b) {
    return a.sample_id.time < b.sample_id.time;
  });
  std::string bytes;
  for (const auto& r : sb) bytes += trace::SerializeRecord(r);
  PTSNAP_TRY(w.AppendSideband(std::as_bytes(std::span(bytes.data(), bytes.size()))));

  std::string pt = EncodePt(sc.steps, opts.scope);
  trace::Stream s;
  if (opts.per_cpu >= 0) {
    s.cpu = opts.per_cpu;
  } else {
    s.pid = s.tid = kPid;
  }
  PTSNAP_TRY(w.AddStream(s, std::as_bytes(std::span(pt.data(), pt.size()))));
  PTSNAP_TRY(w.Finish());
  return Ok();
}

}  // namespace ptsnap::kworld
