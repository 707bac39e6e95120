// The flow decoder. Its structure follows libipt 2.0's layering, because
// exactness against libipt is the contract (flow_decoder.h): a query layer
// (libipt/src/pt_query_decoder.c: packets, the event queue with its
// bindings, read-ahead, the TNT cache, time) under a block layer
// (libipt/src/pt_block_decoder.c: proceeding through code to the next
// decision point or event). The speed comes from the block layer: a block
// cache keyed by address holding each block's instruction count, last
// instruction and successors, decoded once with Zydis, and a fast path for
// the common case (TNT bits cached, no event pending).
#include "flow/flow_decoder.h"

#include <array>
#include <cstring>
#include <string_view>

#include "flow/block_cache.h"
#include "flow/event_queue.h"
#include "flow/insn.h"
#include "flow/packets.h"

namespace ptsnap::flow {

bool operator==(const Item& a, const Item& b) {
  if (a.kind != b.kind || a.has_now != b.has_now || a.now != b.now) return false;
  switch (a.kind) {
    case ItemKind::kSync: return a.offset == b.offset;
    case ItemKind::kNextIp: return a.ip == b.ip;
    case ItemKind::kError: return a.error == b.error && a.ip == b.ip;
    case ItemKind::kBlock:
      return a.ip == b.ip && a.end_ip == b.end_ip && a.ninsn == b.ninsn && a.mode == b.mode &&
             a.speculative == b.speculative &&
             (a.iclass == b.iclass || a.iclass == InsnClass::kError ||
              b.iclass == InsnClass::kError);
    case ItemKind::kEvent: break;
  }
  if (a.event != b.event || a.ip_suppressed != b.ip_suppressed ||
      a.status_update != b.status_update || a.has_tsc != b.has_tsc || a.tsc != b.tsc)
    return false;
  switch (a.event) {
    case EventType::kEnabled: return a.ip == b.ip && a.resumed == b.resumed;
    case EventType::kAsyncDisabled:
    case EventType::kAsyncBranch: return a.ip == b.ip && a.to == b.to;
    case EventType::kExecMode: return a.ip == b.ip && a.mode == b.mode;
    case EventType::kTsx:
      return a.ip == b.ip && a.speculative == b.speculative && a.aborted == b.aborted;
    case EventType::kCbr: return a.ratio == b.ratio;
    case EventType::kDisabled:
    case EventType::kOverflow:
    case EventType::kExstop:
    case EventType::kTick: return a.ip == b.ip;
    case EventType::kPaging: return a.payload == b.payload && a.non_root == b.non_root;
    case EventType::kAsyncPaging:
      return a.ip == b.ip && a.payload == b.payload && a.non_root == b.non_root;
    case EventType::kVmcs:
    case EventType::kPwre:
    case EventType::kPwrx:
    case EventType::kMnt: return a.payload == b.payload;
    case EventType::kAsyncVmcs:
    case EventType::kMwait: return a.ip == b.ip && a.payload == b.payload;
    case EventType::kPtwrite: return a.ip == b.ip && a.payload == b.payload && a.size == b.size;
    case EventType::kStop: return true;
  }
  return false;
}

namespace {

constexpr int kStatusEventPending = 1;  // pts_event_pending
constexpr int kStatusIpSuppressed = 2;  // pts_ip_suppressed
constexpr int kStatusEos = 4;           // pts_eos

}  // namespace

// ---------------------------------------------------------------------------

struct LibiptCacheModel::Set {
  CacheKeys keys;
};
LibiptCacheModel::LibiptCacheModel() : set_(std::make_unique<Set>()) {}
LibiptCacheModel::~LibiptCacheModel() = default;

struct FlowDecoder::State {
  State(const Config& c, CodeReader* r, CacheKeys* shared)
      : cfg(c), code(r), libipt_set(shared != nullptr ? shared : &own_set) {}

  Config cfg;
  CodeReader* code;
  std::array<BlockCache, 4> caches;  // by ExecMode
  // What libipt's block cache would hold, by CodeReader::LibiptCacheKey:
  // the decoder's own or one shared with other streams' decoders.
  CacheKeys own_set;
  CacheKeys* libipt_set;
  [[nodiscard]] bool LibiptHasCache(uint64_t a) const {
    uint64_t key = 0;
    return code->LibiptCacheKey(a, &key);
  }
  [[nodiscard]] bool LibiptCached(uint64_t a) const {
    uint64_t key = 0;
    return code->LibiptCacheKey(a, &key) && libipt_set->all.Contains(key);
  }
  void LibiptInsert(uint64_t a, ExecMode m) {
    uint64_t key = 0;
    if (!code->LibiptCacheKey(a, &key)) return;
    libipt_set->all.Insert(key);
    if (m == ExecMode::k64) return;
    if (!libipt_set->other_mode)
      libipt_set->other_mode = std::make_unique<std::array<AddressSet, 3>>();
    (*libipt_set->other_mode)[static_cast<size_t>(m)].Insert(key);
  }
  // The mode libipt's cache entry at `a` (cached) was filled in.
  [[nodiscard]] ExecMode LibiptCachedMode(uint64_t a) const {
    uint64_t key = 0;
    if (!libipt_set->other_mode || !code->LibiptCacheKey(a, &key)) return ExecMode::k64;
    for (size_t m = 0; m < libipt_set->other_mode->size(); ++m) {
      if ((*libipt_set->other_mode)[m].Contains(key)) return static_cast<ExecMode>(m);
    }
    return ExecMode::k64;
  }
  // Every cached block's instruction sizes, in order, with kPtwriteBit set
  // on PTWRITEs (the one class other than kOther inside a block).
  std::vector<uint8_t> insn_sizes;
  static constexpr uint8_t kPtwriteBit = 0x80;
  [[nodiscard]] uint8_t SizeAt(const BlockEntry* e, uint32_t k) const {
    return static_cast<uint8_t>(insn_sizes[e->sizes_at + k] & ~kPtwriteBit);
  }
  [[nodiscard]] InsnClass ClassAt(const BlockEntry* e, uint32_t k) const {
    return (insn_sizes[e->sizes_at + k] & kPtwriteBit) != 0 ? InsnClass::kPtwrite
                                                            : InsnClass::kOther;
  }

  // --- query layer (pt_query_decoder) ---
  const uint8_t* pos = nullptr;   // null: never synchronised
  const uint8_t* sync = nullptr;  // the last PSB synchronised on
  bool have_next = false;         // decoder->next != NULL
  PacketType next = PacketType::kPad;
  struct {
    uint64_t ip = 0;
    bool have = false, suppressed = false;
  } last_ip;
  uint64_t tnt_bits = 0, tnt_index = 0;  // pt_tnt_cache
  // Emulated PTWRITE (perf-intel-pt.txt, "Emulated PTWRITE"): after the
  // `jmp` over the signature, the next 64 TNT bits are the payload, the
  // first its highest bit. `eptw_left`: bits still to come; the block item
  // whose branch took the last one carries the payload (Item::mark).
  int eptw_left = 0;
  uint64_t eptw_payload = 0;
  Item* block_item = nullptr;  // the block item being decoded
  void TakeTntBit(bool taken) {
    eptw_payload = eptw_payload << 1 | (taken ? 1 : 0);
    if (--eptw_left == 0 && block_item != nullptr) {
      block_item->mark = true;
      block_item->payload = eptw_payload;
    }
  }
  Timing time;
  bool last_have_tsc = false;  // decoder->last_time's query
  uint64_t last_tsc = 0;
  EventQueue evq;
  Event* q_event = nullptr;  // decoder->event: set by a decode function
  bool q_enabled = false, consume_packet = false;

  // --- block layer (pt_block_decoder) ---
  uint64_t ip = 0;
  ExecMode mode = ExecMode::kUnknown;
  int status = 0;
  bool enabled = false, process_event = false, speculative = false;
  Event event;  // decoder->event
  // An instruction a paging, VMCS or PTWRITE event bound to, postponed
  // until its events are delivered (decoder->process_insn, insn, bound_*).
  bool process_insn = false, bound_paging = false, bound_vmcs = false, bound_ptwrite = false;
  Insn pinsn;
  std::array<uint64_t, 65> retstack{};
  std::array<BlockEntry*, 65> retentry{};  // the return site's block, when known
  uint8_t rs_top = 0, rs_bottom = 0;

  // --- the driving loop (StreamDecoder's) ---
  enum class Phase : uint8_t { kSync, kSegment, kDone } phase = Phase::kSync;
  uint64_t last_sync = ~uint64_t{0};
  uint64_t insns = 0;

  // ===== query layer =====

  [[nodiscard]] uint64_t Offset(const uint8_t* p) const {
    return static_cast<uint64_t>(p - cfg.begin);
  }

  int Fetch() {
    have_next = false;
    if (pos == nullptr || pos < cfg.begin || pos > cfg.end) return kErrNoSync;
    int e = FetchType(pos, cfg.end, &next);
    if (e < 0) return e;
    have_next = true;
    return 0;
  }

  [[nodiscard]] static bool IsTip(PacketType t) { return t == PacketType::kTip; }
  [[nodiscard]] static bool IsTnt(PacketType t) {
    return t == PacketType::kTnt8 || t == PacketType::kTnt64;
  }

  [[nodiscard]] bool WillEvent() const {
    if (!have_next) return false;
    switch (next) {
      case PacketType::kTipPge:
      case PacketType::kTipPgd:
      case PacketType::kPip:
      case PacketType::kOvf:
      case PacketType::kMode:
      case PacketType::kCbr:
      case PacketType::kStop:
      case PacketType::kVmcs:
      case PacketType::kMnt:
      case PacketType::kExstop:
      case PacketType::kMwait:
      case PacketType::kPwre:
      case PacketType::kPwrx:
      case PacketType::kPtw: return true;
      case PacketType::kPsbEnd: return evq.Pending(kBindPsbend);
      case PacketType::kTip: return evq.Pending(kBindTip);
      case PacketType::kFup: return evq.Pending(kBindFup);
      default: return false;
    }
  }
  [[nodiscard]] bool WillEos() const {
    if (have_next) return false;
    PacketType t;
    return pos != nullptr && FetchType(pos, cfg.end, &t) == kErrEos;
  }
  [[nodiscard]] int StatusFlags() const {
    int flags = 0;
    if (tnt_index == 0) {
      if (WillEvent()) flags |= kStatusEventPending;
      if (WillEos()) flags |= kStatusEos;
    }
    return flags;
  }
  [[nodiscard]] int ProvokeFetchError() const {
    if (pos == nullptr || pos < cfg.begin || pos > cfg.end) return kErrNoSync;
    PacketType t;
    const int e = FetchType(pos, cfg.end, &t);
    return e < 0 ? e : kErrInternal;
  }

