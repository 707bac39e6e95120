// ForwardingSource: a PtSource that passes every call to another one, for
// tests and benchmarks that watch or change a few calls of a real or fake
// source (override those, the rest forwards). Record() owns and destroys
// the source its factory returns, so a test that reads its fake afterwards
// hands Record a ForwardingSource that borrows it.
#pragma once

#include <memory>
#include <utility>

#include "record/pt_source.h"

namespace ptsnap::record {

class ForwardingSource : public PtSource {
 public:
  explicit ForwardingSource(PtSource* to) : to_(to) {}
  explicit ForwardingSource(std::unique_ptr<PtSource> owned)
      : owned_(std::move(owned)), to_(owned_.get()) {}

  Result<void> AddThread(pid_t pid, pid_t tid, bool trace_pt) override {
    return to_->AddThread(pid, tid, trace_pt);
  }
  Result<void> AddCpu(int cpu) override { return to_->AddCpu(cpu); }
  Result<void> ArmTriggers(const std::vector<TriggerPoint>& points) override {
    return to_->ArmTriggers(points);
  }
  Result<void> EnableSideband() override { return to_->EnableSideband(); }
  Result<void> EnableAll() override { return to_->EnableAll(); }
  Result<SidebandEvents> DrainSideband(trace::TraceWriter& w) override {
    return to_->DrainSideband(w);
  }
  Result<void> DrainAux(trace::TraceWriter& w) override { return to_->DrainAux(w); }
  Result<void> ThreadExited(pid_t tid, trace::TraceWriter& w) override {
    return to_->ThreadExited(tid, w);
  }
  Result<std::vector<TriggerHit>> PollTriggers() override { return to_->PollTriggers(); }
  [[nodiscard]] std::vector<int> WakeFds() const override { return to_->WakeFds(); }
  Result<void> Snapshot(trace::TraceWriter& w, uint32_t seq, bool resume) override {
    return to_->Snapshot(w, seq, resume);
  }
  Result<void> Finish(trace::TraceWriter& w) override { return to_->Finish(w); }
  uint64_t Now() const override { return to_->Now(); }
  [[nodiscard]] size_t traced_threads() const override { return to_->traced_threads(); }
  [[nodiscard]] bool HasThread(pid_t tid) const override { return to_->HasThread(tid); }
  [[nodiscard]] std::optional<trace::TimeConv> time_conv() const override {
    return to_->time_conv();
  }
  [[nodiscard]] bool self_driven() const override { return to_->self_driven(); }
  Result<Launch> LaunchCommand(const std::vector<std::string>& command) override {
    return to_->LaunchCommand(command);
  }
  Result<void> Begin(trace::TraceWriter& w) override { return to_->Begin(w); }
  Result<void> RequestSnapshot(const std::string& detail) override {
    return to_->RequestSnapshot(detail);
  }
  void RequestStop() override { to_->RequestStop(); }
  std::vector<trace::Snapshot> TakenSnapshots() override { return to_->TakenSnapshots(); }
  Result<void> TargetExited(int status) override { return to_->TargetExited(status); }
  [[nodiscard]] bool complete() const override { return to_->complete(); }
  [[nodiscard]] bool host_vdso() const override { return to_->host_vdso(); }

 private:
  std::unique_ptr<PtSource> owned_;
  PtSource* to_;
};

}  // namespace ptsnap::record
