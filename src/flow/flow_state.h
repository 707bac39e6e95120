// The flow decoder's state, shared by its layers (private to src/flow; not
// installed). Its structure follows libipt 2.0's layering, because
// exactness against libipt is the contract (flow_decoder.h): a query layer
// (libipt/src/pt_query_decoder.c: packets, the event queue with its
// bindings, read-ahead, the TNT cache, time) under a block layer
// (libipt/src/pt_block_decoder.c: proceeding through code to the next
// decision point or event). The speed comes from the block layer: a block
// cache keyed by address holding each block's instruction count, last
// instruction and successors, decoded once with Zydis, and a fast path for
// the common case (TNT bits cached, no event pending).
//
// One State holds every layer's members; its member functions are defined
// in the file of their layer:
//   packets.h, timing.h   the packet parser and libipt's time estimate
//   insn.h                instructions (Zydis, as libipt's pt_ild sizes them)
//   block_cache.h         the block cache and the model of libipt's caches
//   event_queue.h         events and the event queue (pt_event_queue)
//   this file             every member, and in the class body the small
//                         functions more than one layer calls: the query
//                         layer's packet reading and the queries the block
//                         layer makes per branch (CacheTnt, QueryCond,
//                         QueryIndirect, QueryEvent), the fast path's
//                         Entry, Successor, Stamp, the loop's EndSegment
//   query_packets.cpp     query layer: packets to events (DecodeNext, PSB+)
//   query_overflow.cpp    query layer: OVF and the errata's scans ahead
//   query.cpp             query layer: read-ahead and sync
//   return_stack.h        the return stack (pt_retstack)
//   block_decoder.cpp     block layer: the walk through code, events
//                         bound to instructions
//   fast_path.cpp         the fast path over cached blocks and TNT bits
//   flow_decoder.cpp      the driving loop (Step) and FlowDecoder
// Members declared `inline` below are defined in, and called only from,
// their layer's file (the compiler inlines them there as it did when the
// decoder was one file); the others are called across layers.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "flow/block_cache.h"
#include "flow/event_queue.h"
#include "flow/flow_decoder.h"
#include "flow/insn.h"
#include "flow/packets.h"
#include "flow/return_stack.h"
#include "flow/timing.h"

namespace ptsnap::flow {

inline constexpr int kStatusEventPending = 1;  // pts_event_pending
inline constexpr int kStatusIpSuppressed = 2;  // pts_ip_suppressed
inline constexpr int kStatusEos = 4;           // pts_eos

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
  ReturnStack retstack;

  // --- the driving loop (StreamDecoder's) ---
  enum class Phase : uint8_t { kSync, kSegment, kDone } phase = Phase::kSync;
  uint64_t last_sync = ~uint64_t{0};
  uint64_t insns = 0;

  // The members that sat among their layer's functions when the decoder
  // was one file, in their order there (State's layout is unchanged).
  // --- block layer ---
  static constexpr std::string_view kEptwMagic = kEmulatedPtwriteMagic;
  BlockEntry* hint = nullptr;  // the entry for `ip`, when Decide knew it
  // --- the fast path ---
  uint64_t fast_insns = 0;
  // --- the driving loop ---
  int status_out = 0;   // the status the loop holds (StreamDecoder::status_)
  bool at_eos = false;  // done where the status reported the end (pts_eos)

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

  // In query_packets.cpp:
  int DecodeNext();
  static inline uint64_t PwrePayload(uint64_t raw);
  static inline uint64_t PwrxPayload(uint64_t raw);
  inline int DecodePip();
  inline int DecodeVmcs();
  inline int DecodeFupBound();
  inline int DecodeTma();
  inline int DecodeHeader();
  inline int ScanBdm70(const uint8_t* p) const;
  inline int ReadPsbHeader();
  inline int DecodePsb();
  inline int DecodeTip();
  inline int DecodeTipPge();
  inline int DecodeTipPgd();
  inline int DecodeFup();