  void EventTime(Event* ev) const {
    ev->tsc = time.tsc();
    ev->has_tsc = time.have_tsc();
  }
  // pt_qry_event_ip
  void EventIp(uint64_t* out, Event* ev) const {
    if (!last_ip.have || last_ip.suppressed) {
      *out = 0;
      ev->ip_suppressed = true;
    } else {
      *out = last_ip.ip;
    }
  }
  int LastIpQuery(uint64_t* out) const {
    if (!last_ip.have) {
      *out = 0;
      return kErrNoIp;
    }
    if (last_ip.suppressed) {
      *out = 0;
      return -12;  // pte_ip_suppressed
    }
    *out = last_ip.ip;
    return 0;
  }
  void UpdateLastIp(unsigned ipc, uint64_t v) {
    switch (ipc) {
      case 0: last_ip.suppressed = true; return;
      case 1: last_ip.ip = (last_ip.ip & ~0xffffull) | (v & 0xffffull); break;
      case 2: last_ip.ip = (last_ip.ip & ~0xffffffffull) | (v & 0xffffffffull); break;
      case 3:
        last_ip.ip = (v & (1ull << 47)) != 0 ? v | ~0xffffffffffffull : v & 0xffffffffffffull;
        break;
      case 4: last_ip.ip = (last_ip.ip & ~0xffffffffffffull) | (v & 0xffffffffffffull); break;
      case 6: last_ip.ip = v; break;
      default: return;  // reserved: the parser refused it
    }
    last_ip.have = true;
    last_ip.suppressed = false;
  }

  // Parses the packet at pos (its type already fetched).
  int Read(Packet* p) const { return ParsePacket(pos, cfg.end, p); }

  int DecodeIp(Packet* p) {
    const int size = Read(p);
    if (size < 0) return size;
    UpdateLastIp(p->ipc, p->payload);
    return size;
  }

  // dfun->decode for the packet at pos.
  int DecodeNext() {
    Packet p;
    switch (next) {
      case PacketType::kUnknown: return -4;            // pte_bad_opc
      case PacketType::kInvalid: return kErrInternal;  // scans only, never fetched
      case PacketType::kPad: pos += 1; return 0;
      case PacketType::kPsb: return DecodePsb();
      case PacketType::kTip: return DecodeTip();
      case PacketType::kTnt8: {
        // Up to 6 outcomes below a stop bit, shifted left once.
        const unsigned v = static_cast<unsigned>(*pos) >> 1;
        if (tnt_index != 0) return kErrBadContext;
        const int bits = 31 - __builtin_clz(v);
        tnt_bits = v & ((1u << bits) - 1);
        tnt_index = uint64_t{1} << (bits - 1);
        pos += 1;
        return 0;
      }
      case PacketType::kTnt64: {
        const int size = Read(&p);
        if (size < 0) return size;
        if (tnt_index != 0) return kErrBadContext;
        if (p.tnt_bits == 0) return kErrBadPacket;
        tnt_bits = p.payload;
        tnt_index = uint64_t{1} << (p.tnt_bits - 1);
        pos += size;
        return 0;
      }
      case PacketType::kTipPge: return DecodeTipPge();
      case PacketType::kTipPgd: return DecodeTipPgd();
      case PacketType::kFup: return DecodeFup();
      case PacketType::kOvf: return DecodeOvf();
      case PacketType::kMode: {
        const int size = Read(&p);
        if (size < 0) return size;
        Event* ev;
        if (p.mode_leaf == 0) {
          ev = evq.Enqueue(kBindTip);
          if (ev == nullptr) return kErrNoMem;
          ev->type = EventType::kExecMode;
          ev->mode = ModeFromBits(p.mode_bits);
        } else {
          if (!q_enabled) {
            ev = evq.Standalone();
            ev->ip = 0;
            ev->ip_suppressed = true;
            q_event = ev;
          } else {
            ev = evq.Enqueue(kBindFup);
            if (ev == nullptr) return kErrNoMem;
          }
          ev->type = EventType::kTsx;
          ev->speculative = (p.mode_bits & 1) != 0;
          ev->aborted = (p.mode_bits & 2) != 0;
        }
        EventTime(ev);
        pos += size;
        return 0;
      }
      case PacketType::kPsbEnd: {
        const int st = ProcessPendingPsbEvents();
        if (st != 0) return st < 0 ? st : 0;
        pos += 2;
        return 0;
      }
      case PacketType::kTsc: {
        const int size = Read(&p);
        if (size < 0) return size;
        const int e = time.Tsc(p.payload, false, cfg.timing);
        if (e < 0) return e;
        pos += size;
        return 0;
      }
      case PacketType::kCbr: {
        const int size = Read(&p);
        if (size < 0) return size;
        const int e = time.Cbr(static_cast<uint8_t>(p.payload), false, cfg.timing);
        if (e < 0) return e;
        Event* ev = evq.Standalone();
        ev->type = EventType::kCbr;
        ev->ratio = static_cast<uint8_t>(p.payload);
        q_event = ev;
        EventTime(ev);
        pos += size;
        return 0;
      }
      case PacketType::kTma: return DecodeTma();
      case PacketType::kMtc: {
        const int size = Read(&p);
        if (size < 0) return size;
        const int e = time.Mtc(static_cast<uint8_t>(p.payload), cfg.timing);
        if (e < 0) return e;
        pos += size;
        return 0;
      }
      case PacketType::kCyc: {
        const int size = Read(&p);
        if (size < 0) return size;
        // SKD007: a 2-byte CYC whose second byte is an OVF's 0xf3 is a
        // 1-byte CYC followed by the OVF.
        if (cfg.errata.skd007 && size == 2 && (p.payload & ~uint64_t{0x1f}) == 0x20 &&
            pos + size < cfg.end && pos[size] == 0xf3) {
          pos += 1;
          return 0;
        }
        const int e = time.Cyc(p.payload, cfg.timing);
        if (e < 0) return e;
        pos += size;
        return 0;
      }
      case PacketType::kStop: {
        Event* ev = evq.Standalone();
        ev->type = EventType::kStop;
        q_event = ev;
        EventTime(ev);
        pos += 2;
        return 0;
      }
      // Power events: libipt gives them no time.
      case PacketType::kPwre:
      case PacketType::kPwrx: {
        const int size = Read(&p);
        if (size < 0) return size;
        Event* ev = evq.Standalone();
        ev->type = next == PacketType::kPwre ? EventType::kPwre : EventType::kPwrx;
        ev->payload = next == PacketType::kPwre ? PwrePayload(p.payload) : PwrxPayload(p.payload);
        q_event = ev;
        pos += size;
        return 0;
      }
      case PacketType::kMnt: {
        const int size = Read(&p);
        if (size < 0) return size;
        Event* ev = evq.Standalone();
        ev->type = EventType::kMnt;
        ev->payload = p.payload;
        q_event = ev;
        EventTime(ev);
        pos += size;
        return 0;
      }
      case PacketType::kPip: return DecodePip();
      case PacketType::kVmcs: return DecodeVmcs();
      case PacketType::kExstop:
      case PacketType::kMwait:
      case PacketType::kPtw: return DecodeFupBound();
    }
    return kErrInternal;
  }

  // PWRE's and PWRX's fields as Item::payload packs them (pt_pkt_read_pwre,
  // pt_pkt_read_pwrx: the bits libipt keeps).
  static uint64_t PwrePayload(uint64_t raw) {
    return ((raw >> 12) & 0xf) | ((raw >> 8) & 0xf) << 8 | ((raw >> 3) & 1) << 16;
  }
  static uint64_t PwrxPayload(uint64_t raw) {
    return ((raw >> 4) & 0xf) | (raw & 0xf) << 8 | ((raw >> 8) & 1) << 16 |
           ((raw >> 10) & 1) << 17 | ((raw >> 11) & 1) << 18;
  }

  // pt_qry_decode_pip: a paging event, standalone (it binds to an
  // instruction: BindsToPip) or, while a FUP's async branch waits for its
  // TIP, an async paging event bound to that TIP.
  int DecodePip() {
    Packet p;
    const int size = Read(&p);
    if (size < 0) return size;
    Event* ev;
    if (evq.Find(kBindTip, EventType::kAsyncBranch) == nullptr) {
      ev = evq.Standalone();
      ev->type = EventType::kPaging;
      q_event = ev;
    } else {
      ev = evq.Enqueue(kBindTip);
      if (ev == nullptr) return kErrNoMem;
      ev->type = EventType::kAsyncPaging;
    }
    ev->payload = p.payload;
    ev->non_root = p.mode_bits != 0;
    EventTime(ev);
    pos += size;
    return 0;
  }

  // pt_qry_decode_vmcs: like PIP, but ahead of a queued async paging event
  // (libipt moves the paging event behind it: the VMCS applies first).
  int DecodeVmcs() {
    Packet p;
    const int size = Read(&p);
    if (size < 0) return size;
    if (Event* paging = evq.Find(kBindTip, EventType::kAsyncPaging); paging != nullptr) {
      Event* moved = evq.Enqueue(kBindTip);
      if (moved == nullptr) return kErrNoMem;
      *moved = *paging;
      // The slot becomes the VMCS event and keeps the rest of the paging
      // event (its time). In libipt's union, async_vmcs.ip lies where
      // async_paging.non_root was, and the TIP may never set it (TIP.PGD).
      paging->type = EventType::kAsyncVmcs;
      paging->payload = p.payload;
      paging->ip = paging->non_root ? 1 : 0;
      paging->non_root = false;
    } else if (evq.Find(kBindTip, EventType::kAsyncBranch) != nullptr) {
      Event* ev = evq.Enqueue(kBindTip);
      if (ev == nullptr) return kErrNoMem;
      ev->type = EventType::kAsyncVmcs;  // no time: libipt gives it none
      ev->payload = p.payload;
    } else {
      Event* ev = evq.Standalone();
      ev->type = EventType::kVmcs;
      ev->payload = p.payload;
      q_event = ev;
      EventTime(ev);
    }
    pos += size;
    return 0;
  }

  // pt_qry_decode_exstop, _mwait, _ptw: with the IP bit (MWAIT always) the
  // event waits for the FUP that carries its IP; without it, it is
  // standalone with the IP suppressed. libipt gives them no time.
  int DecodeFupBound() {
    Packet p;
    const int size = Read(&p);
    if (size < 0) return size;
    const bool with_fup = next == PacketType::kMwait || p.mode_bits != 0;
    Event* ev;
    if (with_fup) {
      ev = evq.Enqueue(kBindFup);
      if (ev == nullptr) return kErrInternal;  // libipt: -pte_internal here, not -pte_nomem
    } else {
      ev = evq.Standalone();
      ev->ip_suppressed = true;
      q_event = ev;
    }
    switch (next) {
      case PacketType::kExstop: ev->type = EventType::kExstop; break;
      case PacketType::kMwait: ev->type = EventType::kMwait; break;
      default:
        ev->type = EventType::kPtwrite;
        ev->size = static_cast<uint8_t>(size - 2);
        break;
    }
    ev->payload = p.payload;  // EXSTOP: none
    pos += size;
    return 0;
  }

  int DecodeTma() {
    Packet p;
    const int size = Read(&p);
    if (size < 0) {
      // SKZ84 (VMX TSC scaling corrupts packets): libipt skips a TMA with
      // reserved bits set, and one byte more (ptps_tma + 1).
      if (cfg.errata.skz84 && size == kErrBadPacket) {
        pos += 8;
        return 0;
      }
      return size;
    }
    const int e = time.Tma(static_cast<uint16_t>(p.payload), p.fc, cfg.timing);
    if (e < 0) return e;
    pos += size;
    return 0;
  }

