// Record: one RecordingSession (recording_session.h). Prepare and
// PrepareSampling are in prepare.cpp and prepare_sampling.cpp.
#include "record/recorder.h"

#include "record/recording_session.h"

namespace ptsnap::record {

Result<Outcome> Record(const RecordOptions& opts, Prepared prepared,
                       const std::filesystem::path& trace_dir, const base::RootPath& root,
                       Control& control, const EventFn& events, const SourceFactory& make_source) {
  RecordingSession session(opts, std::move(prepared), trace_dir, root, control, events);
  PTSNAP_TRY(session.Open(make_source));
  return session.Run();
}

}  // namespace ptsnap::record
