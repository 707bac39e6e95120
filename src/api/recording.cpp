// ptsnap::Recording over the one orchestrator (session/session.h): Create
// plans, Start runs RunRecording on the recording's own thread, the rest
// talks to it through record::Control.
#include "ptsnap/recording.h"

#include <pthread.h>

#include <condition_variable>
#include <mutex>
#include <optional>
#include <thread>

#include "perf/attr.h"
#include "session/session.h"

namespace ptsnap {

namespace {

trace::Scope ToScope(Scope s) {
  switch (s) {
    case Scope::kKernel: return trace::Scope::kKernel;
    case Scope::kUserAndKernel: return trace::Scope::kUserKernel;
    case Scope::kUser: break;
  }
  return trace::Scope::kUser;
}

RecordingEvent::Kind ToKind(record::Event::Kind k) {
  using K = record::Event::Kind;
  switch (k) {
    case K::kStarted: return RecordingEvent::Kind::kStarted;
    case K::kWarning: return RecordingEvent::Kind::kWarning;
    case K::kSnapshot: return RecordingEvent::Kind::kSnapshot;
    case K::kDataLost: return RecordingEvent::Kind::kDataLost;
    case K::kTargetExited: return RecordingEvent::Kind::kTargetExited;
    case K::kInfo: break;
  }
  return RecordingEvent::Kind::kInfo;
}

Result<record::RecordOptions> ToRecordOptions(const RecordingOptions& o) {
  record::RecordOptions r;
  r.command = o.command;
  for (int pid : o.pids) r.pids.push_back(static_cast<pid_t>(pid));
  r.all_cpus = o.all_cpus || !o.cpus.empty();
  r.cpus = o.cpus;
  r.scope = ToScope(o.scope);
  r.emulate = o.collection == Collection::kEmulated;
  r.sampling = o.collection == Collection::kSampled;
  r.callgraph_mode = o.callgraph_mode;
  r.snapshot_size = o.snapshot_size;
  r.full_execution = o.full_execution;
  auto timing = perf::ParseTiming(o.timer_resolution);
  if (!timing) return std::move(timing).error().WithKind(ErrorKind::kUsage);
  r.timer = *timing;
  r.trigger = o.trigger;
  r.slower_than_ns = o.slower_than_ns;
  r.filter = o.filter;
  r.only_in = o.only_in;
  r.multi_snapshot = o.multi_snapshot;
  r.multi_thread = o.multi_thread;
  if (o.duration.count() > 0) r.duration = o.duration;
  r.copy_binaries = o.copy_binaries;
  r.ptw = o.ptw;
  r.pwr_evt = o.pwr_evt;
  r.emulate_waits = o.emulate_waits;
  r.trace_dir = o.trace_dir;
  r.move_aside_existing = o.move_aside_existing;
  r.stop_signal = o.stop_signal;
  switch (o.after) {
    case AfterRecording::kKill: r.after = record::AfterRecording::kKill; break;
    case AfterRecording::kWait: r.after = record::AfterRecording::kWait; break;
    case AfterRecording::kDetach: r.after = record::AfterRecording::kDetach; break;
  }
  return r;
}

}  // namespace

struct Recording::Impl {
  explicit Impl(session::Plan p, RecordingListener* l) : plan(std::move(p)), listener(l) {}

  session::Plan plan;
  RecordingListener* listener;
  record::Control control;
  std::filesystem::path trace_dir;
  std::vector<std::string> warnings;

  std::mutex mu;
  std::condition_variable cv;
  bool started = false;  // Start() was called
  bool tracing = false;  // kStarted arrived
  bool ended = false;    // RunRecording returned
  std::optional<Result<RecordingResult>> result;
  std::mutex join_mu;  // one joiner at a time
  std::thread thread;

  void Run() {
    auto on_event = [this](const record::Event& e) {
      // The listener hears kStarted before Start() returns.
      if (listener != nullptr) {
        RecordingEvent pe;
        pe.kind = ToKind(e.kind);
        pe.message = e.message;
        pe.snapshot = e.snapshot;
        pe.exit_status = e.exit_status;
        listener->OnEvent(pe);
      }
      if (e.kind == record::Event::Kind::kStarted) {
        std::lock_guard lock(mu);
        tracing = true;
        cv.notify_all();
      }
    };
    auto r = session::RunRecording(std::move(plan), control, on_event);
    Result<RecordingResult> out = Error("");
    if (r) {
      RecordingResult rr;
      rr.program_status = r->program_status;
      rr.snapshots = r->snapshots;
      rr.interrupted = r->interrupted;
      rr.trace_dir = r->trace_dir;
      rr.warnings = std::move(r->warnings);
      out = std::move(rr);
    } else {
      out = std::move(r).error();
    }
    std::lock_guard lock(mu);
    result = std::move(out);
    ended = true;
    cv.notify_all();
  }
};

Recording::Recording(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Recording::Recording(Recording&&) noexcept = default;
Recording& Recording::operator=(Recording&&) noexcept = default;

Recording::~Recording() {
  if (!impl_) return;
  std::lock_guard join(impl_->join_mu);
  if (impl_->thread.joinable()) {
    impl_->control.RequestStop();
    impl_->thread.join();
  }
}

Result<Recording> Recording::Create(const RecordingOptions& options, RecordingListener* listener) {
  PTSNAP_ASSIGN_OR_RETURN(record::RecordOptions opts, ToRecordOptions(options));
  PTSNAP_ASSIGN_OR_RETURN(session::Plan plan, session::PlanRecording(std::move(opts)));
  auto impl = std::make_unique<Impl>(std::move(plan), listener);
  impl->trace_dir = impl->plan.trace_dir;
  impl->warnings = impl->plan.warnings;
  return Recording(std::move(impl));
}

Result<void> Recording::Start() {
  Impl& d = *impl_;
  std::unique_lock lock(d.mu);
  if (d.started) return Error("the recording was already started");
  d.started = true;
  d.thread = std::thread([&d] {
    ::pthread_setname_np(::pthread_self(), "ptsnap-record");
    d.Run();
  });
  d.cv.wait(lock, [&] { return d.tracing || d.ended; });
  if (!d.tracing && d.result && !*d.result) return d.result->error();
  return Ok();
}

Result<SnapshotInfo> Recording::Snapshot(std::string_view reason) {
  {
    std::lock_guard lock(impl_->mu);
    if (!impl_->started) return Error("the recording has not been started (call Start() first)");
  }
  PTSNAP_ASSIGN_OR_RETURN(uint32_t seq, impl_->control.Snapshot(std::string(reason)));
  return SnapshotInfo{seq, impl_->trace_dir};
}

void Recording::RequestSnapshot() noexcept { impl_->control.RequestSnapshot(); }
void Recording::RequestStop() noexcept { impl_->control.RequestStop(); }

Result<RecordingResult> Recording::Stop() {
  impl_->control.RequestStop();
  return Wait();
}

Result<RecordingResult> Recording::Wait() {
  Impl& d = *impl_;
  {
    std::lock_guard lock(d.mu);
    if (!d.started) return Error("the recording has not been started (call Start() first)");
  }
  {
    std::lock_guard join(d.join_mu);
    if (d.thread.joinable() && d.thread.get_id() != std::this_thread::get_id()) d.thread.join();
  }
  std::lock_guard lock(d.mu);
  if (!d.result) return Error("the recording is still running (Wait() called on its own thread)");
  return *d.result;
}

const std::filesystem::path& Recording::trace_dir() const { return impl_->trace_dir; }
const std::vector<std::string>& Recording::warnings() const { return impl_->warnings; }

}  // namespace ptsnap
