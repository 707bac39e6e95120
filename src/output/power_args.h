// The arguments of a "[C-state Cn]" frame (docs/decoding.md, "Frequency and
// power"), chosen in one place for the FXT, JSON and `.events` writers.
#pragma once

#include <vector>

#include "decode/pt_decoder.h"  // PowerArg, PowerEntryArgs, PowerExitArgs
#include "model/slice.h"

namespace ptsnap::output {

// None unless `s` is a C-state frame's record. A begin carries the entry's
// state, an end the exit's where a PWRX ended the frame; `whole_frame` (a
// writer that prints the frame as one event at its end, as JSON's "X"):
// both, on whichever record it is given.
inline std::vector<decode::PowerArg> PowerArgsOf(const model::Slice& s, bool whole_frame) {
  std::vector<decode::PowerArg> out;
  if (!s.idle) return out;
  if (whole_frame || s.kind == model::Slice::kBegin) out = decode::PowerEntryArgs(s.value);
  if ((whole_frame || s.kind == model::Slice::kEnd) && (s.power_exit & model::kPowerExitSeen)) {
    const std::vector<decode::PowerArg> exit = decode::PowerExitArgs(s.power_exit);
    out.insert(out.end(), exit.begin(), exit.end());
  }
  return out;
}

}  // namespace ptsnap::output
