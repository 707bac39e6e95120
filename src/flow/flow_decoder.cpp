// FlowDecoder over its State (flow_state.h, which says which file owns which
// layer): the driving loop, StreamDecoder's, and Item's comparison.
#include "flow/flow_decoder.h"

#include "flow/flow_state.h"

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

struct LibiptCacheModel::Set {
  CacheKeys keys;
};
LibiptCacheModel::LibiptCacheModel() : set_(std::make_unique<Set>()) {}
LibiptCacheModel::~LibiptCacheModel() = default;

// One step of StreamDecoder::Step; appends 0-2 items to out.
inline bool FlowDecoder::State::Step(Item* out, size_t* n, uint64_t* insns_out) {
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

FlowDecoder::FlowDecoder(const Config& config, CodeReader* code, LibiptCacheModel* shared)
    : s_(std::make_unique<State>(config, code, shared != nullptr ? &shared->set_->keys : nullptr)) {
}
FlowDecoder::~FlowDecoder() = default;

void FlowDecoder::InvalidateCode() {
  // Nothing may point into the cleared caches: the next block's hint and
  // the return-site entries (the addresses on the return stack stay).
  s_->hint = nullptr;
  s_->retstack.ForgetBlocks();
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