  // dfun->header inside PSB+.
  int DecodeHeader() {
    Packet p;
    switch (next) {
      case PacketType::kPad: pos += 1; return 0;
      case PacketType::kFup: {
        const int size = Read(&p);
        if (size < 0) return size;
        if (cfg.errata.bdm70 && !q_enabled) {
          // BDM70: a FUP in a PSB+ while tracing is disabled, right before
          // the TIP.PGE: ignore it.
          const int e = ScanBdm70(pos + size);
          if (e < 0) return e;
          if (e > 0) {
            pos += size;
            return 0;
          }
        }
        UpdateLastIp(p.ipc, p.payload);
        if (p.ipc != 0) q_enabled = true;
        pos += size;
        return 0;
      }
      case PacketType::kMode: {
        const int size = Read(&p);
        if (size < 0) return size;
        Event* ev = evq.Enqueue(kBindPsbend);
        if (ev == nullptr) return kErrNoMem;
        if (p.mode_leaf == 0) {
          ev->type = EventType::kExecMode;
          ev->mode = ModeFromBits(p.mode_bits);
        } else {
          ev->type = EventType::kTsx;
          ev->speculative = (p.mode_bits & 1) != 0;
          ev->aborted = (p.mode_bits & 2) != 0;
        }
        pos += size;
        return 0;
      }
      case PacketType::kTsc: {
        const int size = Read(&p);
        if (size < 0) return size;
        const int e = time.Tsc(p.payload, true, cfg.timing);
        if (e < 0) return e;
        pos += size;
        return 0;
      }
      case PacketType::kCbr: {
        const int size = Read(&p);
        if (size < 0) return size;
        const int e = time.Cbr(static_cast<uint8_t>(p.payload), true, cfg.timing);
        if (e < 0) return e;
        Event* ev = evq.Enqueue(kBindPsbend);
        if (ev == nullptr) return kErrNoMem;
        ev->type = EventType::kCbr;
        ev->ratio = static_cast<uint8_t>(p.payload);
        pos += size;
        return 0;
      }
      case PacketType::kTma: return DecodeTma();
      case PacketType::kMtc:
      case PacketType::kCyc: return DecodeNext();
      case PacketType::kUnknown: return -4;
      case PacketType::kMnt: {
        const int size = Read(&p);
        if (size < 0) return size;
        Event* ev = evq.Enqueue(kBindPsbend);
        if (ev == nullptr) return kErrNoMem;
        ev->type = EventType::kMnt;
        pos += size;
        return 0;
      }
      case PacketType::kPip:
      case PacketType::kVmcs: {  // pt_qry_header_pip, _vmcs: reported at PSBEND
        const int size = Read(&p);
        if (size < 0) return size;
        Event* ev = evq.Enqueue(kBindPsbend);
        if (ev == nullptr) return kErrNoMem;
        const bool pip = next == PacketType::kPip;
        ev->type = pip ? EventType::kAsyncPaging : EventType::kAsyncVmcs;
        ev->payload = p.payload;
        ev->non_root = pip && p.mode_bits != 0;
        pos += size;
        return 0;
      }
      default: return kErrBadContext;  // no header function
    }
  }

  // check_erratum_bdm70: 1 when a TIP.PGE follows with only status packets
  // in between.
  int ScanBdm70(const uint8_t* p) const {
    for (;;) {
      Packet pk;
      const int size = ScanPacket(p, &pk);
      if (size < 0) return size == kErrEosCode ? 0 : size;
      switch (pk.type) {
        case PacketType::kTipPge: return 1;
        case PacketType::kPad:
        case PacketType::kTsc:
        case PacketType::kCbr:
        case PacketType::kPsbEnd:
        case PacketType::kPip:
        case PacketType::kMode:
        case PacketType::kVmcs:
        case PacketType::kTma:
        case PacketType::kMtc:
        case PacketType::kCyc:
        case PacketType::kMnt: break;
        default: return 0;
      }
      p += size;
    }
  }

  int ReadPsbHeader() {
    last_ip = {};
    for (;;) {
      const int e = Fetch();
      if (e != 0) return e;
      if (next == PacketType::kPsbEnd || next == PacketType::kOvf) return 0;
      const int h = DecodeHeader();
      if (h != 0) return h;
    }
  }

  int DecodePsb() {
    const uint8_t* at = pos;
    Packet p;
    const int size = Read(&p);
    if (size < 0) return size;
    time.Psb(cfg.timing);
    pos += size;
    const int e = ReadPsbHeader();
    if (e < 0) {
      pos = at;
      evq.Clear(kBindPsbend);
      have_next = true;
      next = PacketType::kPsb;
      return e;
    }
    return 0;
  }

  int ProcessPendingPsbEvents() {
    Event* ev = evq.Dequeue(kBindPsbend);
    if (ev == nullptr) return 0;
    ev->status_update = true;
    EventTime(ev);
    switch (ev->type) {
      case EventType::kExecMode:
      case EventType::kTsx:
      case EventType::kAsyncPaging:
      case EventType::kAsyncVmcs: EventIp(&ev->ip, ev); break;
      case EventType::kCbr: break;
      case EventType::kMnt: ev->status_update = false; break;
      default: return kErrInternal;
    }
    q_event = ev;
    return 1;
  }

  int DecodeTip() {
    Packet p;
    const int size = DecodeIp(&p);
    if (size < 0) return size;
    Event* ev = evq.Dequeue(kBindTip);
    if (ev != nullptr) {
      switch (ev->type) {
        case EventType::kAsyncBranch:
          consume_packet = true;
          EventIp(&ev->to, ev);
          break;
        case EventType::kAsyncPaging:
        case EventType::kAsyncVmcs:
        case EventType::kExecMode: EventIp(&ev->ip, ev); break;
        default: return kErrBadContext;
      }
      q_event = ev;
      if (evq.Pending(kBindTip)) return 0;
      if (!consume_packet) return 0;
      consume_packet = false;
    }
    pos += size;
    return 0;
  }

  int DecodeTipPge() {
    Packet p;
    const int size = DecodeIp(&p);
    if (size < 0) return size;
    Event* ev = nullptr;
    if (!consume_packet) {
      ev = evq.Standalone();
      ev->type = EventType::kEnabled;
      if (LastIpQuery(&ev->ip) < 0) return kErrBadPacket;
      EventTime(ev);
      tnt_bits = tnt_index = 0;
      eptw_left = 0;
      consume_packet = true;
      q_enabled = true;
    } else {
      ev = evq.Dequeue(kBindTip);
      if (ev != nullptr) {
        if (ev->type != EventType::kExecMode) return kErrBadContext;
        EventIp(&ev->ip, ev);
      }
    }
    if (ev == nullptr) return kErrInternal;
    q_event = ev;
    if (evq.Pending(kBindTip)) return 0;
    if (!consume_packet) return kErrInternal;
    consume_packet = false;
    pos += size;
    return 0;
  }

  int DecodeTipPgd() {
    Packet p;
    const int size = DecodeIp(&p);
    if (size < 0) return size;
    Event* ev = evq.Dequeue(kBindTip);
    if (ev != nullptr) {
      switch (ev->type) {
        case EventType::kAsyncBranch: {
          const uint64_t at = ev->ip;
          ev->type = EventType::kAsyncDisabled;
          ev->ip = at;
          EventIp(&ev->to, ev);
          break;
        }
        // Ordered after the async disable: applied while disabled.
        case EventType::kAsyncPaging:
        case EventType::kAsyncVmcs:
        case EventType::kExecMode: ev->ip_suppressed = true; break;
        default: return kErrBadContext;
      }
    } else {
      ev = evq.Standalone();
      ev->type = EventType::kDisabled;
      EventIp(&ev->ip, ev);
      EventTime(ev);
    }
    q_event = ev;
    if (evq.Pending(kBindTip)) return 0;
    q_enabled = false;
    pos += size;
    return 0;
  }

  int DecodeFup() {
    Packet p;
    const int size = DecodeIp(&p);
    if (size < 0) return size;
    Event* ev = evq.Dequeue(kBindFup);
    if (ev != nullptr) {
      switch (ev->type) {
        case EventType::kOverflow: {
          consume_packet = true;
          const int e = LastIpQuery(&ev->ip);
          if (e < 0) return e;
          break;
        }
        case EventType::kTsx:
          if (!ev->aborted) consume_packet = true;
          EventIp(&ev->ip, ev);
          break;
        case EventType::kExstop:
        case EventType::kMwait:
        case EventType::kPtwrite:
          consume_packet = true;
          EventIp(&ev->ip, ev);
          break;
        default: return kErrInternal;
      }
      q_event = ev;
      if (evq.Pending(kBindFup)) return 0;
      if (!consume_packet) return 0;
      consume_packet = false;
    } else {
      uint64_t from = 0;
      const int e = LastIpQuery(&from);
      if (e < 0) return e;
      ev = evq.Enqueue(kBindTip);
      if (ev == nullptr) return kErrNoMem;
      ev->type = EventType::kAsyncBranch;
      ev->ip = from;
      EventTime(ev);
    }
    pos += size;
    return 0;
  }

  // pt_pkt_next for libipt's scans ahead of the query decoder (each with a
  // packet decoder of its own): the packet at `p` and its size, or an
  // error. Under SKZ84 a TMA with reserved bits set is an 8-byte invalid
  // packet (pt_pkt_decode_tma), as the query decoder skips it (DecodeTma).
  int ScanPacket(const uint8_t* p, Packet* pk) const {
    if (p > cfg.end) return kErrNoSync;
    if (p == cfg.end) return kErrEosCode;
    const int size = ParsePacket(p, cfg.end, pk);
    // pt_pkt_read_tnt refuses a TNT-64 with no outcomes (the query decoder
    // too: DecodeNext).
    if (size > 0 && pk->type == PacketType::kTnt64 && pk->tnt_bits == 0) return kErrBadPacket;
    if (size == kErrBadPacket && cfg.errata.skz84 && cfg.end - p >= 2 && p[0] == 0x02 &&
        p[1] == 0x73) {
      pk->type = PacketType::kInvalid;
      pk->size = 8;
      return 8;
    }
    return size;
  }
  [[nodiscard]] static bool IsTiming(PacketType t) {
    return t == PacketType::kTsc || t == PacketType::kCbr || t == PacketType::kTma ||
           t == PacketType::kMtc || t == PacketType::kCyc;
  }
  // Applies a timing packet met by a scan to `t` (pt_qry_apply_*); other
  // packets leave it. Returns 0 or the error.
  int ApplyTiming(const Packet& pk, Timing* t) const {
    switch (pk.type) {
      case PacketType::kTsc: return t->Tsc(pk.payload, /*header=*/false, cfg.timing);
      case PacketType::kCbr:
        return t->Cbr(static_cast<uint8_t>(pk.payload), /*header=*/false, cfg.timing);
      case PacketType::kTma: return t->Tma(static_cast<uint16_t>(pk.payload), pk.fc, cfg.timing);
      case PacketType::kMtc: return t->Mtc(static_cast<uint8_t>(pk.payload), cfg.timing);
      case PacketType::kCyc: return t->Cyc(pk.payload, cfg.timing);
      default: return 0;
    }
  }
  // The next packet of a scan, from `*p`, that is not a timing packet; the
  // timing packets before it are applied to `t` (libipt's scans apply them
  // to copies of the decoder's time and calibration). `*p` moves past the
  // packet; its size, or an error.
  int ScanPastTiming(const uint8_t** p, Timing* t, Packet* pk) const {
    for (;;) {
      const int size = ScanPacket(*p, pk);
      if (size < 0) return size;
      *p += size;
      if (!IsTiming(pk->type)) return size;
      const int e = ApplyTiming(*pk, t);
      if (e < 0) return e;
    }
  }
  // pt_qry_find_header_fup, in the PSB+ that starts at `p` (after the PSB):
  // 1 with the FUP in `fup`, 0 at PSBEND without one, or an error.
  int FindHeaderFup(const uint8_t* p, Packet* fup) const {
    for (;;) {
      const int size = ScanPacket(p, fup);
      if (size < 0) return size;
      if (fup->type == PacketType::kPsbEnd) return 0;
      if (fup->type == PacketType::kFup) return 1;
      p += size;
    }
  }

