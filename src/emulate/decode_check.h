// DecodeCheck: decodes one PT stream with libipt's instruction decoder against
// an image of file sections, counting instructions and hashing their
// addresses in order (FNV-1a, the plugin's hash). The integration tests and
// tools/bench-emulate use it to prove an emulated stream is genuine: the
// counts must equal what the plugin retired. Test support, not product code.
#pragma once

#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "emulate/plugin_protocol.h"  // kStreamHashSeed, kStreamHashPrime
#include "ptsnap/result.h"

namespace ptsnap::emulate {

struct ImageSection {
  std::string path;
  uint64_t offset = 0, size = 0, vaddr = 0;
};

struct DecodeCheckOptions {
  uint32_t cpu_family = 0, cpu_model = 0, cpu_stepping = 0;  // 0: no errata
  std::vector<uint64_t> watch;  // addresses whose execution counts are wanted
  bool hash = true;
  // [begin, end) address ranges whose executed instructions are counted.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
};

struct DecodeCheckResult {
  uint64_t insns = 0;
  uint64_t hash = kStreamHashSeed;
  uint64_t errors = 0;
  std::string first_error;  // "offset 0x..: <libipt error>"
  uint64_t syncs = 0;       // PSBs synchronised at
  std::map<uint64_t, uint64_t> watch_counts;
  std::vector<uint64_t> range_counts;  // one per DecodeCheckOptions::ranges
  uint64_t first_ip = 0, last_ip = 0;
  // The same stream through libipt's block decoder: instructions in blocks,
  // block count, errors. Must agree with the instruction decoder.
  uint64_t block_insns = 0, blocks = 0, block_errors = 0;
};

Result<DecodeCheckResult> DecodeCheck(std::span<const uint8_t> stream,
                                      const std::vector<ImageSection>& sections,
                                      const DecodeCheckOptions& opts = {});

}  // namespace ptsnap::emulate
