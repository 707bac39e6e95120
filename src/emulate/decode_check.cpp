#include "emulate/decode_check.h"

#include <intel-pt.h>

#include <cstring>
#include <memory>

namespace ptsnap::emulate {

namespace {
std::string Err(const char* what, int code) {
  return std::string(what) + ": " + pt_errstr(pt_errcode(code));
}
}  // namespace

Result<DecodeCheckResult> DecodeCheck(std::span<const uint8_t> stream,
                                      const std::vector<ImageSection>& sections,
                                      const DecodeCheckOptions& opts) {
  std::vector<uint8_t> buf(stream.begin(), stream.end());
  DecodeCheckResult res;
  if (buf.empty()) return res;
  std::unique_ptr<pt_image, void (*)(pt_image*)> image(pt_image_alloc("check"), pt_image_free);
  if (!image) return Error("cannot allocate a libipt image");
  for (const auto& s : sections) {
    int r = pt_image_add_file(image.get(), s.path.c_str(), s.offset, s.size, nullptr, s.vaddr);
    if (r < 0) return Error(Err(("adding " + s.path + " to the image").c_str(), r));
  }
  pt_config cfg;
  pt_config_init(&cfg);
  cfg.begin = buf.data();
  cfg.end = buf.data() + buf.size();
  if (opts.cpu_family != 0) {
    cfg.cpu.vendor = pcv_intel;
    cfg.cpu.family = static_cast<uint16_t>(opts.cpu_family);
    cfg.cpu.model = static_cast<uint8_t>(opts.cpu_model);
    cfg.cpu.stepping = static_cast<uint8_t>(opts.cpu_stepping);
    pt_cpu_errata(&cfg.errata, &cfg.cpu);
  }
  std::unique_ptr<pt_insn_decoder, void (*)(pt_insn_decoder*)> dec(pt_insn_alloc_decoder(&cfg),
                                                                   pt_insn_free_decoder);
  if (!dec) return Error("cannot allocate a libipt decoder");
  if (int r = pt_insn_set_image(dec.get(), image.get()); r < 0)
    return Error(Err("setting the decoder's image", r));
  for (uint64_t a : opts.watch) res.watch_counts[a] = 0;
  res.range_counts.assign(opts.ranges.size(), 0);

  auto note_error = [&](int status) {
    ++res.errors;
    if (res.first_error.empty()) {
      uint64_t off = 0;
      pt_insn_get_offset(dec.get(), &off);
      char b[64];
      std::snprintf(b, sizeof(b), "offset 0x%llx: ", static_cast<unsigned long long>(off));
      res.first_error = b + std::string(pt_errstr(pt_errcode(status)));
    }
  };

  int status = pt_insn_sync_forward(dec.get());
  while (status >= 0 || status != -pte_eos) {
    if (status < 0) {
      note_error(status);
      status = pt_insn_sync_forward(dec.get());
      if (status == -pte_eos) break;
      continue;
    }
    ++res.syncs;
    for (;;) {
      while (status & pts_event_pending) {
        pt_event ev;
        status = pt_insn_event(dec.get(), &ev, sizeof(ev));
        if (status < 0) break;
      }
      if (status < 0) break;
      pt_insn insn;
      status = pt_insn_next(dec.get(), &insn, sizeof(insn));
      if (status < 0) break;
      ++res.insns;
      if (res.insns == 1) res.first_ip = insn.ip;
      res.last_ip = insn.ip;
      if (opts.hash) res.hash = (res.hash ^ insn.ip) * kStreamHashPrime;
      if (!res.watch_counts.empty()) {
        auto it = res.watch_counts.find(insn.ip);
        if (it != res.watch_counts.end()) ++it->second;
      }
      for (size_t i = 0; i < opts.ranges.size(); ++i)
        if (insn.ip >= opts.ranges[i].first && insn.ip < opts.ranges[i].second)
          ++res.range_counts[i];
    }
    if (status == -pte_eos) break;
    note_error(status);
    status = pt_insn_sync_forward(dec.get());
    if (status == -pte_eos) break;
  }
  // Second pass: the block decoder (what ptsnap's decoder uses).
  std::unique_ptr<pt_block_decoder, void (*)(pt_block_decoder*)> blk(pt_blk_alloc_decoder(&cfg),
                                                                     pt_blk_free_decoder);
  if (!blk) return Error("cannot allocate a libipt block decoder");
  pt_blk_set_image(blk.get(), image.get());
  status = pt_blk_sync_forward(blk.get());
  while (status != -pte_eos) {
    if (status < 0) {
      ++res.block_errors;
      status = pt_blk_sync_forward(blk.get());
      continue;
    }
    for (;;) {
      while (status & pts_event_pending) {
        pt_event ev;
        status = pt_blk_event(blk.get(), &ev, sizeof(ev));
        if (status < 0) break;
      }
      if (status < 0) break;
      pt_block block;
      std::memset(&block, 0, sizeof(block));
      status = pt_blk_next(blk.get(), &block, sizeof(block));
      // A block may come with an error: consume it first.
      if (block.ninsn > 0) {
        res.block_insns += block.ninsn;
        ++res.blocks;
      }
      if (status < 0) break;
    }
    if (status == -pte_eos) break;
    ++res.block_errors;
    status = pt_blk_sync_forward(blk.get());
  }
  return res;
}

}  // namespace ptsnap::emulate
