// The sampled half of DecodeTraceDir (manifest source "sampled"): each
// snapshot's samples streams, merged by time, through the stack builders
// (decode/samples.h, decode/unwind.h) and the span rule
// (model/sample_spans.h) into the pipeline's sink. Internal to pipeline/.
#pragma once

#include <cstdint>
#include <map>
#include <string>

#include "decode/pt_decoder.h"
#include "model/slice.h"
#include "pipeline/pipeline.h"
#include "ptsnap/result.h"
#include "trace/trace_dir.h"

namespace ptsnap::pipeline {

// `decoder` holds the address spaces and symbols built from the sideband;
// `comms` the threads' names (last COMM by tid). Fills report's streams,
// missing_streams, overlap_events_skipped, sampled and warnings.
Result<void> DecodeSampledStreams(const trace::TraceReader& reader, const DecodeOptions& options,
                                  decode::PtDecoder& decoder,
                                  const std::map<int32_t, std::string>& comms,
                                  model::SliceSink& sink, DecodeReport& report);

// The sampling period in ns the manifest gives: the clock event's fixed
// period, or the frequency's; 0 when it cannot say (an event counting
// cycles: the decode then measures it).
uint64_t NominalPeriodNs(const trace::Sampling& sa);

}  // namespace ptsnap::pipeline
