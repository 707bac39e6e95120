#include "elf/eh_frame.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <string_view>
#include <unordered_map>

namespace ptsnap::elf {

namespace {

// DW_EH_PE_* (LSB 5.0, "DWARF Exception Header Encoding").
constexpr uint8_t kPeOmit = 0xff;
constexpr uint8_t kPeFormatMask = 0x0f, kPeAppMask = 0x70, kPeIndirect = 0x80;
constexpr uint8_t kPeAbsptr = 0x00, kPeUleb = 0x01, kPeUdata2 = 0x02, kPeUdata4 = 0x03,
                  kPeUdata8 = 0x04, kPeSleb = 0x09, kPeSdata2 = 0x0a, kPeSdata4 = 0x0b,
                  kPeSdata8 = 0x0c;
constexpr uint8_t kPePcrel = 0x10;

// x86-64 DWARF register numbers (psABI, figure 3.36).
constexpr uint64_t kRegRsp = 7;

// A bounds-checked reader over one record.
class Reader {
 public:
  Reader(std::span<const std::byte> bytes, size_t pos, size_t end)
      : b_(bytes), pos_(pos), end_(end) {}
  [[nodiscard]] size_t pos() const { return pos_; }
  [[nodiscard]] bool ok() const { return ok_; }
  [[nodiscard]] bool done() const { return !ok_ || pos_ >= end_; }

  template <typename T>
  T Fixed() {
    T v{};
    if (!ok_ || end_ - pos_ < sizeof(T)) {
      ok_ = false;
      return v;
    }
    std::memcpy(&v, b_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return v;
  }
  uint64_t Uleb() {
    uint64_t v = 0;
    for (unsigned shift = 0;; shift += 7) {
      const auto byte = Fixed<uint8_t>();
      if (!ok_) return 0;
      if (shift < 64) v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      if ((byte & 0x80) == 0) return v;
    }
  }
  int64_t Sleb() {
    uint64_t v = 0;
    unsigned shift = 0;
    uint8_t byte = 0;
    do {
      byte = Fixed<uint8_t>();
      if (!ok_) return 0;
      if (shift < 64) v |= static_cast<uint64_t>(byte & 0x7f) << shift;
      shift += 7;
    } while ((byte & 0x80) != 0);
    if (shift < 64 && (byte & 0x40) != 0) v |= ~uint64_t{0} << shift;
    return static_cast<int64_t>(v);
  }
  std::string_view CString() {
    if (!ok_) return {};
    const char* start = reinterpret_cast<const char*>(b_.data()) + pos_;
    const void* nul = std::memchr(start, 0, end_ - pos_);
    if (nul == nullptr) {
      ok_ = false;
      return {};
    }
    std::string_view s(start, static_cast<const char*>(nul) - start);
    pos_ += s.size() + 1;
    return s;
  }
  void Skip(uint64_t n) {
    if (!ok_ || end_ - pos_ < n) {
      ok_ = false;
      return;
    }
    pos_ += n;
  }
  // A pointer in encoding `enc`; `field_vaddr` is where the field lies for
  // pc-relative values. nullopt: an encoding that needs other sections (the
  // bytes are still consumed).
  std::optional<uint64_t> Pointer(uint8_t enc, uint64_t field_vaddr, bool apply = true) {
    uint64_t v = 0;
    switch (enc & kPeFormatMask) {
      case kPeAbsptr:
      case kPeUdata8:
      case kPeSdata8: v = Fixed<uint64_t>(); break;
      case kPeUleb: v = Uleb(); break;
      case kPeSleb: v = static_cast<uint64_t>(Sleb()); break;
      case kPeUdata2: v = Fixed<uint16_t>(); break;
      case kPeSdata2: v = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int16_t>())); break;
      case kPeUdata4: v = Fixed<uint32_t>(); break;
      case kPeSdata4: v = static_cast<uint64_t>(static_cast<int64_t>(Fixed<int32_t>())); break;
      default: ok_ = false; return std::nullopt;
    }
    if (!ok_) return std::nullopt;
    if (!apply) return v;
    if ((enc & kPeIndirect) != 0) return std::nullopt;
    switch (enc & kPeAppMask) {
      case 0: return v;
      case kPePcrel: return v + field_vaddr;
      default: return std::nullopt;
    }
  }

