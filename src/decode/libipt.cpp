#include "decode/libipt.h"

#include "base/check.h"

namespace ptsnap::decode {

UniqueImage NewImage(const char* name) {
  UniqueImage image(pt_image_alloc(name));
  PTSNAP_CHECK(image != nullptr) << "libipt: out of memory";
  return image;
}

UniqueIscache NewIscache(const char* name) {
  UniqueIscache iscache(pt_iscache_alloc(name));
  PTSNAP_CHECK(iscache != nullptr) << "libipt: out of memory";
  return iscache;
}

Result<UniqueBlockDecoder> NewBlockDecoder(const struct pt_config& config) {
  UniqueBlockDecoder dec(pt_blk_alloc_decoder(&config));
  if (dec == nullptr) return Error("libipt refused the decoder configuration from the manifest");
  return dec;
}

std::string LibiptError(int status) { return pt_errstr(pt_errcode(status)); }

struct pt_config MakePtConfig(const trace::Manifest& m) {
  struct pt_config cfg;
  pt_config_init(&cfg);
  cfg.cpu.vendor = m.cpu.vendor == "GenuineIntel" ? pcv_intel : pcv_unknown;
  cfg.cpu.family = static_cast<uint16_t>(m.cpu.family);
  cfg.cpu.model = static_cast<uint8_t>(m.cpu.model);
  cfg.cpu.stepping = static_cast<uint8_t>(m.cpu.stepping);
  if (cfg.cpu.vendor == pcv_intel) {
    // -pte_bad_cpu for models libipt does not know: decode without errata
    // workarounds rather than refuse. Any other error is a bad argument.
    const int r = pt_cpu_errata(&cfg.errata, &cfg.cpu);
    PTSNAP_CHECK(r >= 0 || r == -pte_bad_cpu) << LibiptError(r);
  }
  cfg.cpuid_0x15_eax = m.cpu.cpuid_15_eax;
  cfg.cpuid_0x15_ebx = m.cpu.cpuid_15_ebx;
  cfg.mtc_freq = static_cast<uint8_t>(m.pt.mtc_freq);
  cfg.nom_freq = static_cast<uint8_t>(m.pt.nom_freq);
  cfg.flags.variant.block.end_on_call = 1;
  cfg.flags.variant.block.end_on_jump = 1;
  // A tick event wherever a timing packet changed the time at a TNT or TIP:
  // it names the branch the time belongs to, so events between two such
  // points can be placed by the instructions retired (docs/decoding.md,
  // "Timestamps").
  cfg.flags.variant.block.enable_tick_events = 1;
  if (m.pt.addr0_a != 0 || m.pt.addr0_b != 0) {
    // IA32_RTIT_CTL.ADDR0_CFG: 1 = filter (trace only inside ADDR0); libipt 2.0
    // keeps the enum private (pt_addr_cfg_filter).
    cfg.addr_filter.config.ctl.addr0_cfg = 1;
    cfg.addr_filter.addr0_a = m.pt.addr0_a;
    cfg.addr_filter.addr0_b = m.pt.addr0_b;
  }
  return cfg;
}

}  // namespace ptsnap::decode
