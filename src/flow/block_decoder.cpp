// The flow decoder's block layer (libipt's pt_block_decoder.c):
// proceeding through code to the next decision point or event, pushes and
// pops on the return stack (return_stack.h), the block cache's fill, events
// bound to instructions (flow_state.h).
#include "flow/flow_state.h"

#include <cstring>

namespace ptsnap::flow {

inline void FlowDecoder::State::RetPush(uint64_t a, BlockEntry* site) { retstack.Push(a, site); }

inline int FlowDecoder::State::RetPop(uint64_t* a) {
  if (retstack.Empty()) return kErrRetstackEmpty;
  *a = retstack.Pop(&hint);
  return 0;
}

inline int FlowDecoder::State::BlkStatus(int flags) const {
  if (!enabled) flags |= kStatusIpSuppressed;
  if ((status & kStatusEos) != 0 && !process_event) flags |= kStatusEos;
  return flags;
}

inline int FlowDecoder::State::Tick(uint64_t at) {
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

inline int FlowDecoder::State::CondBranch(bool* taken) {
  const int st = QueryCond(taken);
  if (st < 0) return st;
  const int e = Tick(ip);
  if (e < 0) return e;
  return st;
}

inline int FlowDecoder::State::IndirectBranch(uint64_t* target) {
  const uint64_t at = ip;
  const int st = QueryIndirect(target);
  if (st < 0) return st;
  const int e = Tick(at);
  if (e < 0) return e;
  return st;
}

inline bool FlowDecoder::State::EptwMagicAt(uint64_t at) const {
  uint8_t buf[16];
  return code->Read(at, buf, sizeof buf) == sizeof buf &&
         std::memcmp(buf, kEptwMagic.data(), sizeof buf) == 0;
}

inline bool FlowDecoder::State::IsEptwJump(InsnClass iclass, bool direct, uint8_t size, uint64_t ip,
                                           uint64_t target) const {
  return iclass == InsnClass::kJump && direct && size == 2 &&
         target == ip + 2 + kEptwMagic.size() && EptwMagicAt(ip + 2);
}

// Reads and decodes the instruction at `at`.
inline int FlowDecoder::State::ReadInsn(uint64_t at, Insn* insn) const {
  uint8_t buf[15];
  const size_t n = code->Read(at, buf, sizeof buf);
  if (n == 0) return kErrNoMap;
  if (mode == ExecMode::kUnknown) return kErrBadInsn;  // pt_ild needs a mode
  if (!DecodeInsn(buf, n, at, mode, insn)) return kErrBadInsn;
  return 0;
}

inline void FlowDecoder::State::LogCall(const Insn& insn) {
  if (insn.iclass != InsnClass::kCall) return;
  if (insn.is_direct && insn.disp == 0) return;
  RetPush(insn.ip + insn.size);
}

// pt_blk_proceed_one_insn
inline int FlowDecoder::State::ProceedOneInsn(Item* b, Insn* insn) {
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

inline bool FlowDecoder::State::EndsBlock(const Insn& insn) {
  return insn.iclass == InsnClass::kCall || insn.iclass == InsnClass::kJump;
}

template <class Pred>
inline int FlowDecoder::State::ProceedToInsn(Item* b, Insn* insn, Pred pred) {
  for (;;) {
    int st = ProceedOneInsn(b, insn);
    if (st <= 0) return st;
    if (pred(*insn)) return 1;
    st = NextIpNoTrace(*insn, &ip);
    if (st < 0) return st;
    if (EndsBlock(*insn)) {
      // The `jmp` over an emulated PTWRITE's signature, reached on the way
      // to an event (a tick, a disable) rather than through Decide.
      if (IsEptwJump(insn->iclass, insn->is_direct, insn->size, insn->ip,
                     insn->ip + insn->size + static_cast<uint64_t>(insn->disp)))
        BeginEptw(b);
      return 0;
    }
  }
}

// pt_blk_proceed_skl014: a TIP.PGD with its IP suppressed, where SKL014
// lets a direct branch that leaves the filter regions (or enters a
// TraceStop region) send one too. The event binds to the first such
// branch, as the configured ranges say, or to a MOV CR3. 1 there, 0 when
// the block ends first, or an error (kErrBadQuery at a branch that needs
// trace, which the caller binds it to).
inline int FlowDecoder::State::ProceedSkl014(Item* b, Insn* insn) {
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
inline int FlowDecoder::State::FilterAddrCheck(uint64_t addr) const {
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

inline int FlowDecoder::State::ProceedToIp(Item* b, Insn* insn, uint64_t target) {
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
inline int FlowDecoder::State::NextIpWithTrace(const Insn& insn, uint64_t* out) {
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

inline int FlowDecoder::State::ProceedWithTrace(const Insn& insn) {
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
BlockEntry* FlowDecoder::State::Lookup(uint64_t at) {
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
  be.eptw = IsEptwJump(be.iclass, be.is_direct, be.size, be.end_ip, be.target);
  if (old != nullptr) {
    *old = be;
    return old;
  }
  return cache.Insert(be);
}

// pt_blk_proceed_no_event: to the next decision point. Through libipt's
// cache where libipt has the start address cached, else as libipt's first
// pass, which fills its cache (Fill).
inline int FlowDecoder::State::ProceedNoEvent(Item* b, BlockEntry* e) {
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
inline int FlowDecoder::State::WholeEntry(Item* b, BlockEntry* e, bool first_pass) {
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
inline int FlowDecoder::State::EntryError(const BlockEntry& e) {
  return e.error == 1 ? kErrUnsupported : e.error;
}

// The branch that ends `e`'s block: the next IP, from trace if needed.
// Leaves the next block's entry in `hint` when it is known cheaply.
int FlowDecoder::State::Decide(BlockEntry* e, bool first_pass) {
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
        if (e->eptw) BeginEptw(block_item);
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

// libipt's first pass through the block at e->ip
// (pt_blk_proceed_no_event_fill_cache): the block ends early at an
// address libipt already caches and after 1024 instructions; addresses
// join its cache unless the pass fails.
inline int FlowDecoder::State::Fill(Item* b, BlockEntry* e) {
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

inline void FlowDecoder::State::AddRun(uint64_t a, const BlockEntry* e, uint32_t count) {
  for (uint32_t k = 0; k < count; ++k) {
    LibiptInsert(a, e->mode);
    a += SizeAt(e, k);
  }
}

inline Insn FlowDecoder::State::LastInsn(const BlockEntry& e) const {
  Insn i;
  i.ip = e.end_ip;
  i.size = e.size;
  i.iclass = e.iclass;
  i.is_direct = e.is_direct;
  i.disp = static_cast<int64_t>(e.target - (e.end_ip + e.size));
  return i;
}

inline int FlowDecoder::State::SetDisableResumeIp(const Insn& insn) {
  if (insn.iclass == InsnClass::kCall || insn.iclass == InsnClass::kFarCall) {
    ip = insn.ip + insn.size;
  } else {
    ip = 0;
  }
  return 0;
}

inline int FlowDecoder::State::ProceedEvent(Item* b) {
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
        st = ProceedToInsn(b, &insn, [](const Insn& i) { return i.iclass == InsnClass::kPtwrite; });
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
inline int FlowDecoder::State::ProceedToIpWithTrace(Item* b, uint64_t target) {
  Insn insn;
  int st = ProceedToIp(b, &insn, target);
  if (st == kErrBadQuery) st = ProceedWithTrace(insn);
  if (st < 0) return st;
  return ip == target ? 1 : 0;
}

inline int FlowDecoder::State::PostponeInsn(const Insn& insn) {
  if (process_insn) return kErrInternal;
  process_insn = true;
  pinsn = insn;
  return BlkStatus(kStatusEventPending);
}

inline void FlowDecoder::State::ClearPostponedInsn() {
  process_insn = bound_paging = bound_vmcs = bound_ptwrite = false;
}

// pt_blk_proceed_postponed_insn: past the postponed instruction, with
// trace if it is a branch that needs it.
inline int FlowDecoder::State::ProceedPostponedInsn() {
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
inline bool FlowDecoder::State::Skd022() {
  Insn insn;
  if (ReadInsn(event.ip, &insn) < 0 || !insn.vm_entry) return false;
  event.type = EventType::kDisabled;
  event.ip = event.to;
  return true;
}

inline int FlowDecoder::State::FetchEvent() {
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
int FlowDecoder::State::ProceedTrailingEvent() {
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

inline int FlowDecoder::State::Proceed(Item* b) {
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

int FlowDecoder::State::NextBlock(Item* b) {
  *b = Item();
  block_item = b;
  b->kind = ItemKind::kBlock;
  b->ip = ip;
  b->mode = mode;
  b->speculative = speculative;
  return Proceed(b);
}

int FlowDecoder::State::UserEvent(Item* out) {
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

int FlowDecoder::State::BlkSyncForward() {
  mode = ExecMode::kUnknown;
  ip = 0;
  status = 0;
  enabled = false;
  process_event = false;
  speculative = false;
  event = Event();
  ClearPostponedInsn();
  retstack.Clear();
  const int st = QuerySyncForward(&ip);
  if (st < 0) return st;
  status = st;
  if ((st & kStatusIpSuppressed) == 0) enabled = true;
  return ProceedTrailingEvent();
}

}  // namespace ptsnap::flow
