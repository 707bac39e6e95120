// The markers that end a snapshot's frames on the timeline: the snapshot's
// name, and the signal that killed a thread.
// Pure. Internal to pipeline/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "trace/manifest.h"

namespace ptsnap::pipeline {

// "[snapshot N: REASON DETAIL; mark in force M; it began T before ...]".
// `last_mark`: the mark in force on the slow call's thread, named for a
// slow call's snapshot only ("": none). `slow_first_seen`: when the slow
// call's thread first showed in the snapshot (SlowCallCheck::FirstSeen);
// after the call began, the marker says how much of it the ring lost.
[[nodiscard]] std::string SnapshotEndMarker(const trace::Snapshot& sn, std::string_view last_mark,
                                            uint64_t slow_first_seen);

// "[signal SIGSEGV]" for the thread a fatal signal's snapshot killed (the
// snapshot's tid; the main thread, tid == pid, when unknown); "" for any
// other thread or snapshot.
[[nodiscard]] std::string SignalMarker(const trace::Snapshot& sn, int32_t pid, int32_t tid);

}  // namespace ptsnap::pipeline
