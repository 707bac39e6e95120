#include "flow/libipt_oracle.h"

#include <algorithm>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>

namespace ptsnap::flow {

CodeImage::CodeImage() = default;

CodeImage::~CodeImage() { FreeLibiptImages(); }

void CodeImage::FreeLibiptImages() {
  for (auto* i : images_) pt_image_free(i);
  for (auto* c : caches_) pt_iscache_free(c);
  images_.clear();
  caches_.clear();
}

Result<void> CodeImage::AddFile(const std::string& path, uint64_t offset, uint64_t size,
                                uint64_t vaddr) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Error("cannot open " + path);
  in.seekg(static_cast<std::streamoff>(offset));
  Region r;
  r.vaddr = vaddr;
  r.path = path;
  r.offset = offset;
  r.bytes.resize(size);
  in.read(r.bytes.data(), static_cast<std::streamsize>(size));
  r.bytes.resize(static_cast<size_t>(in.gcount()));
  regions_.push_back(std::move(r));
  return Ok();
}

size_t CodeImage::Read(uint64_t ip, uint8_t* buf, size_t size) {
  for (const Region& r : regions_) {
    if (ip >= r.vaddr && ip - r.vaddr < r.bytes.size()) {
      const size_t off = ip - r.vaddr;
      const size_t n = std::min(size, r.bytes.size() - off);
      std::copy_n(r.bytes.data() + off, n, buf);  // code bytes, not a string
      return n;
    }
  }
  return 0;
}

struct pt_image* CodeImage::NewLibiptImage() {
  struct pt_image_section_cache* cache = pt_iscache_alloc(nullptr);
  struct pt_image* image = pt_image_alloc(nullptr);
  caches_.push_back(cache);
  images_.push_back(image);
  for (const Region& r : regions_) {
    const int isid = pt_iscache_add_file(cache, r.path.c_str(), r.offset, r.bytes.size(), r.vaddr);
    if (isid > 0) pt_image_add_cached(image, cache, isid, nullptr);
  }
  return image;
}

namespace {

Item ErrorItem(int code) {
  Item i;
  i.kind = ItemKind::kError;
  i.error = code;
  return i;
}

}  // namespace

std::vector<Item> DecodeWithLibipt(const struct pt_config& cfg, struct pt_image* image) {
  std::vector<Item> out;
  struct pt_block_decoder* dec = pt_blk_alloc_decoder(&cfg);
  if (dec == nullptr) return out;
  pt_blk_set_image(dec, image);
  // StreamDecoder::Step's loop (src/decode/pt_decoder.cpp).
  enum class State { kSync, kSegment, kDone } state = State::kSync;
  int status = 0;
  uint64_t last_sync = ~uint64_t{0};
  // Item::now: pt_blk_time right after the call that produced the item.
  auto stamped = [&](Item i) {
    uint64_t tsc = 0;
    uint32_t lost_mtc = 0, lost_cyc = 0;
    i.has_now = pt_blk_time(dec, &tsc, &lost_mtc, &lost_cyc) >= 0;
    i.now = i.has_now ? tsc : 0;
    return i;
  };
  auto end_segment = [&](int st) {
    if (st == -pte_eos) {
      state = State::kDone;
      return;
    }
    out.push_back(stamped(ErrorItem(st)));
    uint64_t off = 0;
    if (pt_blk_get_sync_offset(dec, &off) < 0) off = 0;
    last_sync = off;
    state = State::kSync;
  };
  while (state != State::kDone) {
    if (state == State::kSegment) {
      if ((status & pts_event_pending) != 0) {
        struct pt_event ev;
        status = pt_blk_event(dec, &ev, sizeof ev);
        if (status < 0) {
          end_segment(status);
          continue;
        }
        out.push_back(stamped(LibiptEventItem(ev)));
        continue;
      }
      if ((status & pts_eos) != 0) {  // where it goes on: StreamDecoder's trailing branch
        struct pt_image* empty = pt_image_alloc(nullptr);
        Item n;
        n.kind = ItemKind::kNextIp;
        if (empty != nullptr && LibiptNextIp(dec, empty, &n.ip)) out.push_back(n);
        pt_blk_free_decoder(dec);
        pt_image_free(empty);
        return out;
      }
      struct pt_block block;
      status = pt_blk_next(dec, &block, sizeof block);
      if (block.ninsn > 0) out.push_back(stamped(LibiptBlockItem(block)));
      if (status < 0) {
        end_segment(status);
        if (status == -pte_nomap && block.ninsn == 0 && !out.empty() &&
            out.back().kind == ItemKind::kError)
          out.back().ip = block.ip;
      }
      continue;
    }
    const int st = pt_blk_sync_forward(dec);
    if (st < 0) {
      if (st == -pte_eos) break;
      uint64_t off = 0;
      if (pt_blk_get_offset(dec, &off) < 0) off = 0;
      if (off == last_sync) break;
      last_sync = off;
      continue;
    }
    status = st;
    uint64_t off = 0;
    pt_blk_get_sync_offset(dec, &off);
    Item s;
    s.kind = ItemKind::kSync;
    s.offset = off;
    out.push_back(stamped(s));
    state = State::kSegment;
  }
  pt_blk_free_decoder(dec);
  return out;
}