  // In query_overflow.cpp:
  [[nodiscard]] static inline bool IsTiming(PacketType t);
  inline int ApplyTiming(const Packet& pk, Timing* t) const;
  inline int ScanPastTiming(const uint8_t** p, Timing* t, Packet* pk) const;
  inline int FindHeaderFup(const uint8_t* p, Packet* fup) const;
  inline int FindOvfFup(const uint8_t* from) const;
  int DecodeOvf();
  inline int OvfDisabled();
  inline int Skd010();
  inline int Skd010Recover(const Packet& ip_packet, const Timing& t, const uint8_t* resume);
  inline int Apl11();
  inline int Apl12(int offset);

  // In query.cpp:
  int ReadAhead();
  inline const uint8_t* SyncForward(const uint8_t* from) const;
  inline int QueryStart(const uint8_t* at, uint64_t* addr);
  int QuerySyncForward(uint64_t* addr);

  // ===== block layer =====

  // In block_decoder.cpp:
  inline void RetPush(uint64_t a, BlockEntry* site = nullptr);
  inline int RetPop(uint64_t* a);
  inline int BlkStatus(int flags) const;
  inline int Tick(uint64_t at);
  inline int CondBranch(bool* taken);
  inline int IndirectBranch(uint64_t* target);
  inline bool EptwMagicAt(uint64_t at) const;
  // The `jmp` over the signature: a direct two-byte jump at `ip` to `target`.
  inline bool IsEptwJump(InsnClass iclass, bool direct, uint8_t size, uint64_t ip,
                         uint64_t target) const;
  // Its payload's 64 TNT bits follow; the block `b` (may be null) ends in it.
  void BeginEptw(Item* b) {
    eptw_left = 64;
    eptw_payload = 0;
    if (b != nullptr) b->eptw_jump = true;
  }
  inline int ReadInsn(uint64_t at, Insn* insn) const;
  inline void LogCall(const Insn& insn);
  inline int ProceedOneInsn(Item* b, Insn* insn);
  [[nodiscard]] static inline bool EndsBlock(const Insn& insn);
  template <class Pred>
  inline int ProceedToInsn(Item* b, Insn* insn, Pred pred);
  inline int ProceedSkl014(Item* b, Insn* insn);
  [[nodiscard]] inline int FilterAddrCheck(uint64_t addr) const;
  inline int ProceedToIp(Item* b, Insn* insn, uint64_t target);
  inline int NextIpWithTrace(const Insn& insn, uint64_t* out);
  inline int ProceedWithTrace(const Insn& insn);
  BlockEntry* Lookup(uint64_t at);
  inline int ProceedNoEvent(Item* b, BlockEntry* e);
  inline int WholeEntry(Item* b, BlockEntry* e, bool first_pass);
  static inline int EntryError(const BlockEntry& e);
  int Decide(BlockEntry* e, bool first_pass);
  inline int Fill(Item* b, BlockEntry* e);
  inline void AddRun(uint64_t a, const BlockEntry* e, uint32_t count);
  [[nodiscard]] inline Insn LastInsn(const BlockEntry& e) const;
  inline int SetDisableResumeIp(const Insn& insn);
  inline int ProceedEvent(Item* b);
  inline int ProceedToIpWithTrace(Item* b, uint64_t target);
  inline int PostponeInsn(const Insn& insn);
  inline void ClearPostponedInsn();
  inline int ProceedPostponedInsn();
  inline bool Skd022();
  inline int FetchEvent();
  int ProceedTrailingEvent();
  inline int Proceed(Item* b);
  int NextBlock(Item* b);
  int UserEvent(Item* out);
  int BlkSyncForward();

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

  // Item::now: pt_blk_time at this point, which is pt_qry_time: the query
  // layer's last_time (the estimate saved when the latest query began,
  // before its read-ahead).
  void Stamp(Item* it) const {
    it->has_now = last_have_tsc;
    it->now = it->has_now ? last_tsc : 0;
  }

  // In fast_path.cpp:
  size_t Fast(Item* out, size_t room, uint64_t* insns_out);
  inline size_t Emitted(size_t k, uint64_t* insns_out);

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

  // In flow_decoder.cpp:
  inline bool Step(Item* out, size_t* n, uint64_t* insns_out);
};

}  // namespace ptsnap::flow