 private:
  std::span<const std::byte> b_;
  size_t pos_, end_;
  bool ok_ = true;
};

struct Cfa {
  uint64_t reg = 0;
  int64_t offset = 0;
  bool known = false;  // false: set by an expression, or never set
};

// Runs call frame instructions until one that advances the location (or
// the end), updating the CFA rule, and returns the advance (0: the end, or
// a set_loc/unknown instruction). Only the CFA matters here; the register
// rules are skipped over.
uint64_t RunToAdvance(Reader& r, int64_t data_align, Cfa* cfa) {
  while (!r.done()) {
    const auto op = r.Fixed<uint8_t>();
    switch (op & 0xc0) {
      case 0x40: return op & 0x3f;          // DW_CFA_advance_loc
      case 0x80: (void)r.Uleb(); continue;  // DW_CFA_offset
      case 0xc0: continue;                  // DW_CFA_restore
      default: break;
    }
    switch (op) {
      case 0x00: break;                                  // nop
      case 0x01: return 0;                               // set_loc
      case 0x02: return r.Fixed<uint8_t>();              // advance_loc1
      case 0x03: return r.Fixed<uint16_t>();             // advance_loc2
      case 0x04: return r.Fixed<uint32_t>();             // advance_loc4
      case 0x05: (void)r.Uleb(), (void)r.Uleb(); break;  // offset_extended
      case 0x06:                                         // restore_extended
      case 0x07:                                         // undefined
      case 0x08: (void)r.Uleb(); break;                  // same_value
      case 0x09: (void)r.Uleb(), (void)r.Uleb(); break;  // register
      case 0x0a:                                         // remember_state
      case 0x0b: break;                                  // restore_state
      case 0x0c:                                         // def_cfa
        cfa->reg = r.Uleb();
        cfa->offset = static_cast<int64_t>(r.Uleb());
        cfa->known = true;
        break;
      case 0x0d: cfa->reg = r.Uleb(); break;  // def_cfa_register
      case 0x0e: cfa->offset = static_cast<int64_t>(r.Uleb()); break;
      case 0x0f:  // def_cfa_expression
        r.Skip(r.Uleb());
        cfa->known = false;
        return 0;
      case 0x10:  // expression
      case 0x16:  // val_expression
        (void)r.Uleb();
        r.Skip(r.Uleb());
        break;
      case 0x11: (void)r.Uleb(), (void)r.Sleb(); break;  // offset_extended_sf
      case 0x12:                                         // def_cfa_sf
        cfa->reg = r.Uleb();
        cfa->offset = r.Sleb() * data_align;
        cfa->known = true;
        break;
      case 0x13: cfa->offset = r.Sleb() * data_align; break;  // def_cfa_offset_sf
      case 0x14: (void)r.Uleb(), (void)r.Uleb(); break;       // val_offset
      case 0x15: (void)r.Uleb(), (void)r.Sleb(); break;       // val_offset_sf
      case 0x2e: (void)r.Uleb(); break;                       // GNU_args_size
      case 0x2f: (void)r.Uleb(), (void)r.Uleb(); break;       // GNU_negative_offset_extended
      default: cfa->known = false; return 0;                  // unknown: stop, say nothing
    }
  }
  return 0;
}

struct Cie {
  bool ok = false;
  bool z = false;  // augmentation data present ('z')
  uint8_t fde_encoding = kPeAbsptr;
  int64_t data_align = 0;
  Cfa initial;
};

Cie ParseCie(std::span<const std::byte> bytes, size_t pos, size_t end, uint64_t vaddr) {
  Cie cie;
  Reader r(bytes, pos, end);
  const auto version = r.Fixed<uint8_t>();
  if (version != 1 && version != 3 && version != 4) return cie;
  std::string_view aug = r.CString();
  if (aug.find("eh") != std::string_view::npos) r.Skip(8);  // old GCC's eh_ptr
  if (version == 4) r.Skip(2);                              // address_size, segment_size
  (void)r.Uleb();                                           // code alignment
  cie.data_align = r.Sleb();
  if (version == 1) {
    (void)r.Fixed<uint8_t>();
  } else {
    (void)r.Uleb();
  }
  if (!aug.empty() && aug[0] == 'z') {
    cie.z = true;
    const uint64_t len = r.Uleb();
    const size_t data_end = r.pos() + len;
    if (!r.ok() || len > end - r.pos()) return cie;
    for (char c : aug.substr(1)) {
      if (c == 'R') {
        cie.fde_encoding = r.Fixed<uint8_t>();
      } else if (c == 'L') {
        (void)r.Fixed<uint8_t>();
      } else if (c == 'P') {
        const auto enc = r.Fixed<uint8_t>();
        (void)r.Pointer(enc, vaddr + r.pos());
      } else if (c == 'S' || c == 'B' || c == 'G') {
        // signal frame / BTI / MTE: no data
      } else {
        break;  // unknown: the length below skips the rest
      }
    }
    if (!r.ok()) return cie;
    r = Reader(bytes, data_end, end);
  } else if (!aug.empty()) {
    return cie;  // an augmentation we cannot skip
  }
  if (!r.ok()) return cie;
  (void)RunToAdvance(r, cie.data_align, &cie.initial);
  cie.ok = true;
  return cie;
}

}  // namespace

