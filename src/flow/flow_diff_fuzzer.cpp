// Differential fuzzer: libipt's block decoder and the flow decoder over the
// same mutated PT stream and the same code (a fixed 8 KiB blob at 0x400000:
// 4 KiB of calls, conditional, indirect and far branches, returns and a
// zero-displacement call, then 4 KiB with the instructions PIP, VMCS and
// PTW packets bind to: PTWRITE, MOV CR3, VMPTRLD, VMLAUNCH, VMRESUME),
// configured with or without timing by the first byte, which also picks
// the CPU whose errata libipt works around (none, or one model per set of
// errata pt_cpu_errata knows, with address filters where SKL014 applies).
// They must agree as flow_decoder.h defines it (libipt_oracle.h Compare);
// streams where ours stops at a packet it does not decode yet count as
// agreeing up to there. Seeds: tests/fuzz/corpus/flow_diff/.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "flow/libipt_oracle.h"

namespace {

using ptsnap::flow::CodeImage;

constexpr uint64_t kCodeBase = 0x400000;

CodeImage* Code() {
  static CodeImage* image = [] {
    // call +10; je +3; jmp *rax; ret; jmp -12; syscall; nop;
    // test rax,rax; jne -15; call *rax; ret; call +0; pop rax; lret
    static const uint8_t kPattern[] = {0xe8, 0x0a, 0x00, 0x00, 0x00, 0x74, 0x03, 0xff, 0xe0, 0xc3,
                                       0xeb, 0xf4, 0x0f, 0x05, 0x90, 0x48, 0x85, 0xc0, 0x75, 0xf1,
                                       0xff, 0xd0, 0xc3, 0xe8, 0x00, 0x00, 0x00, 0x00, 0x58, 0xcb};
    // nop; ptwrite %rax; mov %rax,%cr3; je +3; vmptrld (%rax); vmlaunch;
    // ptwrite (%rax); vmresume; jmp *%rax; syscall; ret; call -34 (to the nop)
    static const uint8_t kBindPattern[] = {0x90, 0xf3, 0x48, 0x0f, 0xae, 0xe0, 0x0f, 0x22, 0xd8,
                                           0x74, 0x03, 0x0f, 0xc7, 0x30, 0x0f, 0x01, 0xc2, 0xf3,
                                           0x0f, 0xae, 0x20, 0x0f, 0x01, 0xc3, 0xff, 0xe0, 0x0f,
                                           0x05, 0xc3, 0xe8, 0xde, 0xff, 0xff, 0xff};
    std::string blob;
    while (blob.size() < 4096)
      blob.append(reinterpret_cast<const char*>(kPattern), sizeof kPattern);
    blob.resize(4096);
    while (blob.size() < 8192)
      blob.append(reinterpret_cast<const char*>(kBindPattern), sizeof kBindPattern);
    blob.resize(8192);
    char path[] = "/tmp/ptsnap-flow-fuzz-XXXXXX";
    const int fd = ::mkstemp(path);
    if (fd < 0 || ::write(fd, blob.data(), blob.size()) != static_cast<ssize_t>(blob.size()))
      std::abort();
    ::close(fd);
    auto* c = new CodeImage();
    if (!c->AddFile(path, 0, blob.size(), kCodeBase)) std::abort();
    return c;
  }();
  return image;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ptsnap::flow;
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const std::string bytes(reinterpret_cast<const char*>(data) + 1, size - 1);  // NUL after end
  struct pt_config cfg;
  pt_config_init(&cfg);
  cfg.flags.variant.block.end_on_call = 1;
  cfg.flags.variant.block.end_on_jump = 1;
  cfg.flags.variant.block.enable_tick_events = 1;
  if ((mode & 1) != 0) {
    cfg.cpuid_0x15_eax = 2;
    cfg.cpuid_0x15_ebx = 200;
    cfg.mtc_freq = static_cast<uint8_t>((mode >> 1) & 7);
    cfg.nom_freq = static_cast<uint8_t>(mode >> 4);
  }
  // No errata; Kaby Lake (SKD007, SKD010, SKD022, SKL014, SKL168, BDM70);
  // Alder Lake (APL11, SKL014, SKD022, BDM70); Goldmont (APL11, APL12);
  // Skylake server (SKZ84, SKL014, SKD022, BDM70); Broadwell (BDM64, BDM70).
  static constexpr uint8_t kModels[] = {0, 0x9e, 0x97, 0x5c, 0x55, 0x3d};
  const uint8_t model = kModels[((mode & 1) != 0 ? mode >> 4 : mode >> 1) % sizeof kModels];
  if (model != 0) {
    cfg.cpu.vendor = pcv_intel;
    cfg.cpu.family = 6;
    cfg.cpu.model = model;
    if (pt_cpu_errata(&cfg.errata, &cfg.cpu) < 0) return 0;
    if (cfg.errata.skl014) {  // a filter over the first 4 KiB: branches to the rest leave it
      cfg.addr_filter.config.addr_cfg = 1;
      cfg.addr_filter.addr0_a = kCodeBase;
      cfg.addr_filter.addr0_b = kCodeBase + 4095;
    }
  }
  cfg.begin = reinterpret_cast<uint8_t*>(const_cast<char*>(bytes.data()));
  cfg.end = cfg.begin + bytes.size();
  const auto lib = DecodeWithLibipt(cfg, Code()->NewLibiptImage());
  const auto ours = DecodeWithFlow(cfg, Code());
  Code()->FreeLibiptImages();
  const Comparison c = Compare(lib, ours);
  if (!c.equal) {
    std::fprintf(stderr, "flow decoder differs from libipt:\n%s", c.message.c_str());
    __builtin_trap();
  }
  return 0;
}
