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

// The return-address column's rule. Undefined until a CIE says otherwise
// (DWARF 4, 6.4.1: the default rule of every column).
struct Ra {
  FrameRule::Ra kind = FrameRule::Ra::kUndefined;
  int64_t offset = 0;
};

// One row's columns that matter here.
struct State {
  Cfa cfa;
  Ra ra;
};

// What the CIE says about every FDE that names it.
struct Cie {
  bool ok = false;
  bool z = false;  // augmentation data present ('z')
  uint8_t fde_encoding = kPeAbsptr;
  uint64_t code_align = 1;
  int64_t data_align = 0;
  uint64_t ra_reg = 16;  // x86-64's return-address column
  State initial;
};

// Factored offsets wrap like the unsigned arithmetic of a 64-bit register:
// a corrupt section must not reach signed overflow.
int64_t Factored(int64_t value, int64_t factor) {
  return static_cast<int64_t>(static_cast<uint64_t>(value) * static_cast<uint64_t>(factor));
}

// How RunToAdvance stopped.
enum class Stop : uint8_t {
  kAdvance,  // an advance_loc: `advance` code units to the next row
  kEnd,      // the instructions ended
  kUnknown,  // an instruction this reader does not follow (the rest is unknown)
};
struct Step {
  Stop stop = Stop::kEnd;
  uint64_t advance = 0;
};

constexpr size_t kMaxRememberedStates = 64;

// Runs call frame instructions until one that advances the location (or
// the end), updating the CFA and return-address rules of `st`. `initial` is
// the CIE's row (DW_CFA_restore returns to it; nullptr while running the
// CIE itself); `stack` holds remember_state's rows. The other registers'
// rules are skipped over. DWARF 4, 6.4.2.
Step RunToAdvance(Reader& r, const Cie& cie, State* st, const State* initial,
                  std::vector<State>* stack) {
  auto unknown = [&] {
    st->cfa.known = false;
    return Step{Stop::kUnknown, 0};
  };
  // Stops where the rest cannot be followed, the row so far unchanged.
  constexpr Step kStopHere{Stop::kUnknown, 0};
  auto saved_at = [&](uint64_t reg, int64_t offset) {
    if (reg == cie.ra_reg) st->ra = Ra{FrameRule::Ra::kSaved, offset};
  };
  auto other_rule = [&](uint64_t reg, FrameRule::Ra kind = FrameRule::Ra::kOther) {
    if (reg == cie.ra_reg) st->ra = Ra{kind, 0};
  };
  auto restore = [&](uint64_t reg) {
    if (reg == cie.ra_reg) st->ra = initial != nullptr ? initial->ra : Ra{};
  };
  while (!r.done()) {
    const auto op = r.Fixed<uint8_t>();
    switch (op & 0xc0) {
      case 0x40: return {Stop::kAdvance, op & 0x3fu};  // DW_CFA_advance_loc
      case 0x80:                                       // DW_CFA_offset
        saved_at(op & 0x3fu, Factored(static_cast<int64_t>(r.Uleb()), cie.data_align));
        continue;
      case 0xc0: restore(op & 0x3fu); continue;  // DW_CFA_restore
      default: break;
    }
    switch (op) {
      case 0x00: break;                                         // nop
      case 0x01: return kStopHere;                              // set_loc
      case 0x02: return {Stop::kAdvance, r.Fixed<uint8_t>()};   // advance_loc1
      case 0x03: return {Stop::kAdvance, r.Fixed<uint16_t>()};  // advance_loc2
      case 0x04: return {Stop::kAdvance, r.Fixed<uint32_t>()};  // advance_loc4
      case 0x05: {                                              // offset_extended
        const uint64_t reg = r.Uleb();
        saved_at(reg, Factored(static_cast<int64_t>(r.Uleb()), cie.data_align));
        break;
      }
      case 0x06: restore(r.Uleb()); break;                                // restore_extended
      case 0x07: other_rule(r.Uleb(), FrameRule::Ra::kUndefined); break;  // undefined
      case 0x08: other_rule(r.Uleb()); break;                             // same_value
      case 0x09:                                                          // register
        other_rule(r.Uleb());
        (void)r.Uleb();
        break;
      case 0x0a:  // remember_state
        if (stack->size() >= kMaxRememberedStates) return unknown();
        stack->push_back(*st);
        break;
      case 0x0b:  // restore_state
        if (stack->empty()) return unknown();
        *st = stack->back();
        stack->pop_back();
        break;
      case 0x0c:  // def_cfa
        st->cfa.reg = r.Uleb();
        st->cfa.offset = static_cast<int64_t>(r.Uleb());
        st->cfa.known = true;
        break;
      case 0x0d: st->cfa.reg = r.Uleb(); break;  // def_cfa_register
      case 0x0e: st->cfa.offset = static_cast<int64_t>(r.Uleb()); break;
      case 0x0f:  // def_cfa_expression
        r.Skip(r.Uleb());
        st->cfa.known = false;
        break;
      case 0x10:  // expression
      case 0x16:  // val_expression
        other_rule(r.Uleb());
        r.Skip(r.Uleb());
        break;
      case 0x11: {  // offset_extended_sf
        const uint64_t reg = r.Uleb();
        saved_at(reg, Factored(r.Sleb(), cie.data_align));
        break;
      }
      case 0x12:  // def_cfa_sf
        st->cfa.reg = r.Uleb();
        st->cfa.offset = Factored(r.Sleb(), cie.data_align);
        st->cfa.known = true;
        break;
      case 0x13: st->cfa.offset = Factored(r.Sleb(), cie.data_align); break;  // def_cfa_offset_sf
      case 0x14:                                                              // val_offset
        other_rule(r.Uleb());
        (void)r.Uleb();
        break;
      case 0x15:  // val_offset_sf
        other_rule(r.Uleb());
        (void)r.Sleb();
        break;
      case 0x2e: (void)r.Uleb(); break;  // GNU_args_size
      case 0x2f: {                       // GNU_negative_offset_extended
        const uint64_t reg = r.Uleb();
        const auto factored =
            static_cast<uint64_t>(Factored(static_cast<int64_t>(r.Uleb()), cie.data_align));
        saved_at(reg, static_cast<int64_t>(uint64_t{0} - factored));
        break;
      }
      default: return unknown();  // unknown: stop, say nothing
    }
  }
  if (!r.ok()) return kStopHere;  // an instruction cut short by the record's end
  return {Stop::kEnd, 0};
}