  // pt_qry_find_ovf_fup from `from`: the offset from `from` to after the FUP
  // that follows, 0 when none does (tracing was off as the overflow
  // resolved), or an error.
  int FindOvfFup(const uint8_t* from) const {
    const uint8_t* p = from;
    for (;;) {
      Packet pk;
      const int size = ScanPacket(p, &pk);
      if (size < 0) return size;
      p += size;
      switch (pk.type) {
        case PacketType::kFup: return static_cast<int>(p - from);
        case PacketType::kInvalid: return kErrBadOpc;
        case PacketType::kPad:
        case PacketType::kMnt:
        case PacketType::kCbr:
        case PacketType::kTsc:
        case PacketType::kTma:
        case PacketType::kMtc:
        case PacketType::kCyc: break;
        case PacketType::kPsbEnd:
        case PacketType::kTip:
        case PacketType::kTipPgd:
        case PacketType::kTnt8:
        case PacketType::kTnt64: return kErrBadContext;
        default: return 0;
      }
    }
  }

  // pt_qry_decode_ovf, with libipt's workarounds for SKD010 (the FUP
  // dropped), APL11 (an extra TIP.PGD) and APL12 (an extra FUP).
  int DecodeOvf() {
    const int st = ProcessPendingPsbEvents();
    if (st != 0) return st < 0 ? st : 0;
    const Timing t = time;
    QueryReset();
    time = t;
    time.ResetCalibration();
    pos += 2;
    const int found = FindOvfFup(pos);
    if (found <= 0) {
      if (cfg.errata.skd010) {
        const int s = Skd010();
        if (s <= 0) return s;
      }
      if (cfg.errata.apl11 && found == kErrBadContext) {
        const int s = Apl11();
        if (s <= 0) return s;
      }
      if (found < 0 && found != kErrEosCode) return found;
      return OvfDisabled();
    }
    if (cfg.errata.apl12) {
      const int s = Apl12(found);
      if (s <= 0) return s;
    }
    Event* ev = evq.Enqueue(kBindFup);
    if (ev == nullptr) return kErrInternal;
    ev->type = EventType::kOverflow;
    q_enabled = true;
    EventTime(ev);
    return 0;
  }
  // pt_qry_event_ovf_disabled: the overflow resolved with tracing off.
  int OvfDisabled() {
    Event* ev = evq.Standalone();
    ev->type = EventType::kOverflow;
    ev->ip_suppressed = true;
    q_enabled = false;
    q_event = ev;
    EventTime(ev);
    return 0;
  }

  // skd010_scan_for_ovf_resume: an OVF without a FUP. If what follows shows
  // tracing was on (the FUP was dropped), resume at a later packet and IP
  // with the time the packets skipped lead to; 1 where it cannot tell or
  // cannot recover (the overflow is then taken as resolved with tracing
  // off), 0 when recovered, or an error.
  int Skd010() {
    Timing t = time;                  // libipt's copies of time and tcal
    const uint8_t* tsx_at = nullptr;  // a MODE.TSX that may bind to a FUP
    Timing tsx_time;
    const uint8_t* p = pos;
    for (;;) {
      Packet pk;
      const int size = ScanPastTiming(&p, &t, &pk);
      if (size < 0) return size == kErrEosCode ? 1 : size;
      const uint8_t* at = p - size;
      switch (pk.type) {
        case PacketType::kTipPge: return 1;
        case PacketType::kTipPgd:  // the erratum applies: resume after the disable
          time = t;
          pos = p;
          return OvfDisabled();
        case PacketType::kTnt8:
        case PacketType::kTnt64: return 1;  // applies, but no IP to resume at
        case PacketType::kPip:
        case PacketType::kVmcs: break;
        case PacketType::kMode:
          if (pk.mode_leaf == 1) {  // TSX; MODE.Exec changes are ignored
            if (tsx_at != nullptr) return 1;
            tsx_at = at;
            tsx_time = t;
          }
          break;
        case PacketType::kFup:
          if (tsx_at != nullptr) return Skd010Recover(pk, tsx_time, tsx_at);
          return Skd010Recover(pk, t, at);
        case PacketType::kTip: return Skd010Recover(pk, t, p);
        case PacketType::kPsb: {  // on if and only if its PSB+ has a FUP
          Packet fup;
          const int f = FindHeaderFup(p, &fup);
          if (f <= 0) return f == 0 || f == kErrEosCode ? 1 : f;
          return Skd010Recover(fup, t, at);
        }
        case PacketType::kPsbEnd: return kErrBadContext;
        case PacketType::kOvf:
        case PacketType::kStop:
        case PacketType::kInvalid:
        case PacketType::kUnknown:
        case PacketType::kMwait: return 1;
        case PacketType::kExstop:
        case PacketType::kPtw:
          if (pk.mode_bits != 0) return 1;  // binds to a FUP: not skipped
          break;
        default: break;  // PAD, MNT, PWRE, PWRX: skipped
      }
    }
  }
  // skd010_recover: the overflow event at the IP of `ip_packet`, tracing
  // on, decoding resuming at `resume` with time `t`.
  int Skd010Recover(const Packet& ip_packet, const Timing& t, const uint8_t* resume) {
    const auto saved = last_ip;  // libipt updates a copy (the reset one)
    UpdateLastIp(ip_packet.ipc, ip_packet.payload);
    uint64_t at = 0;
    if (LastIpQuery(&at) < 0) {
      last_ip = saved;
      return kErrBadContext;  // no full IP
    }
    Event* ev = evq.Standalone();
    ev->type = EventType::kOverflow;
    ev->ip = at;
    pos = resume;
    q_enabled = true;
    time = t;
    q_event = ev;
    EventTime(ev);
    return 0;
  }

  // apl11_apply: an OVF followed by a TIP.PGD (FindOvfFup's bad context).
  // Resumes after the TIP.PGD with tracing off when one follows; 1 when
  // another packet shows the erratum does not apply, or an error.
  int Apl11() {
    Timing t = time;
    const uint8_t* p = pos;
    for (;;) {
      Packet pk;
      const int size = ScanPastTiming(&p, &t, &pk);
      if (size < 0) return size;  // the end too
      switch (pk.type) {
        case PacketType::kTipPgd:
          time = t;
          pos = p;
          return OvfDisabled();
        case PacketType::kInvalid: return kErrBadOpc;
        case PacketType::kFup:
        case PacketType::kPsb:
        case PacketType::kTipPge:
        case PacketType::kStop:
        case PacketType::kOvf:
        case PacketType::kMode:
        case PacketType::kPip:
        case PacketType::kVmcs:
        case PacketType::kExstop:
        case PacketType::kMwait:
        case PacketType::kPwre:
        case PacketType::kPwrx:
        case PacketType::kPtw: return 1;
        case PacketType::kUnknown:
        case PacketType::kPad:
        case PacketType::kMnt: break;
        case PacketType::kPsbEnd:
        case PacketType::kTip:
        case PacketType::kTnt8:
        case PacketType::kTnt64: return kErrBadContext;
        default: break;  // timing packets: ScanPastTiming applied them
      }
    }
  }

  // pt_qry_handle_apl12: an OVF followed by a FUP (`offset` bytes on, to
  // after the FUP) although the overflow may have resolved with tracing
  // off. If what follows the FUP shows tracing off, resume after the FUP
  // with tracing off (the timing packets up to it applied); 1 when tracing
  // is on or it cannot tell, or an error.
  int Apl12(int offset) {
    // apl12_tracing_is_disabled
    const uint8_t* p = pos + offset;
    for (bool disabled = false; !disabled;) {
      Packet pk;
      const int size = ScanPacket(p, &pk);
      if (size < 0) return size == kErrEosCode ? 1 : size;
      p += size;
      switch (pk.type) {
        case PacketType::kStop:
        case PacketType::kTipPge: disabled = true; break;
        case PacketType::kTnt8:
        case PacketType::kTnt64:
        case PacketType::kTip:
        case PacketType::kTipPgd:
        case PacketType::kOvf:
        case PacketType::kUnknown:
        case PacketType::kInvalid: return 1;
        case PacketType::kPsb: {  // off if and only if its PSB+ has no FUP
          Packet fup;
          const int f = FindHeaderFup(p, &fup);
          if (f != 0) return f == kErrEosCode ? 1 : f;
          disabled = true;
          break;
        }
        case PacketType::kPsbEnd: return kErrBadContext;
        default: break;
      }
    }
    // apl12_resume_disabled: through the FUP, keeping time.
    const uint8_t* end = pos + offset;
    for (const uint8_t* q = pos;;) {
      Packet pk;
      const int size = ScanPacket(q, &pk);
      if (size < 0) return size == kErrEosCode ? 0 : size;
      q += size;
      if (end <= q) {
        if (end < q) return kErrInternal;
        break;  // the FUP itself is skipped
      }
      switch (pk.type) {
        case PacketType::kMode:
        case PacketType::kPip:
        case PacketType::kVmcs: return kErrInternal;
        default: {
          const int e = ApplyTiming(pk, &time);
          if (e < 0) return e;
          break;
        }
      }
    }
    pos += offset;
    return OvfDisabled();
  }

  int ReadAhead() {
    // Inline first: the packets that dominate between branches (1-byte CYC,
    // MTC) are applied, a TNT-8 ends the read-ahead; anything else takes
    // the general loop below. Same effect, fewer dispatches.
    while (pos != nullptr && pos < cfg.end) {
      const uint8_t b = *pos;
      if ((b & 3) == 3) {  // CYC: 5 bits, then 7 per extension byte
        uint64_t value = b >> 3;
        const uint8_t* q = pos + 1;
        if ((b & 4) != 0) {
          unsigned shl = 5;
          bool more = true;
          while (more && q < cfg.end && shl <= 40) {
            value |= static_cast<uint64_t>(*q >> 1) << shl;
            more = (*q & 1) != 0;
            ++q;
            shl += 7;
          }
          // Cut off, very long, or SKD007's CYC-before-OVF: the general path.
          if (more || (cfg.errata.skd007 && q - pos == 2 && (value & ~uint64_t{0x1f}) == 0x20 &&
                       q < cfg.end && *q == 0xf3))
            break;
        }
        const int e = time.Cyc(value, cfg.timing);
        if (e < 0) {
          have_next = true;
          next = PacketType::kCyc;
          return e;
        }
        pos = q;
      } else if (b == 0x59 && cfg.end - pos >= 2) {  // MTC
        const int e = time.Mtc(pos[1], cfg.timing);
        if (e < 0) {
          have_next = true;
          next = PacketType::kMtc;
          return e;
        }
        pos += 2;
      } else {
        if ((b & 1) == 0 && b != 0 && b != 2) {
          have_next = true;
          next = PacketType::kTnt8;
          return 0;
        }
        break;
      }
    }
    for (;;) {
      const int e = Fetch();
      if (e != 0) return e;
      if (IsTip(next) || IsTnt(next)) return 0;
      if (WillEvent()) return 0;
      const int d = DecodeNext();
      if (d != 0) {
        if (d == kErrEosCode) {
          pos = cfg.end;
          have_next = false;
        }
        return d;
      }
    }
  }

