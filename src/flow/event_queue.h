// The flow decoder's events as its query layer builds them (libipt's struct
// pt_event) and libipt's event queue, one FIFO per binding (pt_event_queue).
// Private to src/flow.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "flow/flow_decoder.h"

namespace ptsnap::flow {

// Events as the query layer builds them (libipt's struct pt_event).

struct Event {
  EventType type = EventType::kEnabled;
  bool ip_suppressed = false, status_update = false, has_tsc = false;
  bool resumed = false, speculative = false, aborted = false, non_root = false;
  ExecMode mode = ExecMode::kUnknown;
  uint8_t ratio = 0, size = 0;
  uint64_t ip = 0, to = 0, payload = 0;  // see Item
  uint64_t tsc = 0;
};

// libipt's event queue: FIFOs per binding (the packet that delivers them).
enum Binding { kBindPsbend, kBindTip, kBindFup, kBindCount };
constexpr size_t kEvqMax = 8;

struct EventQueue {
  std::array<std::array<Event, kEvqMax>, kBindCount> ev;
  std::array<uint8_t, kBindCount> begin{}, end{};
  Event standalone;

  void Init() {
    begin.fill(0);
    end.fill(0);
  }
  Event* Enqueue(Binding b) {
    const uint8_t e = end[b];
    const uint8_t next = static_cast<uint8_t>((e + 1) % kEvqMax);
    // libipt keeps a gap of one: at most kEvqMax - 2 queued (pt_evq_enqueue).
    if (next == begin[b] || (next + 1) % kEvqMax == begin[b]) return nullptr;
    end[b] = next;
    ev[b][e] = Event();
    return &ev[b][e];
  }
  Event* Dequeue(Binding b) {
    if (begin[b] == end[b]) return nullptr;
    Event* e = &ev[b][begin[b]];
    begin[b] = static_cast<uint8_t>((begin[b] + 1) % kEvqMax);
    return e;
  }
  [[nodiscard]] bool Pending(Binding b) const { return begin[b] != end[b]; }
  // pt_evq_find: the oldest queued event of `type`.
  Event* Find(Binding b, EventType type) {
    for (uint8_t i = begin[b]; i != end[b]; i = static_cast<uint8_t>((i + 1) % kEvqMax)) {
      if (ev[b][i].type == type) return &ev[b][i];
    }
    return nullptr;
  }
  void Clear(Binding b) { begin[b] = end[b] = 0; }
  Event* Standalone() {
    standalone = Event();
    return &standalone;
  }
};

inline ExecMode ModeFromBits(uint8_t bits) {
  const bool csl = (bits & 1) != 0, csd = (bits & 2) != 0;
  if (csl) return csd ? ExecMode::kUnknown : ExecMode::k64;
  return csd ? ExecMode::k32 : ExecMode::k16;
}

}  // namespace ptsnap::flow