Cie ParseCie(std::span<const std::byte> bytes, size_t pos, size_t end, uint64_t vaddr) {
  Cie cie;
  Reader r(bytes, pos, end);
  const auto version = r.Fixed<uint8_t>();
  if (version != 1 && version != 3 && version != 4) return cie;
  std::string_view aug = r.CString();
  if (aug.find("eh") != std::string_view::npos) r.Skip(8);  // old GCC's eh_ptr
  if (version == 4) r.Skip(2);                              // address_size, segment_size
  cie.code_align = r.Uleb();
  cie.data_align = r.Sleb();
  if (version == 1) {
    cie.ra_reg = r.Fixed<uint8_t>();
  } else {
    cie.ra_reg = r.Uleb();
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
  // The CIE's instructions give every FDE's first row; they hold no
  // advance (a CIE describes no code), so one run covers them.
  std::vector<State> stack;
  (void)RunToAdvance(r, cie, &cie.initial, nullptr, &stack);
  cie.ok = true;
  return cie;
}

// One FDE: its CIE, its code [start, end), and a reader over its call frame
// instructions.
struct Fde {
  const Cie* cie = nullptr;
  uint64_t start = 0, end = 0;
  Reader instructions;
};

// Calls `fn(const Fde&)` for every FDE of the section with a usable CIE and
// a non-empty range that does not wrap, in section order.
template <typename Fn>
void ForEachFde(std::span<const std::byte> bytes, uint64_t section_vaddr, Fn fn) {
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
          fn(Fde{&cie, *start, *start + *range, r});
        }
      }
    }
    pos = end;
  }
}