  void QueryReset() {
    q_enabled = false;
    consume_packet = false;
    q_event = nullptr;
    last_ip = {};
    tnt_bits = tnt_index = 0;
    eptw_left = 0;
    time.Reset();
    last_have_tsc = false;
    last_tsc = 0;
    evq.Init();
  }
  void SaveLastTime() {
    last_have_tsc = time.have_tsc();
    last_tsc = time.tsc();
  }

  int CacheTnt() {
    for (;;) {
      if (!have_next) return ProvokeFetchError();
      if (WillEvent()) return kErrBadQuery;
      if (IsTip(next)) return kErrBadQuery;
      q_event = nullptr;
      const int e = DecodeNext();
      if (e != 0) return e;
      if (q_event != nullptr) return kErrEventIgnored;
      if (IsTnt(next)) break;
      const int r = ReadAhead();
      if (r != 0) return r;
    }
    SaveLastTime();
    const int r = ReadAhead();
    if (r < 0 && r != kErrEosCode) return r;
    return 0;
  }

  int QueryCond(bool* taken) {
    if (tnt_index == 0) {
      const int e = CacheTnt();
      if (e < 0) return e;
    }
    if (tnt_index == 0) return kErrBadQuery;
    *taken = (tnt_bits & tnt_index) != 0;
    tnt_index >>= 1;
    if (eptw_left > 0) TakeTntBit(*taken);
    return StatusFlags();
  }

  int QueryIndirect(uint64_t* addr) {
    int flags = 0;
    for (;;) {
      if (!have_next) return ProvokeFetchError();
      if (WillEvent()) return kErrBadQuery;
      q_event = nullptr;
      if (IsTnt(next) && tnt_index != 0) return kErrBadQuery;
      const bool tip = IsTip(next);
      const int e = DecodeNext();
      if (e != 0) return e;
      if (q_event != nullptr) return kErrEventIgnored;
      if (tip) {
        uint64_t ip2 = 0;
        if (LastIpQuery(&ip2) < 0) {
          flags |= kStatusIpSuppressed;
        } else {
          *addr = ip2;
        }
        break;
      }
      const int r = ReadAhead();
      if (r != 0) return r;
    }
    SaveLastTime();
    const int r = ReadAhead();
    if (r < 0 && r != kErrEosCode) return r;
    return flags | StatusFlags();
  }

  int QueryEvent(Event* out) {
    if (tnt_index != 0) return kErrBadQuery;
    for (;;) {
      if (!have_next) return ProvokeFetchError();
      if ((IsTip(next) || IsTnt(next)) && !WillEvent()) return kErrBadQuery;
      q_event = nullptr;
      const int e = DecodeNext();
      if (e != 0) return e;
      if (q_event != nullptr) {
        *out = *q_event;
        break;
      }
      const int r = ReadAhead();
      if (r != 0) return r;
    }
    SaveLastTime();
    const int r = ReadAhead();
    if (r < 0 && r != kErrEosCode) return r;
    return StatusFlags();
  }

  // pt_sync_forward: the PSB libipt finds searching from `from`.
  const uint8_t* SyncForward(const uint8_t* from) const {
    static constexpr uint64_t kPattern0 = 0x8202820282028202ull;
    static constexpr uint64_t kPattern1 = 0x0282028202820282ull;
    const uint8_t* start = from;
    auto addr = reinterpret_cast<uintptr_t>(from);
    const uint8_t* p = from + ((8 - (addr & 7)) & 7);
    for (;;) {
      const uint8_t* current = p;
      if (cfg.end - p < 8) return nullptr;
      p += 8;
      uint64_t val;
      std::memcpy(&val, current, 8);
      if (val != kPattern0 && val != kPattern1) continue;
      // pt_find_psb from p.
      // (libipt reads the byte at `end` here; ptsnap's buffers end in a 0.)
      const uint8_t* q = p;
      if (q >= cfg.end || *q != 0x02) ++q;
      for (; q + 1 < cfg.end; q += 2) {
        if (q[0] != 0x02 || q[1] != 0x82) break;
      }
      q -= 16;
      if (q < cfg.begin) continue;
      if (q[0] != 0x02 || q[1] != 0x82) continue;
      Packet pk;
      if (ParsePacket(q, cfg.end, &pk) < 0) continue;
      if (q < start) continue;
      return q;
    }
  }

  int QueryStart(const uint8_t* at, uint64_t* addr) {
    QueryReset();
    sync = at;
    pos = at;
    int e = Fetch();
    if (e != 0) return e;
    if (next != PacketType::kPsb) return kErrNoSync;
    e = DecodeNext();
    if (e < 0) return e;
    // The start address before reading ahead (an adjacent PSB+ may change
    // the IP); if there is none yet, whatever read-ahead found.
    const bool filled = LastIpQuery(addr) == 0;
    e = ReadAhead();
    if (e < 0) return e;
    int st = StatusFlags();
    if (!filled && LastIpQuery(addr) < 0) st |= kStatusIpSuppressed;
    return st;
  }

  int QuerySyncForward(uint64_t* addr) {
    const uint8_t* p = pos != nullptr ? pos : cfg.begin;
    if (p == sync) p += 16;
    if (p < cfg.begin) return kErrInternal;
    ptrdiff_t space = p - cfg.begin;
    if (space >= 16) space = 15;
    p -= space;
    if (p > cfg.end) return kErrInternal;
    const uint8_t* s = SyncForward(p);
    if (s == nullptr) return kErrEosCode;
    return QueryStart(s, addr);
  }

  // ===== block layer =====

  void RetPush(uint64_t a, BlockEntry* site = nullptr) {
    retstack[rs_top] = a;
    retentry[rs_top] = site;
    rs_top = rs_top == 64 ? 0 : rs_top + 1;
    if (rs_bottom == rs_top) rs_bottom = rs_bottom == 64 ? 0 : rs_bottom + 1;
  }
  int RetPop(uint64_t* a) {
    if (rs_top == rs_bottom) return kErrRetstackEmpty;
    rs_top = rs_top == 0 ? 64 : rs_top - 1;
    *a = retstack[rs_top];
    hint = retentry[rs_top];
    return 0;
  }

  int BlkStatus(int flags) const {
    if (!enabled) flags |= kStatusIpSuppressed;
    if ((status & kStatusEos) != 0 && !process_event) flags |= kStatusEos;
    return flags;
  }

  int Tick(uint64_t at) {
    if (!enabled) return kErrInternal;
    if (process_event) return 0;
    const uint64_t tsc = last_tsc;
    if (tsc == event.tsc) return 0;
    event = Event();
    event.type = EventType::kTick;
    event.ip = at;
    event.has_tsc = last_have_tsc;
    event.tsc = tsc;
    process_event = true;
    return 1;
  }
  int CondBranch(bool* taken) {
    const int st = QueryCond(taken);
    if (st < 0) return st;
    const int e = Tick(ip);
    if (e < 0) return e;
    return st;
  }
  int IndirectBranch(uint64_t* target) {
    const uint64_t at = ip;
    const int st = QueryIndirect(target);
    if (st < 0) return st;
    const int e = Tick(at);
    if (e < 0) return e;
    return st;
  }

  // perf's emulated-ptwrite signature: a `ud2` and "perf,ptwrite  ", which
  // a two-byte `jmp` jumps over (perf's intel_pt_emulated_ptwrite).
  static constexpr std::string_view kEptwMagic{"\x0f\x0bperf,ptwrite  ", 16};
  bool EptwMagicAt(uint64_t at) const {
    uint8_t buf[16];
    return code->Read(at, buf, sizeof buf) == sizeof buf &&
           std::memcmp(buf, kEptwMagic.data(), sizeof buf) == 0;
  }

  // Reads and decodes the instruction at `at`.
  int ReadInsn(uint64_t at, Insn* insn) const {
    uint8_t buf[15];
    const size_t n = code->Read(at, buf, sizeof buf);
    if (n == 0) return kErrNoMap;
    if (mode == ExecMode::kUnknown) return kErrBadInsn;  // pt_ild needs a mode
    if (!DecodeInsn(buf, n, at, mode, insn)) return kErrBadInsn;
    return 0;
  }

  void LogCall(const Insn& insn) {
    if (insn.iclass != InsnClass::kCall) return;
    if (insn.is_direct && insn.disp == 0) return;
    RetPush(insn.ip + insn.size);
  }

  // pt_blk_proceed_one_insn
  int ProceedOneInsn(Item* b, Insn* insn) {
    if (b->ninsn == 0xffff) return 0;
    const int e = ReadInsn(ip, insn);
    if (e < 0) return e;
    LogCall(*insn);
    b->iclass = insn->iclass;
    b->end_ip = insn->ip;
    b->size = insn->size;
    b->ninsn = static_cast<uint16_t>(b->ninsn + 1);
    return 1;
  }
  [[nodiscard]] static bool EndsBlock(const Insn& insn) {
    return insn.iclass == InsnClass::kCall || insn.iclass == InsnClass::kJump;
  }
  template <class Pred>
  int ProceedToInsn(Item* b, Insn* insn, Pred pred) {
    for (;;) {
      int st = ProceedOneInsn(b, insn);
      if (st <= 0) return st;
      if (pred(*insn)) return 1;
      st = NextIpNoTrace(*insn, &ip);
      if (st < 0) return st;
      if (EndsBlock(*insn)) return 0;
    }
  }
  // pt_blk_proceed_skl014: a TIP.PGD with its IP suppressed, where SKL014
  // lets a direct branch that leaves the filter regions (or enters a
  // TraceStop region) send one too. The event binds to the first such
  // branch, as the configured ranges say, or to a MOV CR3. 1 there, 0 when
  // the block ends first, or an error (kErrBadQuery at a branch that needs
  // trace, which the caller binds it to).
  int ProceedSkl014(Item* b, Insn* insn) {
    int st = 0;
    for (;;) {
      st = ProceedToInsn(b, insn, [](const Insn& i) {
        return ((i.iclass == InsnClass::kCall || i.iclass == InsnClass::kJump) && i.is_direct) ||
               (i.iclass == InsnClass::kOther && i.changes_cr3);
      });
      if (st <= 0 || insn->changes_cr3) break;
      uint64_t to = 0;
      st = NextIpNoTrace(*insn, &to);
      if (st < 0) break;
      st = FilterAddrCheck(to);
      if (st <= 0) {  // tracing is off at the target: this is the branch
        st = 1;
        break;
      }
      ip = to;
      // libipt ends the block at the branch here (end_on_call/end_on_jump)
      // and reports the event as reached (its status is still the check's 1).
      if (EndsBlock(*insn)) break;
    }
    return st;
  }
  // pt_filter_addr_check: 0 when `addr` is in a TraceStop range or, with
  // filter ranges configured, in none of them; else 1.
  [[nodiscard]] int FilterAddrCheck(uint64_t addr) const {
    for (const Config::AddrRange& r : cfg.addr_ranges) {
      if (r.cfg == 2 && r.a <= addr && addr <= r.b) return 0;
    }
    bool any_filter = false;
    for (const Config::AddrRange& r : cfg.addr_ranges) {
      if (r.cfg != 1) continue;
      if (r.a <= addr && addr <= r.b) return 1;
      any_filter = true;
    }
    return any_filter ? 0 : 1;
  }
  int ProceedToIp(Item* b, Insn* insn, uint64_t target) {
    for (;;) {
      if (ip == target) return 1;
      int st = ProceedOneInsn(b, insn);
      if (st <= 0) return st;
      st = NextIpNoTrace(*insn, &ip);
      if (st < 0) return st;
      if (EndsBlock(*insn)) return ip == target ? 1 : 0;
    }
  }
  // pt_blk_next_ip
  int NextIpWithTrace(const Insn& insn, uint64_t* out) {
    switch (insn.iclass) {
      case InsnClass::kCondJump: {
        bool taken = false;
        const int st = CondBranch(&taken);
        if (st < 0) return st;
        uint64_t n = insn.ip + insn.size;
        if (taken) n += static_cast<uint64_t>(insn.disp);
        *out = n;
        return st;
      }
      case InsnClass::kReturn: {
        bool taken = false;
        const int st = CondBranch(&taken);
        if (st < 0) {
          if (st != kErrBadQuery) return st;
          break;
        }
        if (!taken) return kErrBadRetcomp;
        const int e = RetPop(out);
        if (e < 0) return e;
        return st;
      }
      case InsnClass::kJump:
      case InsnClass::kCall:
        if (insn.is_direct) return kErrInternal;
        break;
      case InsnClass::kFarCall:
      case InsnClass::kFarReturn:
      case InsnClass::kFarJump: break;
      case InsnClass::kPtwrite:
      case InsnClass::kOther: return kErrInternal;
      case InsnClass::kError: return kErrBadInsn;
    }
    return IndirectBranch(out);
  }
  int ProceedWithTrace(const Insn& insn) {
    const int st = NextIpWithTrace(insn, &ip);
    if (st < 0) return st;
    status = st;
    if ((st & kStatusIpSuppressed) != 0) return kErrNoIp;
    return 0;
  }

