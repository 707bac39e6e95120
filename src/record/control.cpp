#include "record/control.h"

#include <poll.h>
#include <sys/eventfd.h>

#include <cerrno>

namespace ptsnap::record {

Control::Control() : event_fd_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

void Control::Wake() noexcept {
  if (!event_fd_) return;
  uint64_t one = 1;
  (void)!::write(event_fd_.get(), &one, sizeof one);
}

void Control::RequestSnapshot() noexcept {
  signal_snapshots_.fetch_add(1);
  Wake();
}

void Control::RequestStop() noexcept {
  stop_.store(true);
  Wake();
}

Result<uint32_t> Control::Snapshot(const std::string& reason) {
  std::unique_lock lock(mu_);
  if (closed_) return Error("the recording has ended (" + *closed_ + "); no snapshot taken");
  const uint64_t ticket = next_ticket_++;
  pending_.push_back({ticket, reason});
  Wake();
  cv_.wait(lock, [&] { return done_.count(ticket) != 0 || closed_.has_value(); });
  auto it = done_.find(ticket);
  if (it == done_.end())
    return Error("the recording ended (" + *closed_ + ") before the snapshot was taken");
  Result<uint32_t> r = std::move(it->second);
  done_.erase(it);
  return r;
}

std::vector<Control::Pending> Control::TakeSnapshotRequests() {
  std::vector<Pending> out;
  for (int n = signal_snapshots_.exchange(0); n > 0; --n) out.push_back({0, "signal"});
  std::lock_guard lock(mu_);
  for (auto& p : pending_) out.push_back(std::move(p));
  pending_.clear();
  return out;
}

void Control::Complete(uint64_t ticket, Result<uint32_t> seq) {
  if (ticket == 0) return;
  {
    std::lock_guard lock(mu_);
    done_.insert_or_assign(ticket, std::move(seq));
  }
  cv_.notify_all();
}

std::vector<size_t> Control::Wait(std::chrono::milliseconds timeout, const std::vector<int>& fds) {
  std::vector<pollfd> p;
  p.reserve(fds.size() + 1);
  for (int fd : fds) p.push_back({fd, POLLIN, 0});
  p.push_back({event_fd_.get(), POLLIN, 0});
  std::vector<size_t> ready;
  const int n = ::poll(p.data(), p.size(), static_cast<int>(timeout.count()));
  if (n <= 0) return ready;
  for (size_t i = 0; i < fds.size(); ++i)
    if ((p[i].revents & (POLLIN | POLLHUP)) != 0) ready.push_back(i);
  if ((p.back().revents & POLLIN) != 0) {
    uint64_t count = 0;
    (void)!::read(event_fd_.get(), &count, sizeof count);
  }
  return ready;
}

void Control::Close(const std::string& why) {
  {
    std::lock_guard lock(mu_);
    if (!closed_) closed_ = why;
    for (auto& p : pending_)
      done_.insert_or_assign(
          p.ticket, Error("the recording ended (" + why + ") before the snapshot was taken"));
    pending_.clear();
  }
  cv_.notify_all();
}

}  // namespace ptsnap::record