FrameRule ToRule(const State& st) {
  FrameRule f;
  f.cfa_known = st.cfa.known && st.cfa.reg <= 0xffff;
  if (f.cfa_known) {
    f.cfa_reg = static_cast<uint16_t>(st.cfa.reg);
    f.cfa_offset = st.cfa.offset;
  }
  f.ra = st.ra.kind;
  if (f.ra == FrameRule::Ra::kSaved) f.ra_offset = st.ra.offset;
  return f;
}

}  // namespace

std::vector<FdeRange> ParseEhFrame(std::span<const std::byte> bytes, uint64_t section_vaddr) {
  std::vector<FdeRange> out;
  std::vector<State> stack;
  ForEachFde(bytes, section_vaddr, [&](const Fde& fde) {
    Reader r = fde.instructions;
    State st = fde.cie->initial;
    stack.clear();
    const Step step = RunToAdvance(r, *fde.cie, &st, &fde.cie->initial, &stack);
    const uint64_t first = step.stop == Stop::kAdvance ? step.advance : 0;
    bool entry = st.cfa.known && st.cfa.reg == kDwarfRsp && st.cfa.offset == 8;
    // A landing pad cannot sit at offset 0 of its region, so GCC starts a
    // cold part that is one with a `nop` run at the CIE's rule, then sets
    // the frame's CFA. A function whose first instruction is one byte long
    // pushes a register: CFA + 8.
    if (entry && first == 1) {
      State next = st;
      (void)RunToAdvance(r, *fde.cie, &next, &fde.cie->initial, &stack);
      if (next.cfa.known && next.cfa.offset > 16) entry = false;
    }
    out.push_back(FdeRange{fde.start, fde.end, entry});
  });
  std::sort(out.begin(), out.end(),
            [](const FdeRange& a, const FdeRange& b) { return a.start < b.start; });
  return out;
}

CfaTable ParseCfaTable(std::span<const std::byte> bytes, uint64_t section_vaddr) {
  std::vector<CfaTable::Row> rows;
  std::vector<State> stack;
  ForEachFde(bytes, section_vaddr, [&](const Fde& fde) {
    Reader r = fde.instructions;
    State st = fde.cie->initial;
    stack.clear();
    uint64_t loc = fde.start;
    while (loc < fde.end) {
      const Step step = RunToAdvance(r, *fde.cie, &st, &fde.cie->initial, &stack);
      if (step.stop == Stop::kUnknown) break;  // the rest of the FDE is not known
      uint64_t next = fde.end;
      if (step.stop == Stop::kAdvance) {
        uint64_t delta = 0;
        if (!__builtin_mul_overflow(step.advance, fde.cie->code_align, &delta) &&
            delta < fde.end - loc) {
          next = loc + delta;
        }
      }
      if (next > loc) rows.push_back({loc, next, ToRule(st)});
      loc = next;
      if (step.stop == Stop::kEnd) break;
    }
  });
  std::stable_sort(rows.begin(), rows.end(), [](const CfaTable::Row& a, const CfaTable::Row& b) {
    return a.start < b.start;
  });
  CfaTable table;
  for (const CfaTable::Row& row : rows) {
    if (!table.rows_.empty()) {
      CfaTable::Row& last = table.rows_.back();
      if (row.start < last.end) continue;  // overlaps an earlier FDE's code
      if (row.start == last.end && row.rule == last.rule) {
        last.end = row.end;
        continue;
      }
    }
    table.rows_.push_back(row);
  }
  return table;
}

std::optional<FrameRule> CfaTable::Find(uint64_t vaddr) const {
  auto it = std::upper_bound(rows_.begin(), rows_.end(), vaddr,
                             [](uint64_t v, const Row& row) { return v < row.start; });
  if (it == rows_.begin()) return std::nullopt;
  --it;
  if (vaddr >= it->end) return std::nullopt;
  return it->rule;
}

}  // namespace ptsnap::elf