  // A cache entry for the block at `at`. Like libipt's block cache it is
  // keyed by address alone: once libipt has an address cached it serves
  // the entry in the mode it was decoded in, whatever the current mode; an
  // entry libipt would not have yet is decoded again in the current mode.
  BlockEntry* Lookup(uint64_t at) {
    BlockCache& cache = caches[0];
    BlockEntry* old = cache.Find(at);
    if (old != nullptr && (old->mode == mode || LibiptCached(at))) return old;
    BlockEntry be;
    be.ip = at;
    be.mode = mode;
    be.sizes_at = static_cast<uint32_t>(insn_sizes.size());
    uint64_t cur = at;
    uint8_t buf[64];
    size_t have = 0, off = 0;
    uint64_t buf_ip = 0;
    for (;;) {
      if (be.ninsn == 0xffff) {
        be.error = 1;  // split: continue in a new block (not an error)
        break;
      }
      if (have - off < 15) {
        buf_ip = cur;
        have = code->Read(cur, buf, sizeof buf);
        off = 0;
      }
      Insn insn;
      if (have - off == 0) {
        be.error = kErrNoMap;
        break;
      }
      if (mode == ExecMode::kUnknown) {
        be.error = kErrBadInsn;  // pt_ild needs a mode
        break;
      }
      if (!DecodeInsn(buf + off, have - off, cur, mode, &insn)) {
        be.error = kErrBadInsn;
        break;
      }
      be.ninsn++;
      insn_sizes.push_back(
          static_cast<uint8_t>(insn.size | (insn.iclass == InsnClass::kPtwrite ? kPtwriteBit : 0)));
      be.end_ip = cur;
      be.size = insn.size;
      be.iclass = insn.iclass;
      be.is_direct = insn.is_direct;
      be.target = insn.ip + insn.size + static_cast<uint64_t>(insn.disp);
      be.pushes = insn.iclass == InsnClass::kCall && !(insn.is_direct && insn.disp == 0);
      if (insn.iclass != InsnClass::kOther && insn.iclass != InsnClass::kPtwrite) break;
      cur += insn.size;
      off = static_cast<size_t>(cur - buf_ip);
    }
    be.eptw = be.iclass == InsnClass::kJump && be.is_direct && be.size == 2 &&
              be.target == be.end_ip + 2 + kEptwMagic.size() && EptwMagicAt(be.end_ip + 2);
    if (old != nullptr) {
      *old = be;
      return old;
    }
    return cache.Insert(be);
  }

  // pt_blk_proceed_no_event: to the next decision point. Through libipt's
  // cache where libipt has the start address cached, else as libipt's first
  // pass, which fills its cache (Fill).
  int ProceedNoEvent(Item* b, BlockEntry* e) {
    if (!LibiptCached(e->ip)) return Fill(b, e);
    // A run of 65536 instructions or more (our entry split it at 0xffff):
    // libipt's cache splits it where its entries' counts overflow a block.
    if (e->error == 1) return kErrUnsupported;
    if (e->ninsn > 0) b->mode = e->mode;  // libipt: the cache entry's
    return WholeEntry(b, e, /*first_pass=*/false);
  }
  // The entry's whole straight-line run as one block, then its branch
  // decided (or its error): libipt's pass from its cache and its pass
  // through code it has no cache for (pt_blk_proceed_no_event_uncached).
  // An entry that ends in an error ends in an ordinary instruction, so
  // end_ip, size and iclass are that instruction's.
  int WholeEntry(Item* b, BlockEntry* e, bool first_pass) {
    if (e->ninsn > 0) {
      b->ninsn = static_cast<uint16_t>(e->ninsn);
      b->end_ip = e->end_ip;
      b->size = e->size;
      b->iclass = e->iclass;
    }
    if (e->error != 0) {
      // The instruction after the last one (or the first) cannot be
      // decoded: libipt returns the block so far with the error.
      ip = e->ninsn > 0 ? e->end_ip + e->size : e->ip;
      return EntryError(*e);
    }
    return Decide(e, first_pass);
  }
  // An entry's error as libipt reports it (1: a run split at 0xffff
  // instructions, which libipt would not split).
  static int EntryError(const BlockEntry& e) { return e.error == 1 ? kErrUnsupported : e.error; }

  // The branch that ends `e`'s block: the next IP, from trace if needed.
  // Leaves the next block's entry in `hint` when it is known cheaply.
  int Decide(BlockEntry* e, bool first_pass) {
    ip = e->end_ip;
    hint = nullptr;
    const uint64_t fall = e->end_ip + e->size;
    if (e->pushes) RetPush(fall, Successor(&e->next_fall, fall));
    switch (e->iclass) {
      case InsnClass::kCall:
      case InsnClass::kJump:
        if (e->is_direct) {
          ip = e->target;
          hint = Successor(&e->next_taken, ip);
          if (e->eptw) {
            eptw_left = 64;
            eptw_payload = 0;
          }
          return 0;
        }
        break;
      case InsnClass::kCondJump: {
        bool taken = false;
        const int st = CondBranch(&taken);
        if (st < 0) return st;
        status = st;
        if (taken) {
          ip = e->target;
          hint = Successor(&e->next_taken, ip);
        } else {
          ip = fall;
          hint = Successor(&e->next_fall, ip);
        }
        return 0;
      }
      case InsnClass::kReturn: {
        bool taken = false;
        const int st = CondBranch(&taken);
        if (st < 0) {
          if (st != kErrBadQuery) return st;
          break;
        }
        status = st;
        if (!taken) return kErrBadRetcomp;
        return RetPop(&ip);
      }
      default: break;
    }
    const int st = IndirectBranch(&ip);
    if (st < 0) return st;
    status = st;
    // libipt checks for a suppressed IP only on its first pass
    // (pt_blk_proceed_with_trace), not from its cache.
    if (first_pass && (st & kStatusIpSuppressed) != 0) return kErrNoIp;
    // A one-entry target cache for indirect branches.
    if (e->next_taken != nullptr && e->next_taken->ip == ip) {
      hint = e->next_taken;
    } else {
      hint = e->next_taken = Lookup(ip);
    }
    return 0;
  }
  BlockEntry* hint = nullptr;  // the entry for `ip`, when Decide knew it

  // libipt's first pass through the block at e->ip
  // (pt_blk_proceed_no_event_fill_cache): the block ends early at an
  // address libipt already caches and after 1024 instructions; addresses
  // join its cache unless the pass fails.
  int Fill(Item* b, BlockEntry* e) {
    // No block cache there: every pass is like this one, caching nothing.
    if (!LibiptHasCache(e->ip)) return WholeEntry(b, e, /*first_pass=*/true);
    uint64_t a = e->ip;
    const uint32_t n = e->ninsn;
    for (uint32_t k = 0; k < n; ++k) {
      const bool last = k + 1 == n;
      if (k > 0 && LibiptCached(a)) {
        b->ninsn = static_cast<uint16_t>(k);
        b->iclass = ClassAt(e, k - 1);
        b->size = static_cast<uint8_t>(SizeAt(e, k - 1));
        // libipt cached `a` in another mode (code run in two modes): its
        // fill gives up, caching nothing of this run.
        if (LibiptCachedMode(a) != e->mode) return kErrInternal;
        AddRun(e->ip, e, k);
        ip = a;
        return 0;
      }
      b->ninsn = static_cast<uint16_t>(k + 1);
      b->end_ip = a;
      b->size = static_cast<uint8_t>(SizeAt(e, k));
      b->iclass = last && e->error == 0 ? e->iclass : ClassAt(e, k);
      if (!last || e->error != 0) {
        if (k == 1023) {  // out of steps: a trampoline ends the block
          AddRun(e->ip, e, k + 1);
          ip = a + SizeAt(e, k);
          return 0;
        }
        a += SizeAt(e, k);
        continue;
      }
      // The branch at the end.
      const bool needs_trace =
          !((e->iclass == InsnClass::kCall || e->iclass == InsnClass::kJump) && e->is_direct);
      if (!needs_trace) {
        AddRun(e->ip, e, n);
        return Decide(e, true);
      }
      LibiptInsert(a, e->mode);
      const int st = Decide(e, true);
      if (st < 0) return st;
      AddRun(e->ip, e, n - 1);
      return 0;
    }
    // The entry ends in an undecodable instruction (or is empty).
    ip = a;
    return EntryError(*e);
  }
  void AddRun(uint64_t a, const BlockEntry* e, uint32_t count) {
    for (uint32_t k = 0; k < count; ++k) {
      LibiptInsert(a, e->mode);
      a += SizeAt(e, k);
    }
  }
  [[nodiscard]] Insn LastInsn(const BlockEntry& e) const {
    Insn i;
    i.ip = e.end_ip;
    i.size = e.size;
    i.iclass = e.iclass;
    i.is_direct = e.is_direct;
    i.disp = static_cast<int64_t>(e.target - (e.end_ip + e.size));
    return i;
  }
  int SetDisableResumeIp(const Insn& insn) {
    if (insn.iclass == InsnClass::kCall || insn.iclass == InsnClass::kFarCall) {
      ip = insn.ip + insn.size;
    } else {
      ip = 0;
    }
    return 0;
  }