std::vector<FdeRange> ParseEhFrame(std::span<const std::byte> bytes, uint64_t section_vaddr) {
  std::vector<FdeRange> out;
  std::unordered_map<size_t, Cie> cies;
  size_t pos = 0;
  while (bytes.size() - pos >= 4) {
    Reader head(bytes, pos, bytes.size());
    uint64_t length = head.Fixed<uint32_t>();
    if (length == 0) break;  // terminator
    if (length == 0xffffffff) length = head.Fixed<uint64_t>();
    if (!head.ok() || length > bytes.size() - head.pos() || length < 4) break;
    const size_t end = head.pos() + length;
    const size_t id_pos = head.pos();
    const uint32_t id = head.Fixed<uint32_t>();
    if (id == 0) {
      cies.emplace(pos, ParseCie(bytes, head.pos(), end, section_vaddr));
    } else if (id <= id_pos) {
      // An FDE: `id` is the distance back from this field to its CIE.
      const size_t cie_pos = id_pos - id;
      auto it = cies.find(cie_pos);
      if (it == cies.end()) {
        // A CIE not seen yet (they usually come first): parse it in place.
        Reader c(bytes, cie_pos, bytes.size());
        uint64_t clen = c.Fixed<uint32_t>();
        if (clen == 0xffffffff) clen = c.Fixed<uint64_t>();
        Cie cie;
        if (c.ok() && clen >= 4 && clen <= bytes.size() - c.pos() && c.Fixed<uint32_t>() == 0) {
          cie = ParseCie(bytes, c.pos(), c.pos() - 4 + clen, section_vaddr);
        }
        it = cies.emplace(cie_pos, cie).first;
      }
      const Cie& cie = it->second;
      if (cie.ok && cie.fde_encoding != kPeOmit) {
        Reader r(bytes, head.pos(), end);
        const auto start = r.Pointer(cie.fde_encoding, section_vaddr + r.pos());
        const auto range = r.Pointer(cie.fde_encoding & kPeFormatMask, 0, false);
        if (cie.z) r.Skip(r.Uleb());
        if (start && range && *range != 0 && *start + *range > *start && r.ok()) {
          Cfa cfa = cie.initial;
          const uint64_t first = RunToAdvance(r, cie.data_align, &cfa);
          bool entry = cfa.known && cfa.reg == kRegRsp && cfa.offset == 8;
          // A landing pad cannot sit at offset 0 of its region, so GCC
          // starts a cold part that is one with a `nop` run at the CIE's
          // rule, then sets the frame's CFA. A function whose first
          // instruction is one byte long pushes a register: CFA + 8.
          if (entry && first == 1) {
            Cfa next = cfa;
            (void)RunToAdvance(r, cie.data_align, &next);
            if (next.known && next.offset > 16) entry = false;
          }
          out.push_back(FdeRange{*start, *start + *range, entry});
        }
      }
    }
    pos = end;
  }
  std::sort(out.begin(), out.end(),
            [](const FdeRange& a, const FdeRange& b) { return a.start < b.start; });
  return out;
}

}  // namespace ptsnap::elf