std::vector<Item> DecodeWithFlow(const struct pt_config& cfg, CodeReader* code) {
  FlowDecoder dec(FlowConfig(cfg), code);
  std::vector<Item> out;
  Item buf[256];
  for (;;) {
    const size_t n = dec.Decode(buf, 256);
    if (n == 0) break;
    out.insert(out.end(), buf, buf + n);
  }
  Item next;
  if (dec.NextIp(&next.ip)) {
    next.kind = ItemKind::kNextIp;
    out.push_back(next);
  }
  return out;
}

std::string ToString(const Item& i) {
  char b[256];
  std::string now = i.has_now ? " now=" + std::to_string(i.now) : " now=(none)";
  switch (i.kind) {
    case ItemKind::kSync: std::snprintf(b, sizeof b, "sync @%" PRIu64, i.offset); break;
    case ItemKind::kNextIp: std::snprintf(b, sizeof b, "next ip 0x%" PRIx64, i.ip); break;
    case ItemKind::kError:
      std::snprintf(b, sizeof b, "error %d unread=0x%" PRIx64, i.error, i.ip);
      break;
    case ItemKind::kBlock:
      std::snprintf(b, sizeof b, "block 0x%" PRIx64 "-0x%" PRIx64 " n=%u class=%d mode=%d%s", i.ip,
                    i.end_ip, i.ninsn, static_cast<int>(i.iclass), static_cast<int>(i.mode),
                    i.speculative ? " spec" : "");
      break;
    case ItemKind::kEvent:
      std::snprintf(b, sizeof b,
                    "event %d ip=0x%" PRIx64 " to=0x%" PRIx64 "%s%s tsc=%s%" PRIu64
                    " mode=%d ratio=%u payload=0x%" PRIx64 " size=%u%s%s%s%s",
                    static_cast<int>(i.event), i.ip, i.to, i.ip_suppressed ? " suppressed" : "",
                    i.status_update ? " status" : "", i.has_tsc ? "" : "(none)", i.tsc,
                    static_cast<int>(i.mode), i.ratio, i.payload, i.size,
                    i.speculative ? " spec" : "", i.aborted ? " abort" : "",
                    i.resumed ? " resumed" : "", i.non_root ? " non-root" : "");
      break;
  }
  return b + now;
}

Comparison Compare(const std::vector<Item>& libipt, const std::vector<Item>& ours) {
  Comparison c;
  c.items = libipt.size();
  for (const Item& i : libipt) c.errors += i.kind == ItemKind::kError;
  const size_t n = std::min(libipt.size(), ours.size());
  size_t i = 0;
  while (i < n && libipt[i] == ours[i]) ++i;
  c.index = i;
  if (i == libipt.size() && i == ours.size()) {
    c.equal = c.all_equal = true;
    return c;
  }
  std::string m = "first difference at item " + std::to_string(i) + " of " +
                  std::to_string(libipt.size()) + " (ours " + std::to_string(ours.size()) + ")\n";
  const size_t context = getenv("FLOW_CONTEXT") != nullptr ? 40 : 4;
  const size_t from = i >= context ? i - context : 0;
  for (size_t k = from; k < i + 3; ++k) {
    m += "  [" + std::to_string(k) +
         "] libipt: " + (k < libipt.size() ? ToString(libipt[k]) : std::string("-")) + "\n";
    m += "  [" + std::to_string(k) +
         "] ours:   " + (k < ours.size() ? ToString(ours[k]) : std::string("-")) + "\n";
  }
  c.message = m;
  if (i < ours.size() && ours[i].kind == ItemKind::kError && ours[i].error == kErrUnsupported) {
    c.equal = true;
    c.unsupported = true;
    return c;
  }
  // The item right before ours stops at a packet it does not decode may
  // differ from libipt's in its time only: libipt decoded that packet (an
  // event) and may have saved the time there, or failed on it (flow_diff
  // found both).
  if (i + 1 < ours.size() && i < libipt.size() && ours[i + 1].kind == ItemKind::kError &&
      ours[i + 1].error == kErrUnsupported) {
    Item a = libipt[i], b = ours[i];
    a.has_now = b.has_now = false;
    a.now = b.now = 0;
    if (a == b) {
      c.equal = true;
      c.unsupported = true;
      return c;
    }
  }
  // Where is the first error (in libipt's run)? Equal through it and the
  // next sync is the contract.
  size_t first_error = libipt.size();
  for (size_t k = 0; k < libipt.size(); ++k) {
    if (libipt[k].kind == ItemKind::kError) {
      first_error = k;
      break;
    }
  }
  size_t resync = first_error;
  while (resync < libipt.size() && libipt[resync].kind != ItemKind::kSync) ++resync;
  if (first_error < libipt.size() && i > resync) c.equal = true;
  return c;
}

}  // namespace ptsnap::flow