  int ProceedEvent(Item* b) {
    Insn insn;
    Event& ev = event;
    int st = 0;
    switch (ev.type) {
      case EventType::kEnabled: break;
      case EventType::kDisabled:
        if (ev.ip_suppressed) {
          if (cfg.addr_filter && cfg.errata.skl014) {
            st = ProceedSkl014(b, &insn);
          } else {
            st = ProceedToInsn(b, &insn, [](const Insn& i) { return i.changes_cr3; });
          }
        } else {
          st = ProceedToIp(b, &insn, ev.ip);
        }
        if (st <= 0) {
          if (st != kErrBadQuery) return st;
          SetDisableResumeIp(insn);
        }
        break;
      case EventType::kAsyncDisabled:
        st = ProceedToIp(b, &insn, ev.ip);
        if (st <= 0) return st;
        if (cfg.errata.skd022 && Skd022()) return ProceedEvent(b);
        break;
      case EventType::kAsyncBranch:
        st = ProceedToIp(b, &insn, ev.ip);
        if (st <= 0) return st;
        break;
      case EventType::kOverflow: break;
      case EventType::kExecMode:
        if (!ev.ip_suppressed) {
          st = ProceedToIp(b, &insn, ev.ip);
          if (st == kErrBadQuery) st = ProceedWithTrace(insn);
          if (st < 0) return st;
          if (ip != ev.ip) return 0;
        }
        break;
      case EventType::kTsx:
        if (ev.ip_suppressed) break;
        st = ProceedToIp(b, &insn, ev.ip);
        if (st <= 0) return st;
        break;
      case EventType::kPaging:
      case EventType::kVmcs: {
        if (!enabled) break;
        const bool paging = ev.type == EventType::kPaging;
        st = paging ? ProceedToInsn(b, &insn, BindsToPip) : ProceedToInsn(b, &insn, BindsToVmcs);
        if (st <= 0) return st;
        // At most one event of each kind binds to an instruction.
        (paging ? bound_paging : bound_vmcs) = true;
        return PostponeInsn(insn);
      }
      case EventType::kAsyncPaging:
      case EventType::kAsyncVmcs:
        if (ev.ip_suppressed) break;
        st = ProceedToIpWithTrace(b, ev.ip);
        if (st <= 0) return st;
        break;
      case EventType::kExstop:
      case EventType::kMwait:
        if (!enabled || ev.ip_suppressed) break;
        st = ProceedToIp(b, &insn, ev.ip);
        if (st <= 0) return st;
        break;
      case EventType::kPtwrite:
        if (!enabled) break;
        // pt_blk_proceed_to_ptwrite: to the next PTWRITE, or to the FUP's
        // IP and past the instruction there; either is the block's last.
        if (ev.ip_suppressed) {
          st = ProceedToInsn(b, &insn,
                             [](const Insn& i) { return i.iclass == InsnClass::kPtwrite; });
          if (st <= 0) return st;
          ev.ip = insn.ip;
          ev.ip_suppressed = false;
        } else {
          st = ProceedToIp(b, &insn, ev.ip);
          if (st <= 0) return st;
          st = ProceedOneInsn(b, &insn);
          if (st <= 0) return st;
        }
        bound_ptwrite = true;
        return PostponeInsn(insn);
      case EventType::kStop:
      case EventType::kPwre:
      case EventType::kPwrx:
      case EventType::kTick:
      case EventType::kCbr:
      case EventType::kMnt: break;
    }
    return BlkStatus(kStatusEventPending);
  }

  // pt_blk_proceed_to_ip_with_trace: to `target`, through one branch that
  // needs trace if need be (which ends the block). 1: reached, 0: not.
  int ProceedToIpWithTrace(Item* b, uint64_t target) {
    Insn insn;
    int st = ProceedToIp(b, &insn, target);
    if (st == kErrBadQuery) st = ProceedWithTrace(insn);
    if (st < 0) return st;
    return ip == target ? 1 : 0;
  }

  int PostponeInsn(const Insn& insn) {
    if (process_insn) return kErrInternal;
    process_insn = true;
    pinsn = insn;
    return BlkStatus(kStatusEventPending);
  }
  void ClearPostponedInsn() { process_insn = bound_paging = bound_vmcs = bound_ptwrite = false; }
  // pt_blk_proceed_postponed_insn: past the postponed instruction, with
  // trace if it is a branch that needs it.
  int ProceedPostponedInsn() {
    if (!process_insn) return 0;
    if (enabled) {
      int st = NextIpNoTrace(pinsn, &ip);
      if (st < 0) {
        if (st != kErrBadQuery) return st;
        st = ProceedWithTrace(pinsn);
        if (st < 0) return st;
      }
    }
    ClearPostponedInsn();
    return 0;
  }

  // pt_blk_handle_erratum_skd022: an async disable at VMLAUNCH/VMRESUME is
  // a synchronous one. True when it changed the event.
  bool Skd022() {
    Insn insn;
    if (ReadInsn(event.ip, &insn) < 0 || !insn.vm_entry) return false;
    event.type = EventType::kDisabled;
    event.ip = event.to;
    return true;
  }

  int FetchEvent() {
    if (process_event) return 1;
    if ((status & kStatusEventPending) == 0) return 0;
    const int st = QueryEvent(&event);
    if (st < 0) return st;
    process_event = true;
    status = st;
    return 1;
  }

  // pt_blk_proceed_trailing_event: the events that bind to the current IP
  // (or to the postponed instruction), else past that instruction.
  int ProceedTrailingEvent() {
    int st = FetchEvent();
    if (st <= 0) {
      if (st < 0) return st;
      st = ProceedPostponedInsn();
      if (st < 0) return st;
      return BlkStatus(0);
    }
    Event& ev = event;
    const int pending = kStatusEventPending;
    switch (ev.type) {
      case EventType::kDisabled:
        if (!process_insn) break;
        // A synchronous disable binds to a CR3 write, or to the next branch
        // that needs trace: the postponed one, if it is one.
        if (ev.ip_suppressed && pinsn.changes_cr3) return BlkStatus(pending);
        st = NextIpNoTrace(pinsn, &ip);
        if (st < 0) {
          if (st != kErrBadQuery) return st;
          SetDisableResumeIp(pinsn);
          return BlkStatus(pending);
        }
        ClearPostponedInsn();
        if (!ev.ip_suppressed && ip == ev.ip) return BlkStatus(pending);
        break;
      case EventType::kPaging:
      case EventType::kVmcs: {
        if (!enabled) return BlkStatus(pending);
        // Another event of the other kind may bind to the same instruction.
        const bool paging = ev.type == EventType::kPaging;
        bool& bound = paging ? bound_paging : bound_vmcs;
        if (!process_insn || bound) break;
        if (!(paging ? BindsToPip(pinsn) : BindsToVmcs(pinsn))) break;
        bound = true;
        return BlkStatus(pending);
      }
      case EventType::kPtwrite:
        if (!enabled) return BlkStatus(pending);
        if (!process_insn || bound_ptwrite) break;
        if (!ev.ip_suppressed || pinsn.iclass != InsnClass::kPtwrite) break;
        bound_ptwrite = true;
        return BlkStatus(pending);
      default: {
        // The rest do not bind to an instruction.
        st = ProceedPostponedInsn();
        if (st < 0) return st;
        switch (ev.type) {
          case EventType::kAsyncDisabled:
            if (ip != ev.ip) break;
            if (cfg.errata.skd022 && Skd022()) break;
            return BlkStatus(pending);
          case EventType::kAsyncBranch:
            if (ip != ev.ip) break;
            return BlkStatus(pending);
          case EventType::kTsx:
            // BDM64 (Broadwell): libipt may take the abort as reached where
            // the code cannot lead to it (pt_blk_handle_erratum_bdm64, a
            // bounded walk of the code): not decoded here.
            if (cfg.errata.bdm64 && ev.aborted && !ev.ip_suppressed && ip != ev.ip)
              return kErrUnsupported;
            [[fallthrough]];
          case EventType::kAsyncPaging:
          case EventType::kAsyncVmcs:
          case EventType::kExecMode:
            if (!ev.ip_suppressed && ip != ev.ip) break;
            return BlkStatus(pending);
          case EventType::kExstop:
          case EventType::kMwait:
            if (!ev.ip_suppressed && enabled && ip != ev.ip) break;
            return BlkStatus(pending);
          default: return BlkStatus(pending);  // enabled, overflow, stop, power, tick, CBR, MNT
        }
      }
    }
    st = ProceedPostponedInsn();
    if (st < 0) return st;
    return BlkStatus(0);
  }

  int Proceed(Item* b) {
    const int st = FetchEvent();
    if (st != 0) {
      if (st < 0) return st;
      return ProceedEvent(b);
    }
    if (!enabled) return (status & kStatusEos) != 0 ? kErrEosCode : kErrNoEnable;
    const int e = ProceedNoEvent(b, Entry());
    if (e < 0) return e;
    return ProceedTrailingEvent();
  }

  int NextBlock(Item* b) {
    *b = Item();
    block_item = b;
    b->kind = ItemKind::kBlock;
    b->ip = ip;
    b->mode = mode;
    b->speculative = speculative;
    return Proceed(b);
  }

  int UserEvent(Item* out) {
    if (!process_event) return kErrBadQuery;
    Event& ev = event;
    switch (ev.type) {
      case EventType::kEnabled:
        if (ev.ip == ip) ev.resumed = true;
        if (ev.status_update) return kErrBadContext;
        if (ev.ip_suppressed) return kErrNoIp;
        if (enabled) return kErrBadContext;
        ip = ev.ip;
        enabled = true;
        process_event = false;
        break;
      case EventType::kAsyncDisabled:
      case EventType::kDisabled:
        if (ev.type == EventType::kAsyncDisabled && ip != ev.ip) return kErrBadQuery;
        if (ev.status_update) return kErrBadContext;
        if (!enabled) return kErrBadContext;
        enabled = false;
        process_event = false;
        break;
      case EventType::kAsyncBranch:
        if (ip != ev.ip) return kErrBadQuery;
        if (ev.status_update) return kErrBadContext;
        if (!enabled) return kErrBadContext;
        ip = ev.to;
        process_event = false;
        break;
      case EventType::kOverflow:
        if (ev.status_update) return kErrBadContext;
        if (ev.ip_suppressed) {
          enabled = false;
          ip = 0;
        } else {
          enabled = true;
          ip = ev.ip;
        }
        speculative = false;
        process_event = false;
        break;
      case EventType::kExecMode:
        if (!ev.ip_suppressed && ip != ev.ip) return kErrBadQuery;
        if (ev.status_update && enabled && mode != ExecMode::kUnknown && mode != ev.mode)
          return kErrBadStatusUpdate;
        mode = ev.mode;
        process_event = false;
        break;
      case EventType::kTsx:
        if (!ev.ip_suppressed && ip != ev.ip) return kErrBadQuery;
        speculative = ev.speculative;
        process_event = false;
        break;
      case EventType::kStop:
        if (ev.status_update) return kErrBadContext;
        if (enabled) return kErrBadContext;
        process_event = false;
        break;
      case EventType::kAsyncPaging:
      case EventType::kAsyncVmcs:
        if (!ev.ip_suppressed && ip != ev.ip) return kErrBadQuery;
        process_event = false;
        break;
      case EventType::kExstop:
      case EventType::kMwait:
        if (!ev.ip_suppressed && enabled && ip != ev.ip) return kErrBadQuery;
        process_event = false;
        break;
      case EventType::kPaging:  // libipt notes the CR3 / VMCS in its asid
      case EventType::kVmcs:
      case EventType::kPtwrite:
      case EventType::kPwre:
      case EventType::kPwrx:
      case EventType::kTick:
      case EventType::kCbr:
      case EventType::kMnt: process_event = false; break;
    }
    *out = Item();
    out->kind = ItemKind::kEvent;
    out->event = ev.type;
    out->ip_suppressed = ev.ip_suppressed;
    out->status_update = ev.status_update;
    out->offset = pos != nullptr ? Offset(pos) : 0;
    out->has_tsc = ev.has_tsc;
    out->tsc = ev.tsc;
    out->ip = ev.ip;
    out->to = ev.to;
    out->mode = ev.mode;
    out->speculative = ev.speculative;
    out->aborted = ev.aborted;
    out->resumed = ev.resumed;
    out->ratio = ev.ratio;
    out->non_root = ev.non_root;
    out->size = ev.size;
    out->payload = ev.payload;
    return ProceedTrailingEvent();
  }

  int BlkSyncForward() {
    mode = ExecMode::kUnknown;
    ip = 0;
    status = 0;
    enabled = false;
    process_event = false;
    speculative = false;
    event = Event();
    ClearPostponedInsn();
    rs_top = rs_bottom = 0;
    const int st = QuerySyncForward(&ip);
    if (st < 0) return st;
    status = st;
    if ((st & kStatusIpSuppressed) == 0) enabled = true;
    return ProceedTrailingEvent();
  }

  // ===== the fast path =====

  // Whether Fast may run: tracing on, no event pending or being processed,
  // nothing to report (the state after an uneventful block).
  [[nodiscard]] bool CanRunFast() const {
    return phase == Phase::kSegment && status_out == 0 && !process_event && !process_insn &&
           enabled && (status & (kStatusEventPending | kStatusEos)) == 0;
  }

  // The entry for `ip`: the hint when it matches.
  BlockEntry* Entry() {
    BlockEntry* h = hint;
    hint = nullptr;
    if (h != nullptr && h->ip == ip && (h->mode == mode || h->start_cached)) return h;
    return Lookup(ip);
  }

  BlockEntry* Successor(BlockEntry** slot, uint64_t at) {
    BlockEntry* e = *slot;
    if (e == nullptr) *slot = e = Lookup(at);
    return e;
  }

  // NextBlock for blocks libipt serves from its cache (start cached, no
  // decode error), chained through successor hints instead of lookups, and
  // with conditional branches and compressed returns taken straight from
  // the cached TNT bits when no tick is due. Appends up to `room` blocks
  // (and an error item after the last on failure); returns when the state
  // needs the general Step (an event, the end, a first pass).
  size_t Fast(Item* out, size_t room, uint64_t* insns_out) {
    size_t k = 0;
    while (k < room) {
      BlockEntry* e = Entry();
      if (!e->start_cached) {
        if (!LibiptCached(e->ip)) {
          hint = e;
          break;
        }
        e->start_cached = true;
      }
      if (e->error != 0 || e->ninsn > 1024) {
        hint = e;
        break;
      }
      Item& b = out[k++];
      b = Item();
      block_item = &b;
      b.kind = ItemKind::kBlock;
      b.ip = e->ip;
      b.end_ip = e->end_ip;
      b.size = e->size;
      b.ninsn = static_cast<uint16_t>(e->ninsn);
      b.iclass = e->iclass;
      b.mode = e->mode;  // libipt: the cache entry's
      b.speculative = speculative;
      fast_insns += e->ninsn;
      const InsnClass c = e->iclass;
      // The bit is cached and no tick is due; more bits follow, or the next
      // packet is a TNT-8 (the query then reports nothing pending either).
      if ((c == InsnClass::kCondJump || c == InsnClass::kReturn) && last_tsc == event.tsc &&
          (tnt_index > 1 || (tnt_index == 1 && have_next && next == PacketType::kTnt8))) {
        const bool taken = (tnt_bits & tnt_index) != 0;
        if (c == InsnClass::kCondJump) {
          tnt_index >>= 1;
          if (eptw_left > 0) TakeTntBit(taken);
          status = 0;
          const uint64_t fall = e->end_ip + e->size;
          if (taken) {
            ip = e->target;
            hint = Successor(&e->next_taken, ip);
          } else {
            ip = fall;
            hint = Successor(&e->next_fall, ip);
          }
          Stamp(&b);
          continue;
        }
        if (taken && rs_top != rs_bottom) {
          tnt_index >>= 1;
          if (eptw_left > 0) TakeTntBit(taken);
          status = 0;
          rs_top = rs_top == 0 ? 64 : rs_top - 1;
          ip = retstack[rs_top];
          hint = retentry[rs_top];
          Stamp(&b);
          continue;
        }
      }
      int st = Decide(e, /*first_pass=*/false);
      if (st >= 0 && process_event && event.type == EventType::kTick &&
          (status & (kStatusEventPending | kStatusEos)) == 0 && k < room) {
        // Only a tick is due: pt_blk_next reports it pending, pt_blk_event
        // returns it and finds nothing after it.
        Item& t = out[k++];
        t = Item();
        t.kind = ItemKind::kEvent;
        t.event = EventType::kTick;
        t.ip = event.ip;
        t.has_tsc = event.has_tsc;
        t.tsc = event.tsc;
        Stamp(&b);
        Stamp(&t);
        process_event = false;
        status_out = 0;
        continue;
      }
      if (st >= 0) st = ProceedTrailingEvent();
      Stamp(&b);
      // Events the block raised (mostly ticks): delivered here as Step
      // would, one pt_blk_event each.
      while (st > 0 && (st & kStatusEventPending) != 0 && k < room) {
        st = UserEvent(&out[k]);
        if (st >= 0) Stamp(&out[k++]);
      }
      status_out = st;
      if (st < 0) {
        EndSegment(out, &k, st);
        Stamp(&out[k - 1]);
        break;
      }
      if (st != 0 || !CanRunFast()) break;
    }
    return Emitted(k, insns_out);
  }
  size_t Emitted(size_t k, uint64_t* insns_out) {
    *insns_out += fast_insns;
    fast_insns = 0;
    return k;
  }
  uint64_t fast_insns = 0;

  // Item::now: pt_blk_time at this point, which is pt_qry_time: the query
  // layer's last_time (the estimate saved when the latest query began,
  // before its read-ahead).
  void Stamp(Item* it) const {
    it->has_now = last_have_tsc;
    it->now = it->has_now ? last_tsc : 0;
  }

  // ===== the driving loop =====

  static Item ErrorItem(int code) {
    Item i;
    i.kind = ItemKind::kError;
    i.error = code;
    return i;
  }

  void EndSegment(Item* out, size_t* n, int code) {
    if (code == kErrEosCode) {
      phase = Phase::kDone;
      return;
    }
    Item& e = out[(*n)++];
    e = ErrorItem(code);
    e.offset = pos != nullptr ? Offset(pos) : 0;
    last_sync = sync != nullptr ? Offset(sync) : 0;
    phase = Phase::kSync;
  }

  // One step of StreamDecoder::Step; appends 0-2 items to out.
  bool Step(Item* out, size_t* n, uint64_t* insns_out) {
    if (phase == Phase::kSegment) {
      if ((status_out & kStatusEventPending) != 0) {
        const int st = UserEvent(&out[*n]);
        status_out = st;
        if (st < 0) {
          EndSegment(out, n, st);
          return phase != Phase::kDone;
        }
        ++*n;
        return true;
      }
      if ((status_out & kStatusEos) != 0) {
        phase = Phase::kDone;
        at_eos = true;
        return false;
      }
      Item& b = out[*n];
      const int st = NextBlock(&b);
      status_out = st;
      // libipt's pt_block.ip of a call that decoded nothing: where the code
      // could not be read (flow_decoder.h, Item). b's slot may be reused.
      const uint64_t unread = st == kErrNoMap && b.ninsn == 0 ? b.ip : 0;
      if (b.ninsn > 0) {
        *insns_out += b.ninsn;
        ++*n;
      }
      if (st < 0) {
        EndSegment(out, n, st);
        if (phase != Phase::kDone) out[*n - 1].ip = unread;
        return phase != Phase::kDone;
      }
      return true;
    }
    if (phase == Phase::kDone) return false;
    const int st = BlkSyncForward();
    if (st < 0) {
      if (st == kErrEosCode) {
        phase = Phase::kDone;
        return false;
      }
      // libipt reports nothing here; a packet we do not decode is reported
      // so that comparisons stop at it (flow_decoder.h).
      if (st == kErrUnsupported) out[(*n)++] = ErrorItem(st);
      const uint64_t off = pos != nullptr ? Offset(pos) : 0;
      if (off == last_sync) {
        phase = Phase::kDone;
        return false;
      }
      last_sync = off;
      return true;
    }
    status_out = st;
    Item& s = out[(*n)++];
    s = Item();
    s.kind = ItemKind::kSync;
    s.offset = Offset(sync);
    phase = Phase::kSegment;
    return true;
  }
  int status_out = 0;   // the status the loop holds (StreamDecoder::status_)
  bool at_eos = false;  // done where the status reported the end (pts_eos)
};

FlowDecoder::FlowDecoder(const Config& config, CodeReader* code, LibiptCacheModel* shared)
    : s_(std::make_unique<State>(config, code, shared != nullptr ? &shared->set_->keys : nullptr)) {
}
FlowDecoder::~FlowDecoder() = default;

void FlowDecoder::InvalidateCode() {
  // Nothing may point into the cleared caches: the next block's hint and
  // the return-site entries (the addresses on the return stack stay).
  s_->hint = nullptr;
  s_->retentry.fill(nullptr);
  for (auto& c : s_->caches) c.Clear();
  s_->insn_sizes.clear();
  // libipt's block caches belong to its sections, which an image change
  // keeps: a shared model (keyed by section) stays; the decoder's own,
  // keyed by address, starts again.
  if (s_->libipt_set == &s_->own_set) s_->own_set.Clear();
}
bool FlowDecoder::BlockNext() const {
  return s_->phase == State::Phase::kSegment &&
         (s_->status_out & (kStatusEventPending | kStatusEos)) == 0;
}
bool FlowDecoder::NextIp(uint64_t* ip) const {
  if (!s_->at_eos || !s_->enabled) return false;
  *ip = s_->ip;
  return true;
}
size_t FlowDecoder::cached_blocks() const {
  size_t n = 0;
  for (const auto& c : s_->caches) n += c.size();
  return n;
}

size_t FlowDecoder::Decode(Item* out, size_t max) {
  size_t n = 0;
  while (n + 2 <= max) {
    if (s_->CanRunFast()) {
      n += s_->Fast(out + n, max - n - 2, &instructions_);
      if (n + 2 > max) break;
    }
    const size_t before = n;
    const bool more = s_->Step(out, &n, &instructions_);
    for (size_t i = before; i < n; ++i) s_->Stamp(&out[i]);
    if (!more) break;
  }
  s_->block_item = nullptr;  // `out` is the caller's again
  return n;
}

}  // namespace ptsnap::flow
