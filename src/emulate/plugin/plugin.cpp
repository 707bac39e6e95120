// ptsnap's QEMU TCG plugin: turns the guest's executed translation blocks
// into genuine Intel PT streams (one per guest thread) plus the sideband
// events the kernel would have reported. Loaded by qemu-x86_64 via
// `-plugin libptsnap_qemu.so,out=DIR,...`; the driver (emulate.cpp) builds
// the trace directory from what it leaves in DIR:
//   events.<pid>            one message per line (plugin_protocol.h)
//   pt-<pid>-<tid>-<seq>.pt stream bytes (seq 0: full-execution stream)
//   jit-code.<pid>          code run from memory no file backs (trace/jit_code.h)
//   exec-carry.<pid>        briefly: the recording's state across a followed
//                           execve, for the plugin in the new image (exec_follow.h)
//
// Only per-TB exec callbacks are registered. A block's exit (fall-through,
// conditional, direct, indirect, return, far) is classified at translation
// time; the outcome is inferred when the thread's next block starts.
// Virtual clock (docs/emulation.md, "Time"): each guest thread runs on its
// own virtual core at one instruction per tick (ThreadState::clock, one add
// per block), and threads synchronise where one waits for another, like
// Lamport clocks: a new thread starts at its creator's clone time, and a
// futex wait that returns moves the waiter's clock up to the latest time a
// thread woke that futex (a thread's exit wakes its clear_child_tid, which
// pthread_join waits on). So every call lasts exactly the instructions it
// retires, a syscall takes no time unless it waited for another thread, and
// what one thread caused another to see comes earlier in time. The perf
// clock is the same count in nanoseconds; sideband records take the time of
// the thread that caused them. With waits=1 (--emulate-waits) a syscall
// that returns also adds the wall time it took to its thread's clock
// (syscall_wait.h), so sleeps and I/O show; instructions stay one tick.
#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "base/file_util.h"
#include "base/string_util.h"
#include "base/unique_fd.h"
#include "elf/segments.h"
#include "emulate/exec_follow.h"
#include "emulate/exit_class.h"
#include "emulate/jit_shadow.h"
#include "emulate/plugin/qemu_plugin_api.h"
#include "emulate/plugin_protocol.h"
#include "emulate/pt_stream.h"
#include "emulate/syscall_wait.h"
#include "emulate/virtual_cpu.h"
#include "trace/jit_code.h"

extern "C" {
__attribute__((visibility("default"))) int qemu_plugin_version = PTSNAP_QEMU_PLUGIN_API_VERSION;
__attribute__((visibility("default"))) int qemu_plugin_install(qemu_plugin_id_t id,
                                                               const qemu_info_t* info, int argc,
                                                               char** argv);
}

namespace ptsnap::emulate {
namespace {

constexpr unsigned kMaxVcpus = 4096;
constexpr uint8_t kFlagTrigger = 1, kFlagStop = 2, kFlagSlow = 4;
// --filter: the block starts inside a `filter` range / a `tracestop` range.
constexpr uint8_t kFlagInFilter = 8, kFlagTraceStop = 16;
// --only-in: the block is the function's entry.
constexpr uint8_t kFlagOnlyIn = 32;

// A block of code from memory no file backs whose bytes differ from what
// was captured there so far: captured when it first runs.
struct JitPending {
  std::vector<uint8_t> code;
  std::atomic<bool> done{false};
};

struct TbInfo {
  uint64_t start = 0, last_ip = 0, fallthrough = 0, target = 0;
  JitPending* jit = nullptr;  // null: code from a file (or nothing to capture)
  uint32_t ninsn = 0;
  ExitKind kind = ExitKind::kNone;
  bool pushes = false;
  uint8_t flags = 0;
  std::vector<uint64_t> ips;  // hash mode only
};

struct Options {
  std::string out;
  bool full = false;
  uint64_t size = 4 << 20;
  size_t psb_period = 4096;
  bool retcomp = true;
  // Timing packets (the driver resolves --timer-resolution as the hardware
  // event would be configured; virtual CPU constants in virtual_cpu.h).
  bool mtc = false, cyc = false;
  uint64_t mtc_freq = 0, cyc_thresh = 0;
  bool multi = false;
  // Every snapshot stream holds its thread's whole ring (whole=1), never
  // only what the ring gained since the thread's previous snapshot: a
  // reference for tests and a check of the incremental streams.
  bool whole_rings = false;
  bool hash = false;
  bool jit = true;  // capture code run from memory no file backs (jit=0: off, a benchmark baseline)
  uint64_t duration_ms = 0;
  int ctl_fd = -1;
  std::vector<uint64_t> trigger, stop;  // link-time addresses in the main binary
  std::string trigger_name;
  // --slower-than: the function (link-time address, name) and the threshold
  // in ticks (virtual ns); 0: off.
  uint64_t slow = 0, slow_ns = 0;
  std::string slow_name;
  // --filter: file ranges (plugin_protocol.h FilterRange); `filtering` when
  // one of them is a `filter` range (tracing only inside those).
  std::vector<FilterRange> filters;
  bool filtering = false;
  // --only-in: the function (link-time address in the main binary); 0: off.
  uint64_t only_in = 0;
  // --emulate-waits: a syscall's wall time is added to its thread's clock.
  bool waits = false;
};

// --slower-than's bookkeeping, per thread. `returns` is a shadow of the
// guest's return-address stack, pushed by calls and popped by returns (a
// return to an address deeper in it pops down to there, as after longjmp or
// a C++ exception, which leave frames without returning). A call of the
// slow function is an entry with its return address, the shadow's depth
// after its call pushed it, and when it began; it ends when the shadow
// returns below that depth: measured when that return went to the entry's
// return address, dropped when the frame was unwound past.
struct SlowCallEntry {
  uint64_t ret = 0;
  size_t depth = 0;
  uint64_t begin = 0;
};
constexpr size_t kMaxShadowDepth = 1 << 16;
struct SlowCalls {
  std::vector<uint64_t> returns;
  std::vector<SlowCallEntry> entries;
  bool snapped = false;    // a slow-call snapshot was taken for this thread
  uint64_t last_snap = 0;  // when (the call's return)
  uint64_t skipped = 0;    // slow calls the rate limit skipped since then
};

struct ThreadState {
  explicit ThreadState(PtStreamOptions o) : pt(o) {}
  pid_t pid = 0, tid = 0;
  PtStream pt;
  const TbInfo* prev = nullptr;
  bool enabled = false;
  bool started = false;
  bool trace_stopped = false;                  // entered a tracestop range: no more tracing
  uint64_t clock = 0;                          // this thread's virtual time (TSC ticks)
  uint64_t insns = 0, hash = kStreamHashSeed;  // retired by this thread
  // insns and hash when the encoder's bytes last went into the ring (Drain,
  // which runs where every block counted so far is described by them): what
  // a snapshot's ring holds. A thread that another thread's snapshot finds
  // running has counted blocks whose packets its encoder still holds.
  uint64_t ring_insns = 0, ring_hash = kStreamHashSeed;
  SlowCalls slow;
  // --only-in: tracing is paused (it starts so, as aux_start_paused), and
  // the frames entered at the function's entry whose return pauses it.
  bool paused = true;
  std::vector<SlowCallEntry> only_in;
  // Drained chunks (snapshot ring; most begin at a PSB) or the full-mode file.
  std::mutex mu;
  std::deque<std::vector<uint8_t>> ring;
  uint64_t ring_bytes = 0;
  bool wrapped = false;
  // Chunks are numbered as they enter the ring: ring.front() is chunk
  // `ring_first`. The thread's stream of its snapshot `written_seq` (0:
  // none yet) ended with chunk `written_end` - 1 (WriteRing).
  uint64_t ring_first = 0;
  uint64_t written_end = 0;
  uint32_t written_seq = 0;
  base::UniqueFd fd;  // full mode: the stream file
  std::string file;
};

Options g_opts;
std::atomic<int> g_flags{0};  // kStopped | pending requests
// kReqSnapshot: the driver asked for a snapshot ('s' on the control pipe:
// SIGUSR2, Recording::Snapshot); tracing goes on after it.
constexpr int kStopped = 1, kReqCtrlC = 2, kReqDuration = 4, kReqSnapshot = 8;
// --after=detach (docs/recording.md, "When recording ends first"): the
// driver left the program running and went away ('d' on the control pipe,
// its end of the pipe closed, or its work directory gone). The plugin
// writes nothing more, and asks QEMU once, from a vCPU thread, to drop its
// callbacks (g_reset_asked), so the program runs on at QEMU's own speed.
std::atomic<bool> g_detached{false}, g_reset_asked{false};
qemu_plugin_id_t g_id = 0;
void Detach() {
  g_detached.store(true);
  g_flags.store(kStopped);
}
void Reset(qemu_plugin_id_t /*id*/) {}
// On a vCPU thread: the first one after the detach asks for the reset.
void ResetIfDetached() {
  if (g_detached.load(std::memory_order_relaxed) && !g_reset_asked.exchange(true))
    qemu_plugin_reset(g_id, Reset);
}
std::mutex g_mu;  // thread table, snapshots, events
ThreadState* g_threads[kMaxVcpus];
std::vector<ThreadState*> g_finished;  // exited, not yet in a snapshot (snapshot mode)
std::atomic<uint32_t> g_seq{1};
// The latest time any thread has published (at a syscall, a thread start or
// exit). Single-threaded, every time equals the thread's retired-instruction
// count (deterministic recordings).
std::atomic<uint64_t> g_clock{0};
uint64_t Now() { return g_clock.load(std::memory_order_relaxed); }
// Makes `t`'s time visible to every thread (g_clock = max(g_clock, clock)).
void Publish(const ThreadState* t) {
  uint64_t g = g_clock.load(std::memory_order_relaxed);
  while (g < t->clock && !g_clock.compare_exchange_weak(g, t->clock, std::memory_order_relaxed)) {
  }
}
// Futex causality: per futex word, the latest time a thread woke it; per
// thread, the word the kernel wakes when it exits (clear_child_tid).
std::mutex g_futex_mu;
std::unordered_map<uint64_t, uint64_t> g_futex_clock;
std::unordered_map<pid_t, uint64_t> g_clear_tid;
std::atomic<uint64_t> g_clone_clock{0};  // the creator's time at the last clone/fork
uint64_t g_waiting_on[kMaxVcpus][2];     // futex words a thread waits on (0: none)
void FutexWoken(uint64_t addr, uint64_t clock) {
  if (addr == 0) return;
  std::lock_guard lock(g_futex_mu);
  uint64_t& c = g_futex_clock[addr];
  c = std::max(c, clock);
}
// The word the kernel clears and wakes when thread `tid` exits (0: none).
uint64_t ClearChildTid(pid_t tid) {
  std::lock_guard lock(g_futex_mu);
  auto it = g_clear_tid.find(tid);
  return it != g_clear_tid.end() ? it->second : 0;
}
// A wait on `addr` returned: the waiter continues after whoever woke it.
void FutexCatch(ThreadState* t, uint64_t addr) {
  if (addr == 0) return;
  std::lock_guard lock(g_futex_mu);
  auto it = g_futex_clock.find(addr);
  if (it != g_futex_clock.end()) t->clock = std::max(t->clock, it->second);
}
base::UniqueFd g_events;  // events.<g_pid>
pid_t g_pid = 0;
// A followed execve (docs/emulation.md, "exec"): this plugin's file and
// arguments as QEMU passed them (exec= excepted), for the qemu-x86_64 that
// runs the new program; the program trigger addresses were resolved in
// (realpath; "" until the guest is loaded); the guest's start time (0, or
// the execve's time in the image an exec started); the state of the thread
// that called execve, for the first thread of this image.
std::string g_plugin_path;
std::vector<std::string> g_plugin_args;
std::string g_main;
uint64_t g_start_time = 0;
std::optional<CarriedThread> g_adopt;
uint64_t g_ctl_ino = 0;  // the control pipe's inode
// --duration: CLOCK_MONOTONIC ns when it started counting (0: not yet).
std::atomic<int64_t> g_duration_start_ns{0};
// Set at the first translation, once QEMU has loaded the guest: the guest
// runs from then on (the control thread's --duration counts from it).
std::atomic<bool> g_images_done{false};
std::vector<uint64_t> g_trigger_rt, g_stop_rt;
uint64_t g_slow_rt = 0;
uint64_t g_only_in_rt = 0;
std::atomic<uint64_t> g_slow_skipped{0};  // every thread's, for the note at exit
uint64_t g_pending_ctid[kMaxVcpus];       // clone's child_tid with CLONE_CHILD_CLEARTID
uint64_t g_pending_mmap[kMaxVcpus][4];  // prot, fd, len, offset of an mmap in flight; prot 0 = none
uint64_t g_pending_unmap[kMaxVcpus][2];  // addr, len of a munmap or MAP_FIXED anonymous mmap
SyscallWall g_syscall_wall[kMaxVcpus];   // --emulate-waits: the syscall each vCPU is in
uint64_t MonotonicNs() {
  timespec ts{};
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000 + static_cast<uint64_t>(ts.tv_nsec);
}

// JIT code capture (docs/emulation.md, "JIT code"). g_file_code: the
// executable file mappings, [lo, hi): blocks outside them run from
// anonymous or written memory and have their bytes captured, once per
// distinct content (g_shadow), into jit-code.<pid>.
std::mutex g_jit_mu;
std::vector<std::pair<uint64_t, uint64_t>> g_file_code;
JitShadow g_shadow;
base::UniqueFd g_jit_fd;
std::atomic<uint64_t> g_jit_records{0}, g_jit_bytes{0};

void AddFileCode(uint64_t lo, uint64_t hi) {
  std::lock_guard lock(g_jit_mu);
  g_file_code.emplace_back(lo, hi);
}

// [lo, hi) no longer maps a file (munmap, an anonymous MAP_FIXED mmap).
void RemoveFileCode(uint64_t lo, uint64_t hi) {
  std::lock_guard lock(g_jit_mu);
  std::vector<std::pair<uint64_t, uint64_t>> kept;
  for (auto [a, b] : g_file_code) {
    if (b <= lo || a >= hi) {
      kept.emplace_back(a, b);
      continue;
    }
    if (a < lo) kept.emplace_back(a, lo);
    if (b > hi) kept.emplace_back(hi, b);
  }
  g_file_code = std::move(kept);
}

bool InFileCode(uint64_t addr) {
  std::lock_guard lock(g_jit_mu);
  for (auto [a, b] : g_file_code)
    if (addr >= a && addr < b) return true;
  return false;
}

// --filter ranges at their run-time addresses, [lo, hi), added whenever a
// file a filter names is mapped executable: what the kernel does with a
// file filter (perf_addr_filter_vma_adjust: vm_start + offset - pgoff).
struct RuntimeRange {
  uint64_t lo = 0, hi = 0;
  bool trace_stop = false;
};
std::mutex g_range_mu;
std::vector<RuntimeRange> g_ranges;

void MapFilterRanges(uint64_t addr, uint64_t len, uint64_t pgoff, const char* path) {
  if (g_opts.filters.empty()) return;
  std::lock_guard lock(g_range_mu);
  for (const FilterRange& f : g_opts.filters) {
    if (f.path != path) continue;
    const uint64_t lo = std::max(f.offset, pgoff);
    const uint64_t hi = std::min(f.offset + f.size, pgoff + len);
    if (lo >= hi) continue;
    g_ranges.push_back({addr + (lo - pgoff), addr + (hi - pgoff), f.trace_stop});
  }
}

// The --filter flags of a block starting at `ip`.
uint8_t FilterFlags(uint64_t ip) {
  if (g_opts.filters.empty()) return 0;
  uint8_t flags = 0;
  std::lock_guard lock(g_range_mu);
  for (const RuntimeRange& r : g_ranges)
    if (ip >= r.lo && ip < r.hi) flags |= r.trace_stop ? kFlagTraceStop : kFlagInFilter;
  return flags;
}

void Die(const char* fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  std::fputs("ptsnap: ", stderr);
  std::vfprintf(stderr, fmt, ap);
  std::fputc('\n', stderr);
  va_end(ap);
  std::_Exit(125);
}

// A pid or tid as the protocol (and perf) carries it.
uint32_t U32(pid_t id) { return static_cast<uint32_t>(id); }

// Thread `t` ended (PERF_RECORD_EXIT: pid, ppid, tid, ptid as the kernel
// fills them for a thread).
TaskMessage ExitMessage(const ThreadState* t) {
  return TaskMessage{.exit = true,
                     .time = t->clock,
                     .pid = U32(t->pid),
                     .ppid = U32(t->pid),
                     .tid = U32(t->tid),
                     .ptid = U32(t->tid)};
}

// Appends `m` to this process's event log. One write() per line on an
// O_APPEND file, so lines from threads never mix (WriteAll splits a line
// only after a short write, which a regular file gives only when it cannot
// take more).
void Report(const PluginMessage& m) {
  if (g_detached.load(std::memory_order_relaxed)) return;
  if (!base::WriteAll(g_events.get(), FormatMessage(m), "events")) {
    Die("writing the plugin's events file failed");
  }
}

// Whether opening a file in the work directory failed because the driver
// has gone and removed it (--after=detach; a process forked before the
// detach has no control thread to be told): the recording is over, and
// this process detaches quietly instead of failing.
bool DriverGone(int err) {
  if (err != ENOENT || ::access(g_opts.out.c_str(), F_OK) == 0) return false;
  Detach();
  return true;
}

// Opens `path` in the work directory to write (O_WRONLY | O_CREAT |
// O_CLOEXEC | `flags`, mode 0600). Not open when the driver has gone
// (DriverGone: this process has detached); any other failure is fatal.
base::UniqueFd OpenWorkFile(const std::string& path, int flags) {
  base::UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | flags, 0600));
  if (!fd && !DriverGone(errno)) Die("cannot write %s: %s", path.c_str(), std::strerror(errno));
  return fd;
}

// The (new) process's event log. In a forked child this closes the
// parent's, inherited.
void OpenEvents() {
  g_pid = ::getpid();
  std::string path = g_opts.out + "/events." + std::to_string(g_pid);
  g_events = OpenWorkFile(path, O_APPEND);
}

// Block `tb` (with captured bytes pending) runs for the first time, on
// thread `t` at time `now`: its bytes are recorded unless an earlier
// translation recorded the same ones. Returns true when they rewrite
// captured code: the stream must mark the time there (OnTbExec).
bool CaptureJit(const ThreadState* t, const TbInfo* tb, uint64_t now) {
  JitPending* jit = tb->jit;
  if (jit->done.exchange(true, std::memory_order_relaxed)) return false;
  std::lock_guard lock(g_jit_mu);
  const JitShadow::Change change = g_shadow.Update(tb->start, jit->code);
  if (change == JitShadow::Change::kSame) return false;
  if (!g_jit_fd) {
    const std::string path = g_opts.out + "/" + trace::JitCodeWorkName(g_pid);
    g_jit_fd = OpenWorkFile(path, O_TRUNC | O_APPEND);
    if (!g_jit_fd) return false;
    if (!base::WriteAll(g_jit_fd.get(), trace::JitCodeHeader(), "JIT code"))
      Die("writing the JIT code file failed");
  }
  const bool replaces = change == JitShadow::Change::kReplaces;
  trace::JitCodeLoad load{
      .time = now,
      .addr = tb->start,
      .tid = U32(t->tid),
      .flags = replaces ? trace::kJitCodeReplaces : 0,
      .code = {reinterpret_cast<const char*>(jit->code.data()), jit->code.size()}};
  if (!base::WriteAll(g_jit_fd.get(), trace::FormatJitCodeRecord(load), "JIT code"))
    Die("writing the JIT code file failed");
  g_jit_records.fetch_add(1, std::memory_order_relaxed);
  g_jit_bytes.fetch_add(jit->code.size(), std::memory_order_relaxed);
  return replaces;
}

void WriteStream(int fd, std::span<const uint8_t> bytes) {
  auto r = base::WriteAll(fd, {reinterpret_cast<const char*>(bytes.data()), bytes.size()},
                          "a PT stream");
  if (!r) Die("writing a PT stream failed: %s", std::strerror(r.error().errnum()));
}

bool StartsWithPsb(const std::vector<uint8_t>& c) {
  return c.size() >= 2 && c[0] == 0x02 && c[1] == 0x82;
}

// Moves the encoder's pending bytes into the ring (oldest chunks dropped,
// keeping whole PSB periods so what remains starts at a PSB) or the file.
void Drain(ThreadState* t) {
  auto bytes = t->pt.bytes();
  std::lock_guard lock(t->mu);
  t->ring_insns = t->insns;
  t->ring_hash = t->hash;
  if (bytes.empty()) return;
  if (g_opts.full) {
    if (t->fd) WriteStream(t->fd.get(), bytes);  // none: detached (DriverGone)
  } else {
    t->ring.emplace_back(bytes.begin(), bytes.end());
    t->ring_bytes += bytes.size();
    while (t->ring.size() > 1 && t->ring_bytes > g_opts.size) {
      t->ring_bytes -= t->ring.front().size();
      t->ring.pop_front();
      ++t->ring_first;
      t->wrapped = true;
      // Drop up to the next chunk that starts with a PSB (02 82): a snapshot
      // then always begins where a decoder can synchronise.
      while (t->ring.size() > 1 && !StartsWithPsb(t->ring.front())) {
        t->ring_bytes -= t->ring.front().size();
        t->ring.pop_front();
        ++t->ring_first;
      }
    }
  }
  t->pt.Take();
}

// Every thread's pending TNT bits and ring bytes out to its stream, and
// published (before a snapshot that ends the recording).
void DrainEveryThread() {
  for (unsigned i = 0; i < kMaxVcpus; ++i) {
    ThreadState* t = g_threads[i];
    if (t == nullptr) continue;
    t->pt.FlushTnt();
    Drain(t);
    Publish(t);
  }
}

std::string StreamFile(pid_t tid, uint32_t seq) {
  return "pt-" + std::to_string(g_pid) + "-" + std::to_string(tid) + "-" + std::to_string(seq) +
         ".pt";
}

// Writes `t`'s ring as the stream of snapshot `seq`. Caller holds g_mu.
// When every chunk that entered the ring since the thread's previous
// snapshot stream is still in it, only those chunks are written, as a
// stream that continues that one (StreamMessage::follows): the ring is the
// previous streams' bytes and these, so --multi-snapshot's disk grows with
// the new data, not with the number of snapshots. Otherwise (the first
// snapshot, or the ring dropped chunks no stream holds yet) the whole ring.
void WriteRing(ThreadState* t, uint32_t seq) {
  std::lock_guard lock(t->mu);
  if (t->ring.empty()) return;
  std::string name = StreamFile(t->tid, seq);
  std::string path = g_opts.out + "/" + name;
  base::UniqueFd fd = OpenWorkFile(path, O_TRUNC);
  if (!fd) return;
  const bool follows =
      t->written_seq != 0 && !g_opts.whole_rings && t->ring_first <= t->written_end;
  const uint64_t from = follows ? t->written_end - t->ring_first : 0;
  for (uint64_t i = from; i < t->ring.size(); ++i) WriteStream(fd.get(), t->ring[i]);
  fd.reset();
  Report(StreamMessage{.seq = seq,
                       .pid = t->pid,
                       .tid = t->tid,
                       .wrapped = t->wrapped,
                       .insns = t->ring_insns,
                       .hash = t->ring_hash,
                       .follows = follows ? t->written_seq : 0,
                       .ring = t->ring_bytes,
                       .file = name});
  t->written_end = t->ring_first + t->ring.size();
  t->written_seq = seq;
}

// A snapshot of every thread's ring, as `perf` takes of AUX buffers in
// overwrite mode. `self` (when not null) is the calling guest thread: its
// pending bytes are drained first.
// `slow`: the slow call it is taken for (its line precedes the snapshot's).
void TakeSnapshot(const char* reason, const std::string& detail, ThreadState* self,
                  const SlowCallEntry* slow = nullptr) {
  if (g_opts.full) return;
  if (self != nullptr) {
    self->pt.FlushTnt();
    Drain(self);
  }
  if (self != nullptr) Publish(self);
  std::lock_guard lock(g_mu);
  uint32_t seq = g_seq.fetch_add(1);
  for (auto* t : g_threads)
    if (t != nullptr) WriteRing(t, seq);
  for (auto* t : g_finished) WriteRing(t, seq);
  g_finished.clear();
  uint64_t now = Now();
  if (slow != nullptr && self != nullptr) {
    Report(SlowCallMessage{.seq = seq, .begin = slow->begin, .length = self->clock - slow->begin});
    now = self->clock;  // when the call returned (another thread may have published later)
  }
  Report(SnapshotMessage{.seq = seq,
                         .time = now,
                         .tid = self ? U32(self->tid) : 0,
                         .reason = reason,
                         .detail = detail});
}

void FullStreamLine(ThreadState* t) {
  Report(StreamMessage{.seq = 0,
                       .pid = t->pid,
                       .tid = t->tid,
                       .wrapped = false,
                       .insns = t->insns,
                       .hash = t->hash,
                       .file = t->file});
}

void FinishFullStream(ThreadState* t) {
  if (!g_opts.full || !t->fd) return;
  t->fd.reset();
  FullStreamLine(t);
}

void EmitMmap2(uint64_t time, uint64_t addr, uint64_t len, uint64_t pgoff, const char* path,
               int prot, int flags) {
  struct stat st {};
  ::stat(path, &st);
  if (prot & PROT_EXEC) {
    MapFilterRanges(addr, len, pgoff, path);
    AddFileCode(addr, addr + len);
  }
  Report(MmapMessage{.time = time,
                     .pid = U32(g_pid),
                     .tid = U32(::gettid()),
                     .addr = addr,
                     .len = len,
                     .pgoff = pgoff,
                     .maj = major(st.st_dev),
                     .min = minor(st.st_dev),
                     .ino = st.st_ino,
                     .prot = static_cast<uint32_t>(prot),
                     .flags = static_cast<uint32_t>(flags),
                     .path = path});
}

// Emits MMAP2 records for the executable segments of an ELF QEMU loaded
// itself, at `bias`.
void EmitElfMappings(const std::string& path, const elf::LoadLayout& img, uint64_t bias) {
  for (const auto& s : img.segments) {
    if (!s.exec) continue;
    uint64_t start = (bias + s.vaddr) & ~uint64_t{0xfff};
    uint64_t end = (bias + s.vaddr + s.memsz + 0xfff) & ~uint64_t{0xfff};
    EmitMmap2(g_start_time, start, end - start, s.offset & ~uint64_t{0xfff}, path.c_str(),
              PROT_READ | PROT_EXEC, MAP_PRIVATE);
  }
}

// Called at the first translation, once QEMU has loaded the guest: the main
// binary and interpreter mappings, the process's comm (an exec's, at the
// execve's time in an image a followed exec started), runtime addresses of
// the trigger and stop-indicator symbols (in the program they were resolved
// in only: a program exec'd from it has other functions at those
// addresses, so its triggers never fire and --only-in never resumes, as
// probes on a file behave on hardware).
void DescribeImages() {
  g_images_done.store(true);
  std::string bin = qemu_plugin_path_to_binary();
  char real[4096];
  if (::realpath(bin.c_str(), real) != nullptr) bin = real;
  auto img = elf::ParseLoadLayout(base::ReadFileHead(bin, 65536).value_or(""));
  if (!img) Die("cannot read the ELF headers of %s", bin.c_str());
  uint64_t bias = 0;
  if (img->pie) {
    auto lo = elf::LowestExecVaddr(img->segments);
    if (lo) bias = qemu_plugin_start_code() - *lo;
  }
  std::string name = bin.substr(bin.rfind('/') + 1);
  Report(CommMessage{.time = g_start_time,
                     .pid = U32(g_pid),
                     .tid = U32(g_pid),
                     .exec = true,
                     .name = name.substr(0, 15)});
  EmitElfMappings(bin, *img, bias);
  if (!img->interp.empty()) {
    std::string interp = img->interp;
    if (::realpath(interp.c_str(), real) != nullptr) interp = real;
    auto iimg = elf::ParseLoadLayout(base::ReadFileHead(interp, 65536).value_or(""));
    if (iimg) EmitElfMappings(interp, *iimg, qemu_plugin_entry_code() - iimg->entry);
  }
  const bool resolved_here = g_main.empty() || g_main == bin;
  if (g_main.empty()) g_main = bin;
  if (!resolved_here) return;
  for (uint64_t a : g_opts.trigger) g_trigger_rt.push_back(a + bias);
  for (uint64_t a : g_opts.stop) g_stop_rt.push_back(a + bias);
  if (g_opts.slow_ns != 0) g_slow_rt = g_opts.slow + bias;
  if (g_opts.only_in != 0) g_only_in_rt = g_opts.only_in + bias;
}

ThreadState* StartThread(unsigned vcpu) {
  PtStreamOptions o;
  o.ret_compression = g_opts.retcomp;
  o.buffer_size = g_opts.psb_period + (64 << 10);
  o.mtc = g_opts.mtc;
  o.mtc_freq = static_cast<uint32_t>(g_opts.mtc_freq);
  o.cyc = g_opts.cyc;
  o.cyc_thresh = static_cast<uint32_t>(g_opts.cyc_thresh);
  o.tsc_per_ctc = kTscPerCtc;
  o.cbr = kCoreBusRatio;
  auto* t = new ThreadState(o);
  t->pid = g_pid;
  t->tid = static_cast<pid_t>(::gettid());
  // A new thread (or a forked child) starts when its creator's clone did.
  t->clock = g_clone_clock.load(std::memory_order_relaxed);
  // The thread that called a followed execve runs on here: its stream goes
  // on (its ring, or its open full-execution file) and is not started anew.
  std::optional<CarriedThread> adopted = std::exchange(g_adopt, std::nullopt);
  if (adopted) {
    // The new encoder's cycle counter starts at the exec, not at 0: its
    // first PSB would otherwise follow the old stream's last packet with a
    // CYC of the whole run so far, which perf adds to the time it had there
    // (it then ignores the PSB's TSC as going backwards: every time after
    // the exec came out 115 us late in perf_interop's exec case).
    t->pt.RestartCycles(t->clock);
    t->insns = adopted->insns;
    t->hash = adopted->hash;
    t->wrapped = adopted->wrapped;
    for (std::vector<uint8_t>& chunk : adopted->ring) {
      t->ring_bytes += chunk.size();
      t->ring.push_back(std::move(chunk));
    }
    if (g_opts.full && adopted->fd >= 0) {
      t->fd.reset(adopted->fd);
      t->file = adopted->file;
      FullStreamLine(t);
    }
  }
  if (g_opts.full && !t->fd) {
    t->file = StreamFile(t->tid, 0);
    std::string path = g_opts.out + "/" + t->file;
    t->fd = OpenWorkFile(path, O_TRUNC);
    // Described now and again when the thread ends (the last description
    // wins): a stream cut short by a full disk or a kill is still listed.
    FullStreamLine(t);
  }
  if (!adopted) Report(ItraceMessage{.time = t->clock, .pid = U32(t->pid), .tid = U32(t->tid)});
  std::lock_guard lock(g_mu);
  g_threads[vcpu] = t;
  return t;
}

// The thread left user mode at a far transfer and will not come back (exit):
// its stream is complete.
void EndThread(unsigned vcpu) {
  std::lock_guard lock(g_mu);
  ThreadState* t = g_threads[vcpu];
  if (t == nullptr) return;
  g_threads[vcpu] = nullptr;
  t->pt.FlushTnt();
  Drain(t);
  Publish(t);
  FutexWoken(ClearChildTid(t->tid), t->clock);  // the kernel wakes it at exit
  Report(ExitMessage(t));
  if (g_opts.full) {
    FinishFullStream(t);
  } else {
    g_finished.push_back(t);
  }
}

void HandleRequests(ThreadState* self, int flags) {
  if (flags & kStopped) return;
  int expected = flags;
  if (!g_flags.compare_exchange_strong(expected, kStopped)) return;  // another thread took it
  if (!g_opts.full) {
    const bool asked = (flags & (kReqCtrlC | kReqDuration)) == 0;
    TakeSnapshot((flags & kReqCtrlC) ? "ctrl-c" : asked ? "signal" : "duration", "", self);
    if (asked || (g_opts.multi && !(flags & kReqCtrlC))) g_flags.store(0);
  } else if ((flags & (kReqCtrlC | kReqDuration)) == 0) {
    g_flags.store(0);  // full execution: everything is recorded anyway
  }
  // Ctrl-C was meant for the program too: QEMU delivers it to the guest.
  if (flags & kReqCtrlC) ::kill(::getpid(), SIGINT);
}

// The shadow return stack (SlowCalls::returns) follows the call or return
// that led from t->prev to `tb` (t->prev retired just now): a call pushes
// its return address, a return pops down to the nearest frame that returns
// to `tb` (a return elsewhere, to a pushed address or a coroutine switch,
// leaves it alone). Shared by --slower-than and --only-in.
void ShadowStep(ThreadState* t, const TbInfo* tb) {
  SlowCalls& sc = t->slow;
  const TbInfo* p = t->prev;
  if ((p->kind == ExitKind::kDirectCall || p->kind == ExitKind::kIndirectCall) && p->pushes) {
    if (sc.returns.size() >= kMaxShadowDepth) {
      // Runaway depth: forget the outermost frames (and calls begun there).
      constexpr size_t kDrop = 1024;
      sc.returns.erase(sc.returns.begin(), sc.returns.begin() + kDrop);
      for (std::vector<SlowCallEntry>* watched : {&sc.entries, &t->only_in}) {
        std::erase_if(*watched, [](const SlowCallEntry& e) { return e.depth <= kDrop; });
        for (SlowCallEntry& e : *watched) e.depth -= kDrop;
      }
    }
    sc.returns.push_back(p->fallthrough);
  } else if (p->kind == ExitKind::kRet) {
    constexpr size_t kSearch = 256;
    const size_t n = sc.returns.size();
    for (size_t i = n; i > 0 && n - i < kSearch; --i) {
      if (sc.returns[i - 1] != tb->start) continue;
      sc.returns.resize(i - 1);
      break;
    }
  }
}

// After a return to `target` left the shadow `depth` deep: pops the watched
// frames deeper than that, calling ended(frame, returned): `returned` when
// the return went to the frame's return address, false when the frame was
// unwound past (longjmp, an exception) without returning.
template <typename Ended>
void EndWatchedFrames(std::vector<SlowCallEntry>& watched, size_t depth, uint64_t target,
                      Ended&& ended) {
  while (!watched.empty() && watched.back().depth > depth) {
    const SlowCallEntry e = watched.back();
    watched.pop_back();
    ended(e, e.ret == target && e.depth == depth + 1);
  }
}

// --slower-than at the start of block `tb` of thread `t` (t->prev retired
// just now, ShadowStep has followed it, t->clock is this block's start):
// starts measuring when `tb` is the slow function's entry, and returns the
// call that returned here when it was slow (and the rate limit lets it
// through), else nullopt.
std::optional<SlowCallEntry> SlowCallStep(ThreadState* t, const TbInfo* tb) {
  SlowCalls& sc = t->slow;
  std::optional<SlowCallEntry> slow;
  if (t->prev->kind == ExitKind::kRet) {
    EndWatchedFrames(sc.entries, sc.returns.size(), tb->start,
                     [&](const SlowCallEntry& e, bool returned) {
                       if (!returned) return;
                       const uint64_t length = t->clock - e.begin;
                       if (length < g_opts.slow_ns || slow) return;
                       const uint64_t gap = std::max<uint64_t>(g_opts.slow_ns, 10'000'000);
                       if (sc.snapped && t->clock - sc.last_snap < gap) {
                         ++sc.skipped;
                         g_slow_skipped.fetch_add(1, std::memory_order_relaxed);
                         return;
                       }
                       slow = e;
                     });
  }
  if ((tb->flags & kFlagSlow) && !sc.returns.empty())
    sc.entries.push_back({sc.returns.back(), sc.returns.size(), t->clock});
  return slow;
}

// --only-in at the start of block `tb` (after ShadowStep): as Linux 6.13's
// AUX pause/resume with a uprobe on the function's entry (aux_resume) and a
// uretprobe (aux_pause). A return through a frame entered at the entry
// pauses tracing (the uretprobe fires there: in a recursion, at the
// innermost return, as on hardware), the entry resumes it; a frame unwound
// past without returning pauses nothing (no uretprobe fires). Returns true
// when tracing resumes at `tb` after being paused.
bool OnlyInStep(ThreadState* t, const TbInfo* tb) {
  const bool was_paused = t->paused;
  if (t->prev != nullptr && t->prev->kind == ExitKind::kRet) {
    EndWatchedFrames(t->only_in, t->slow.returns.size(), tb->start,
                     [&](const SlowCallEntry&, bool returned) {
                       if (returned) t->paused = true;
                     });
  }
  if (tb->flags & kFlagOnlyIn) {
    if (!t->slow.returns.empty())
      t->only_in.push_back({t->slow.returns.back(), t->slow.returns.size(), t->clock});
    t->paused = false;
  }
  return was_paused && !t->paused;
}

// "handle_request took 5.123 ms (from +1.000 ms, thread 42)", and the calls
// the rate limit skipped on this thread since its previous slow-call snapshot.
std::string SlowCallDetail(const ThreadState* t, const SlowCallEntry& e) {
  std::string d = g_opts.slow_name + " took " + base::FormatDuration(t->clock - e.begin) +
                  " (from +" + base::FormatDuration(e.begin) + ", thread " +
                  std::to_string(t->tid) + ")";
  if (t->slow.skipped != 0)
    d += "; " + std::to_string(t->slow.skipped) +
         " slow call(s) of this thread skipped before it by the rate limit";
  return d;
}

// --filter: block `p` (traced) was followed by `tb`, which lies outside
// every filter range (or in a tracestop range). The CPU stops packet
// generation at the branch that left (SDM 33.2.5.3, "Filtering by IP"):
// TIP.PGD with the branch's target instead of its TNT bit or TIP, which
// libipt binds to that branch. Leaving by sequential flow (no branch) or
// by a signal is an asynchronous disable, FUP(next IP) + TIP.PGD.
void LeaveFilter(ThreadState* t, const TbInfo* p, const TbInfo* tb) {
  switch (p->kind) {
    case ExitKind::kRep:
    case ExitKind::kNone: t->pt.AsyncDisable(p->fallthrough); break;
    case ExitKind::kCond:
      if (tb->start == p->target || tb->start == p->fallthrough) {
        t->pt.Pgd(tb->start);
      } else {  // a signal after the branch, as in OnTbExec
        t->pt.Tnt(false);
        t->pt.AsyncDisable(p->fallthrough);
      }
      break;
    case ExitKind::kDirectCall:
    case ExitKind::kDirect:
      if (tb->start == p->target) {
        t->pt.Pgd(tb->start);
      } else {
        t->pt.AsyncDisable(p->target);
      }
      break;
    case ExitKind::kIndirectCall:
    case ExitKind::kIndirect:
    case ExitKind::kRet: t->pt.Pgd(tb->start); break;
    case ExitKind::kFar: break;  // tracing went off at the far transfer already
  }
}

// Whether a decoder has walked up to this block's first instruction once it
// has the packets so far: the previous block ended with a branch that has a
// packet (a TNT bit or a TIP). After a direct call or jump, or a block that
// just ends, the decoder walks those instructions only after the packets
// that follow, so a PSB+ here would set its TSC before them: the exception
// oracle's CI failure, three frames 2 ns late (docs/testing.md, "The
// call-stack oracle"). A due PSB+ waits for such a block.
bool Walked(const TbInfo* prev) {
  if (prev == nullptr) return true;
  switch (prev->kind) {
    case ExitKind::kCond:
    case ExitKind::kIndirect:
    case ExitKind::kIndirectCall:
    case ExitKind::kRet:
    case ExitKind::kFar: return true;
    default: return false;
  }
}

void OnTbExec(unsigned vcpu, void* udata) {
  if (int f = g_flags.load(std::memory_order_relaxed); f != 0) {
    if (f & kStopped) {
      ResetIfDetached();
      return;
    }
    HandleRequests(vcpu < kMaxVcpus ? g_threads[vcpu] : nullptr, f);
    if (g_flags.load() & kStopped) return;
  }
  const auto* tb = static_cast<const TbInfo*>(udata);
  if (vcpu >= kMaxVcpus) return;
  ThreadState* t = g_threads[vcpu];
  if (t == nullptr) t = StartThread(vcpu);

  // The block starts when the previous one retired its last instruction:
  // that instruction's branch packets carry this time.
  const uint64_t now = t->clock;
  // A rep string instruction's next iteration: it retires once in PT.
  if (t->prev != nullptr && t->prev->kind == ExitKind::kRep && tb->start == t->prev->last_ip)
    return;
  if ((g_opts.slow_ns != 0 || g_opts.only_in != 0) && t->prev != nullptr) ShadowStep(t, tb);
  // --only-in: paused outside the function (TIP.PGD at the return that
  // pauses, PSB+ and TIP.PGE at the entry that resumes: what clearing and
  // setting TraceEn in pt_event_stop/pt_event_start gives the decoder).
  const bool resumed = g_opts.only_in != 0 && OnlyInStep(t, tb);
  // --filter: whether this block is traced (tracing on only inside the
  // filter ranges, never again once a tracestop range was entered).
  const bool trace_stop = (tb->flags & kFlagTraceStop) != 0 && !t->trace_stopped;
  const bool traced = !t->trace_stopped && !trace_stop &&
                      (!g_opts.filtering || (tb->flags & kFlagInFilter) != 0) &&
                      (g_opts.only_in == 0 || !t->paused);
  if (t->enabled && !traced) {
    t->pt.SetTime(now);
    LeaveFilter(t, t->prev, tb);
    if (trace_stop) t->pt.TraceStop();
    t->enabled = false;
  } else if (t->enabled) {
    t->pt.SetTime(now);
    const TbInfo* p = t->prev;
    switch (p->kind) {
      case ExitKind::kRep:
      case ExitKind::kNone:
        if (tb->start != p->fallthrough) {
          t->pt.AsyncDisable(p->fallthrough);
          t->enabled = false;
        }
        break;
      case ExitKind::kCond:
        if (tb->start == p->target) {
          t->pt.Tnt(true);
        } else {
          t->pt.Tnt(false);
          // Neither successor: a signal was delivered after the branch. The
          // resume point is unknown here; the fall-through is reported.
          if (tb->start != p->fallthrough) {
            t->pt.AsyncDisable(p->fallthrough);
            t->enabled = false;
          }
        }
        break;
      case ExitKind::kDirectCall:
        if (p->pushes) t->pt.Call(p->fallthrough);
        [[fallthrough]];
      case ExitKind::kDirect:
        if (tb->start != p->target) {
          t->pt.AsyncDisable(p->target);
          t->enabled = false;
        }
        break;
      case ExitKind::kIndirectCall:
        t->pt.Tip(tb->start);
        if (p->pushes) t->pt.Call(p->fallthrough);
        break;
      case ExitKind::kIndirect: t->pt.Tip(tb->start); break;
      case ExitKind::kRet: t->pt.Ret(tb->start); break;
      case ExitKind::kFar: break;
    }
  }

  if (g_opts.slow_ns != 0 && t->prev != nullptr) {
    if (auto slow = SlowCallStep(t, tb); slow && !g_opts.full) {
      // As at a trigger: the stream ends at the return, the slow call whole
      // in it (as far as the ring reaches back).
      if (t->enabled) {
        t->pt.AsyncDisable(tb->start);
        t->enabled = false;
      }
      TakeSnapshot("slow-call", SlowCallDetail(t, *slow), t, &*slow);
      t->slow.snapped = true;
      t->slow.last_snap = t->clock;
      t->slow.skipped = 0;
      if (!g_opts.multi) {
        g_flags.store(kStopped);
        return;
      }
    }
  }

  if (tb->flags != 0) {
    bool hit = false;
    const char* reason = "";
    std::string detail;
    if (tb->flags & kFlagStop) {
      hit = true;
      reason = "stop-indicator";
    } else if (tb->flags & kFlagTrigger) {
      hit = true;
      reason = "trigger";
      detail = g_opts.trigger_name;
    }
    if (hit && !g_opts.full) {
      // Tracing pauses while the snapshot is read, as perf does: the stream
      // ends exactly at the trigger's first instruction.
      if (t->enabled) {
        t->pt.AsyncDisable(tb->start);
        t->enabled = false;
      }
      TakeSnapshot(reason, detail, t);
      if (!g_opts.multi) {
        g_flags.store(kStopped);
        return;
      }
    }
  }

  // Rewritten code: a PSB+ at its first instruction (its FUP), with a TSC
  // of this moment, so the decoder switches to the new bytes exactly here
  // even when a direct branch (no packet) led into them.
  const bool rewritten = tb->jit != nullptr && !tb->jit->done.load(std::memory_order_relaxed) &&
                         CaptureJit(t, tb, now);

  if (trace_stop) t->trace_stopped = true;
  const uint64_t tsc = now;
  t->clock += tb->ninsn;
  if (!traced) {  // outside the filters: nothing of it is in the trace
    t->prev = tb;
    return;
  }
  if (!t->enabled) {
    if (!t->started || t->pt.since_psb() >= g_opts.psb_period || resumed) {
      t->pt.FlushTnt();
      Drain(t);
      // A resume starts a new ring chunk at its PSB (no CYC for the pause).
      if (resumed) t->pt.RestartCycles(tsc);
      t->pt.Psb(tsc, false, 0);
      t->started = true;
    }
    t->pt.Pge(tb->start, tsc);
    t->enabled = true;
  } else if (rewritten || (t->pt.since_psb() >= g_opts.psb_period && Walked(t->prev))) {
    t->pt.FlushTnt();
    Drain(t);
    t->pt.Psb(tsc, true, tb->start);
  }

  t->insns += tb->ninsn;
  if (g_opts.hash) {
    for (uint64_t ip : tb->ips) t->hash = (t->hash ^ ip) * kStreamHashPrime;
  }
  t->prev = tb;
  if (tb->kind == ExitKind::kFar) {
    t->pt.SetTime(t->clock);  // the syscall retires at the end of the block
    t->pt.PgdSuppressed();
    t->enabled = false;
  }
}

void OnTbTrans(qemu_plugin_id_t, qemu_plugin_tb* tb) {
  if (g_detached.load(std::memory_order_relaxed)) return;  // nothing is recorded any more
  if (!g_images_done.load(std::memory_order_relaxed)) DescribeImages();
  size_t n = qemu_plugin_tb_n_insns(tb);
  if (n == 0) return;
  auto* info = new TbInfo;  // lives as long as QEMU may run the block
  info->start = qemu_plugin_tb_vaddr(tb);
  info->ninsn = static_cast<uint32_t>(n);
  qemu_plugin_insn* last = qemu_plugin_tb_get_insn(tb, n - 1);
  uint64_t last_ip = qemu_plugin_insn_vaddr(last);
  size_t last_size = qemu_plugin_insn_size(last);
  auto* data = static_cast<const uint8_t*>(qemu_plugin_insn_data(last));
  auto exit = ClassifyInstruction({data, last_size}, last_ip);
  if (!exit) {
    // The abandoned page-crossing instruction of a page-split block: it does
    // not execute here; the block falls through to it.
    info->ninsn = static_cast<uint32_t>(n - 1);
    info->kind = ExitKind::kNone;
    info->last_ip = last_ip;
    info->fallthrough = last_ip;
  } else {
    info->kind = exit->kind;
    info->target = exit->target;
    info->fallthrough = exit->fallthrough;
    info->pushes = exit->pushes;
    info->last_ip = last_ip;
  }
  if (g_opts.hash) {
    for (size_t i = 0; i < info->ninsn; ++i)
      info->ips.push_back(qemu_plugin_insn_vaddr(qemu_plugin_tb_get_insn(tb, i)));
  }
  for (uint64_t a : g_trigger_rt)
    if (a == info->start) info->flags |= kFlagTrigger;
  for (uint64_t a : g_stop_rt)
    if (a == info->start) info->flags |= kFlagStop;
  if (g_slow_rt != 0 && g_slow_rt == info->start) info->flags |= kFlagSlow;
  if (g_only_in_rt != 0 && g_only_in_rt == info->start) info->flags |= kFlagOnlyIn;
  info->flags |= FilterFlags(info->start);
  if (g_opts.jit && info->ninsn > 0 && (info->start >> 63) == 0 && !InFileCode(info->start)) {
    // Code from memory no file backs: its bytes, instruction by instruction
    // (contiguous within a block), unless they were captured already.
    std::vector<uint8_t> code;
    uint64_t next = info->start;
    for (size_t i = 0; i < info->ninsn; ++i) {
      qemu_plugin_insn* insn = qemu_plugin_tb_get_insn(tb, i);
      if (qemu_plugin_insn_vaddr(insn) != next) break;
      const size_t size = qemu_plugin_insn_size(insn);
      const auto* bytes = static_cast<const uint8_t*>(qemu_plugin_insn_data(insn));
      code.insert(code.end(), bytes, bytes + size);
      next += size;
    }
    bool same = false;
    {
      std::lock_guard lock(g_jit_mu);
      same = g_shadow.Compare(info->start, code) == JitShadow::Change::kSame;
    }
    if (!same && !code.empty()) {
      info->jit = new JitPending;  // lives as long as the block
      info->jit->code = std::move(code);
    }
  }
  if (info->ninsn == 0) {
    delete info;
    return;
  }
  qemu_plugin_register_vcpu_tb_exec_cb(tb, OnTbExec, QEMU_PLUGIN_CB_NO_REGS, info);
}

int64_t SteadyNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// Guest memory: guest_base is 0 in QEMU 7.2 user mode, so guest addresses
// are host addresses. Read through process_vm_readv, so a bad pointer from
// the guest is a failed read, not a crash.
bool ReadGuest(uint64_t addr, void* out, size_t n) {
  iovec local{out, n};
  // Guest addresses are integers; process_vm_readv wants them as pointers.
  iovec remote{reinterpret_cast<void*>(addr), n};  // NOLINT(performance-no-int-to-ptr)
  return ::process_vm_readv(::getpid(), &local, 1, &remote, 1, 0) == static_cast<ssize_t>(n);
}

// A NUL-terminated guest string (read a page at a time: the next page may
// be unmapped); nullopt where the kernel's execve would fail with EFAULT or
// E2BIG (MAX_ARG_STRLEN, 32 pages).
std::optional<std::string> ReadGuestString(uint64_t addr) {
  constexpr size_t kPage = 4096, kMax = 32 * kPage;
  std::string out;
  char buf[kPage];
  while (out.size() < kMax) {
    const size_t n = kPage - (addr & (kPage - 1));
    if (!ReadGuest(addr, buf, n)) return std::nullopt;
    if (const void* nul = std::memchr(buf, '\0', n); nul != nullptr) {
      out.append(buf, static_cast<const char*>(nul) - buf);
      return out;
    }
    out.append(buf, n);
    addr += n;
  }
  return std::nullopt;
}

// A guest argv or envp: pointers up to a null one (a null array is empty,
// as Linux takes it).
std::optional<std::vector<std::string>> ReadGuestStrings(uint64_t array) {
  std::vector<std::string> out;
  if (array == 0) return out;
  constexpr size_t kMaxStrings = 1 << 20;  // far above what ARG_MAX lets through
  for (size_t i = 0; i < kMaxStrings; ++i) {
    uint64_t p = 0;
    if (!ReadGuest(array + i * sizeof(p), &p, sizeof(p))) return std::nullopt;
    if (p == 0) return out;
    std::optional<std::string> s = ReadGuestString(p);
    if (!s) return std::nullopt;
    out.push_back(std::move(*s));
  }
  return std::nullopt;
}

// The path of open file `fd` ("": none, such as a memfd's or a deleted
// file's).
std::string FdPath(int fd) {
  char link[64], path[4096];
  std::snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
  const ssize_t n = ::readlink(link, path, sizeof(path) - 1);
  if (n <= 0 || path[0] != '/') return "";
  std::string p(path, static_cast<size_t>(n));
  return ::access(p.c_str(), F_OK) == 0 ? p : "";
}

// QEMU serves /proc/self/exe (and /proc/PID/exe of its own pid) as the
// guest's program (linux-user/syscall.c, is_proc_myself): an execve of it
// runs the program again, not QEMU.
bool IsProcSelfExe(const std::string& path) {
  return path == "/proc/self/exe" || path == "/proc/" + std::to_string(::getpid()) + "/exe";
}

std::string CarryPath() { return g_opts.out + "/exec-carry." + std::to_string(g_pid); }

// `t`'s state for the image an exec starts. Caller holds g_mu (and, for
// another thread, accepts that it runs on meanwhile: the kernel kills it
// at the exec, so what it does after this copy is lost, as its packets not
// yet drained are).
CarriedThread Carried(ThreadState* t, bool self, bool exited) {
  CarriedThread c;
  c.pid = t->pid;
  c.tid = t->tid;
  c.clock = t->clock;
  c.insns = t->insns;
  c.hash = t->hash;
  c.exited = exited;
  c.self = self;
  std::lock_guard lock(t->mu);
  c.wrapped = t->wrapped;
  for (const auto& chunk : t->ring) c.ring.push_back(chunk);
  if (g_opts.full) {
    c.file = t->file;
    if (self && t->fd) c.fd = t->fd.get();
  }
  return c;
}

// Sets or clears FD_CLOEXEC on `fd`.
void SetCloexec(int fd, bool on) {
  if (fd < 0) return;
  const int flags = ::fcntl(fd, F_GETFD);
  if (flags >= 0) ::fcntl(fd, F_SETFD, on ? (flags | FD_CLOEXEC) : (flags & ~FD_CLOEXEC));
}

// Replaces this process, as execve would, with qemu-x86_64 running
// `target` with this plugin, handing the recording over (ExecCarry): the
// calling thread's stream goes on in the new image, the other threads end
// there (the kernel kills them). Returns only when that execve failed, with
// its errno; nothing has changed then.
int FollowExec(ThreadState* self, const ExecTarget& target, const std::vector<std::string>& envp) {
  char exe[4096];
  const ssize_t n = ::readlink("/proc/self/exe", exe, sizeof(exe) - 1);
  if (n <= 0) return errno;
  const std::string qemu(exe, static_cast<size_t>(n));
  if (self != nullptr) {
    self->pt.FlushTnt();
    Drain(self);
    Publish(self);
  }
  ExecCarry carry;
  carry.clock = self != nullptr ? self->clock : Now();
  carry.ctl_ino = g_ctl_ino;
  carry.slow_skipped = g_slow_skipped.load();
  carry.main = g_main;
  if (g_opts.duration_ms > 0) {
    const int64_t since = g_duration_start_ns.load();
    uint64_t left = g_opts.duration_ms;
    if (since != 0) {
      const int64_t elapsed_ms = (SteadyNs() - since) / 1'000'000;
      left =
          elapsed_ms >= static_cast<int64_t>(left) ? 1 : left - static_cast<uint64_t>(elapsed_ms);
    }
    carry.duration_left_ms = left;
  }
  {
    std::lock_guard lock(g_mu);
    carry.next_seq = g_seq.load();
    for (ThreadState* t : g_threads)
      if (t != nullptr) carry.threads.push_back(Carried(t, t == self, false));
    for (ThreadState* t : g_finished) carry.threads.push_back(Carried(t, false, true));
  }
  int jit_fd = -1;
  {
    std::lock_guard lock(g_jit_mu);
    if (g_jit_fd) jit_fd = g_jit_fd.get();
  }
  carry.jit_fd = jit_fd;
  const std::string carry_path = CarryPath();
  {
    base::UniqueFd fd(::open(carry_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
    if (!fd) return errno;
    if (!base::WriteAll(fd.get(), FormatExecCarry(carry), "the exec hand-over file")) {
      ::unlink(carry_path.c_str());
      return EIO;
    }
  }
  std::string plugin = EscapePluginArg(g_plugin_path);
  for (const std::string& a : g_plugin_args) plugin += "," + EscapePluginArg(a);
  plugin += ",exec=" + EscapePluginArg(carry_path);
  const std::vector<std::string> cmd = QemuExecCommand(qemu, plugin, target);
  std::vector<char*> argv, env;
  for (const std::string& a : cmd) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  for (const std::string& e : envp) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  // The files the new image writes on stay open across it.
  int stream_fd = -1;
  for (const CarriedThread& t : carry.threads)
    if (t.self) stream_fd = t.fd;
  SetCloexec(stream_fd, false);
  SetCloexec(jit_fd, false);
  ::execve(qemu.c_str(), argv.data(), env.data());
  const int err = errno;
  SetCloexec(stream_fd, true);
  SetCloexec(jit_fd, true);
  ::unlink(carry_path.c_str());
  return err;
}

// The guest calls execve or execveat (before QEMU runs it). QEMU 7.2 would
// run the new program natively, untraced; an x86-64 program (or a script
// whose interpreter is one) is followed instead: FollowExec replaces the
// process with QEMU running it. What QEMU cannot run goes natively as
// before, with everything on disk first (a successful execve never returns
// and atexit never runs) and a note; an execve that will fail (execvp's
// PATH search) changes nothing.
void OnExec(unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
            uint64_t a5) {
  ThreadState* self = g_threads[vcpu];
  // execve(path, argv, envp); execveat(dirfd, path, argv, envp, flags).
  const bool at = num == __NR_execveat;
  std::optional<std::string> path = ReadGuestString(at ? a2 : a1);
  std::optional<std::vector<std::string>> argv = ReadGuestStrings(at ? a3 : a2);
  std::optional<std::vector<std::string>> envp = ReadGuestStrings(at ? a4 : a3);
  if (!path || !argv || !envp) return;  // EFAULT, E2BIG: the exec fails
  ExecTarget target;
  const auto dirfd = static_cast<int>(a1);
  if (at && path->empty() && (a5 & AT_EMPTY_PATH) != 0) {
    path = FdPath(dirfd);  // fexecve
  } else if (at && !path->empty() && (*path)[0] != '/' && dirfd != AT_FDCWD) {
    const std::string dir = FdPath(dirfd);
    path = dir.empty() ? "" : dir + "/" + *path;
  }
  if (path->empty()) {
    target.kind = ExecTarget::Kind::kNative;
    target.why = "execveat of an open file that has no path QEMU could load";
  } else {
    if (IsProcSelfExe(*path)) path = qemu_plugin_path_to_binary();
    target = ResolveExec(*path, std::move(*argv), ReadExecFile);
  }
  if (target.kind == ExecTarget::Kind::kFails) return;
  if (target.kind == ExecTarget::Kind::kFollow) {
    const int err = FollowExec(self, target, *envp);
    target.why = "starting qemu-x86_64 for it failed: " + std::string(std::strerror(err));
  }
  // If the native execve fails after all, tracing goes on and the later
  // lines supersede these.
  Report(NoteMessage{"execve: " + *path + " runs outside the emulator and is not traced (" +
                     target.why + ")"});
  if (self != nullptr) {
    self->pt.FlushTnt();
    Drain(self);
  }
  TakeSnapshot("exit", "execve", self);
  if (g_opts.full) {
    std::lock_guard lock(g_mu);
    for (auto* t : g_threads)
      if (t != nullptr) FullStreamLine(t);
  }
  Report(DoneMessage{Now()});
}

void OnSyscall(qemu_plugin_id_t, unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3,
               uint64_t a4, uint64_t a5, uint64_t a6, uint64_t, uint64_t) {
  if (vcpu >= kMaxVcpus || g_detached.load(std::memory_order_relaxed)) return;
  ThreadState* self = g_threads[vcpu];
  if (self != nullptr) {
    Publish(self);
    // A snapshot that another thread takes writes this thread's ring, not
    // the bytes its encoder still holds; so a thread entering a syscall
    // (which may block it, in a join or a read, for as long as the program
    // runs) moves them into the ring first. Otherwise every snapshot taken
    // while it waits lacks its last instructions before the wait (up to a
    // PSB period: Emulate.MultiSnapshotStoresWhatEachThreadsRingGained found
    // 2,910 missing in a thread in pthread_join). The block's TIP.PGD is out
    // already: TNT holds nothing. The PSB period counts on across the drain
    // (PtStream::since_psb).
    if (!g_opts.full) Drain(self);
  }
  const uint64_t clock = self != nullptr ? self->clock : Now();
  g_waiting_on[vcpu][0] = g_waiting_on[vcpu][1] = 0;
  switch (num) {
    case __NR_futex: {
      // futex(uaddr, op, val, timeout, uaddr2, val3); op without
      // FUTEX_PRIVATE_FLAG and FUTEX_CLOCK_REALTIME.
      switch (a2 & 0x7f) {
        case FUTEX_WAKE:
        case FUTEX_WAKE_BITSET:
        case FUTEX_UNLOCK_PI: FutexWoken(a1, clock); break;
        case FUTEX_REQUEUE:
        case FUTEX_CMP_REQUEUE:
        case FUTEX_WAKE_OP:
        case FUTEX_CMP_REQUEUE_PI:
          FutexWoken(a1, clock);
          FutexWoken(a5, clock);
          break;
        case FUTEX_WAIT:
        case FUTEX_WAIT_BITSET:
        case FUTEX_LOCK_PI:
        case FUTEX_TRYLOCK_PI: g_waiting_on[vcpu][0] = a1; break;
        case FUTEX_WAIT_REQUEUE_PI:
          g_waiting_on[vcpu][0] = a1;
          g_waiting_on[vcpu][1] = a5;
          break;
        default: break;
      }
      break;
    }
    case __NR_clone:  // clone(flags, newsp, parent_tid, child_tid, tls)
      g_clone_clock.store(clock, std::memory_order_relaxed);
      g_pending_ctid[vcpu] = (a1 & CLONE_CHILD_CLEARTID) ? a4 : 0;
      break;
    case __NR_fork:
    case __NR_vfork: g_clone_clock.store(clock, std::memory_order_relaxed); break;
    case __NR_set_tid_address: {
      std::lock_guard lock(g_futex_mu);
      g_clear_tid[static_cast<pid_t>(::gettid())] = a1;
      break;
    }
    case __NR_munmap:  // munmap(addr, len)
      g_pending_unmap[vcpu][0] = a1;
      g_pending_unmap[vcpu][1] = a2;
      break;
    case __NR_mmap:  // mmap(addr, len, prot, flags, fd, off)
      if ((a4 & MAP_FIXED) && static_cast<int64_t>(a5) < 0) {
        g_pending_unmap[vcpu][0] = a1;
        g_pending_unmap[vcpu][1] = a2;
      }
      if ((a3 & PROT_EXEC) && static_cast<int64_t>(a5) >= 0) {
        g_pending_mmap[vcpu][0] = a3 | (uint64_t{1} << 32);
        g_pending_mmap[vcpu][1] = a5;
        g_pending_mmap[vcpu][2] = a2;
        g_pending_mmap[vcpu][3] = a6;
      }
      break;
    case __NR_exit:  // this thread only
      if (!(g_flags.load() & kStopped) || g_opts.full) EndThread(vcpu);
      break;
    case __NR_execve:
    case __NR_execveat:
      // A request not taken yet is taken first: the exec replaces the
      // thread that would have taken it.
      if (const int f = g_flags.load(); f != 0 && !(f & kStopped)) HandleRequests(self, f);
      if (!(g_flags.load() & kStopped)) OnExec(vcpu, num, a1, a2, a3, a4, a5);
      break;
    default: break;
  }
  // Last, so the plugin's own work above is not counted as the syscall's.
  if (g_opts.waits) g_syscall_wall[vcpu].Enter(MonotonicNs());
}

void OnSyscallRet(qemu_plugin_id_t, unsigned vcpu, int64_t num, int64_t ret) {
  if (vcpu >= kMaxVcpus || g_detached.load(std::memory_order_relaxed)) return;
  ThreadState* self = g_threads[vcpu];
  // --emulate-waits: the syscall took its wall time on this thread's clock
  // (before a futex wait catches up with its waker, so the later of the two
  // wins). The block after it starts with a TIP.PGE whose TSC carries it.
  if (g_opts.waits) {
    const uint64_t waited = g_syscall_wall[vcpu].Return(MonotonicNs());
    if (self != nullptr) self->clock += waited;
  }
  if (self != nullptr) {
    FutexCatch(self, g_waiting_on[vcpu][0]);
    FutexCatch(self, g_waiting_on[vcpu][1]);
  }
  g_waiting_on[vcpu][0] = g_waiting_on[vcpu][1] = 0;
  if (num == __NR_clone && ret > 0 && g_pending_ctid[vcpu] != 0) {
    std::lock_guard lock(g_futex_mu);
    g_clear_tid[static_cast<pid_t>(ret)] = g_pending_ctid[vcpu];
  }
  const uint64_t now = self != nullptr ? self->clock : Now();
  if ((num == __NR_munmap || num == __NR_mmap) && g_pending_unmap[vcpu][1] != 0) {
    const uint64_t lo = g_pending_unmap[vcpu][0], len = g_pending_unmap[vcpu][1];
    g_pending_unmap[vcpu][0] = g_pending_unmap[vcpu][1] = 0;
    if (ret >= 0) RemoveFileCode(lo, lo + ((len + 0xfff) & ~uint64_t{0xfff}));
  }
  if (num == __NR_mmap) {
    uint64_t prot = g_pending_mmap[vcpu][0];
    g_pending_mmap[vcpu][0] = 0;
    if (prot == 0 || ret < 0) return;
    char link[64], path[4096];
    std::snprintf(link, sizeof(link), "/proc/self/fd/%d",
                  static_cast<int>(g_pending_mmap[vcpu][1]));
    ssize_t n = ::readlink(link, path, sizeof(path) - 1);
    if (n <= 0) return;
    path[n] = '\0';
    uint64_t len = (g_pending_mmap[vcpu][2] + 0xfff) & ~uint64_t{0xfff};
    EmitMmap2(now, static_cast<uint64_t>(ret), len, g_pending_mmap[vcpu][3], path,
              static_cast<int>(prot & 0xffffffff), MAP_PRIVATE);
  } else if ((num == __NR_clone || num == __NR_fork || num == __NR_vfork) && ret >= 0) {
    ThreadState* t = self;
    if (ret == 0) {
      // fork/vfork/clone without CLONE_THREAD returned in the child process
      // (a new thread never returns through here in QEMU 7.2).
      pid_t parent = g_pid;
      pid_t ptid = t ? t->tid : parent;
      // The control thread stayed in the parent: the driver's requests and
      // --duration are the parent's (and not a program this child execs).
      g_opts.ctl_fd = -1;
      g_ctl_ino = 0;
      g_opts.duration_ms = 0;
      OpenEvents();
      {
        // The child's own capture file; it knows the code its parent
        // captured (its memory is a copy).
        std::lock_guard jit_lock(g_jit_mu);
        g_jit_fd.reset();
      }
      std::lock_guard lock(g_mu);
      for (auto*& s : g_threads) s = nullptr;  // the parent's threads: not ours
      g_finished.clear();
      Report(TaskMessage{.exit = false,
                         .time = now,
                         .pid = U32(g_pid),
                         .ppid = U32(parent),
                         .tid = U32(::gettid()),
                         .ptid = U32(ptid)});
    } else {
      Report(TaskMessage{.exit = false,
                         .time = now,
                         .pid = U32(g_pid),
                         .ppid = U32(g_pid),
                         .tid = static_cast<uint32_t>(ret),
                         .ptid = U32(t ? t->tid : g_pid)});
    }
  }
}

// What every end of the emulation writes last: the note about skipped slow
// calls, each thread's exit (and its full-execution stream), the done line.
void ReportEnd() {
  if (const uint64_t skipped = g_slow_skipped.load(); skipped != 0)
    Report(NoteMessage{std::to_string(skipped) + " slow call(s) of " + g_opts.slow_name +
                       " were not snapshotted: --multi-snapshot takes at most one slow-call "
                       "snapshot per thread every " +
                       base::FormatDuration(std::max<uint64_t>(g_opts.slow_ns, 10'000'000)) +
                       " (virtual time)"});
  std::lock_guard lock(g_mu);
  for (auto* t : g_threads)
    if (t != nullptr) {
      Report(ExitMessage(t));
      FinishFullStream(t);
    }
  Report(DoneMessage{Now()});
}

void OnExit(qemu_plugin_id_t, void*) {
  if (g_detached.load()) return;
  int f = g_flags.exchange(kStopped);
  bool ctrl_c = false;
  if (g_opts.ctl_fd >= 0) {
    char c = 0;
    int fl = ::fcntl(g_opts.ctl_fd, F_GETFL);
    ::fcntl(g_opts.ctl_fd, F_SETFL, fl | O_NONBLOCK);
    ctrl_c = ::read(g_opts.ctl_fd, &c, 1) == 1 && c == 'c';
  }
  DrainEveryThread();
  if (!(f & kStopped)) {
    // A request the guest threads never got to (blocked in a syscall).
    const char* reason = (ctrl_c || (f & kReqCtrlC)) ? "ctrl-c"
                         : (f & kReqDuration)        ? "duration"
                                                     : "exit";
    TakeSnapshot(reason, "", nullptr);
  }
  ReportEnd();
}

// A fatal signal (docs/emulation.md, "A program killed by a signal"). QEMU
// 7.2 runs no plugin callback when the guest dies of a signal: for a signal
// whose guest action is the default one, linux-user/signal.c's
// dump_core_and_abort() sets the host action to SIG_DFL, sends the signal
// to its own process with kill(2) and waits in sigsuspend, so QEMU dies of
// it and the atexit callbacks (OnExit) never run. That kill() is QEMU's
// only call of libc's kill (a guest's kill, tkill and tgkill go through
// safe_syscall), so the plugin puts its own function in the GOT slot of
// qemu-x86_64's `kill` import: it sees the signal on the dying thread,
// before anything is lost, snapshots, and then lets the kill happen.
// Whether kill(getpid(), sig) ends the process: the host action is SIG_DFL
// (QEMU installs its handler for every other signal while it runs) and
// that default is to terminate (signal(7)).
bool KillsSelf(pid_t pid, int sig) {
  if (pid != ::getpid() || sig <= 0) return false;
  switch (sig) {
    case SIGCHLD:
    case SIGURG:
    case SIGWINCH:
    case SIGCONT:
    case SIGSTOP:
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU: return false;
    default: break;
  }
  struct sigaction sa {};
  return ::sigaction(sig, nullptr, &sa) == 0 && sa.sa_handler == SIG_DFL;
}

// The guest dies of `sig` on the calling thread: its stream ends where it
// stopped, and the snapshot (unless recording stopped already) and the end
// are written as at an exit.
void OnFatalSignal(int sig) {
  const int f = g_flags.exchange(kStopped);
  const auto tid = static_cast<pid_t>(::gettid());
  ThreadState* self = nullptr;
  {
    std::lock_guard lock(g_mu);
    for (auto* t : g_threads)
      if (t != nullptr && t->tid == tid) self = t;
  }
  if (self != nullptr && self->enabled && self->prev != nullptr) {
    // A fault (SIGSEGV, SIGILL, SIGFPE, SIGBUS) stops the guest inside the
    // block that began last, and QEMU 7.2's plugin API cannot say at which
    // of its instructions: the stream ends at the block's last one (FUP,
    // TIP.PGD, as at an asynchronous event), so the decode runs the block
    // up to there, in the function that faulted, which a block never
    // leaves but by its last instruction. A signal raised by a syscall
    // (abort's tgkill) found tracing off already.
    self->pt.SetTime(self->clock - 1);
    self->pt.AsyncDisable(self->prev->last_ip);
    self->enabled = false;
  }
  DrainEveryThread();
  if (!(f & kStopped)) TakeSnapshot("fatal-signal", base::SignalName(sig), self);
  ReportEnd();
}

int KillHook(pid_t pid, int sig) {
  if (!g_detached.load() && KillsSelf(pid, sig)) OnFatalSignal(sig);
  return ::kill(pid, sig);  // libc's, as the plugin binds it
}

// Points qemu-x86_64's GOT slot of `kill` at KillHook. Returns false when
// it found none (a QEMU that links libc statically or calls it otherwise):
// a fatal signal then ends the recording without a snapshot, as before.
bool HookQemuKill() {
  struct Found {
    uint64_t* slot = nullptr;
  } found;
  ::dl_iterate_phdr(
      [](dl_phdr_info* info, size_t, void* data) -> int {
        // The first object is the executable: qemu-x86_64.
        auto* out = static_cast<Found*>(data);
        const ElfW(Addr) base = info->dlpi_addr;
        const ElfW(Dyn)* dyn = nullptr;
        for (int i = 0; i < info->dlpi_phnum; ++i)
          if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            // NOLINTNEXTLINE(performance-no-int-to-ptr)
            dyn = reinterpret_cast<const ElfW(Dyn)*>(base + info->dlpi_phdr[i].p_vaddr);
        if (dyn == nullptr) return 1;
        // ld.so has relocated these d_ptr values in place (absolute
        // addresses); an unrelocated one is an offset from the base.
        auto at = [base](ElfW(Addr) p) { return p >= base ? p : base + p; };
        ElfW(Addr) symtab = 0, strtab = 0, jmprel = 0, rela = 0;
        size_t jmprel_size = 0, rela_size = 0;
        for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
          switch (d->d_tag) {
            case DT_SYMTAB: symtab = at(d->d_un.d_ptr); break;
            case DT_STRTAB: strtab = at(d->d_un.d_ptr); break;
            case DT_JMPREL: jmprel = at(d->d_un.d_ptr); break;
            case DT_PLTRELSZ: jmprel_size = d->d_un.d_val; break;
            case DT_RELA: rela = at(d->d_un.d_ptr); break;
            case DT_RELASZ: rela_size = d->d_un.d_val; break;
            default: break;
          }
        }
        if (symtab == 0 || strtab == 0) return 1;
        for (auto [table, size] : {std::pair{jmprel, jmprel_size}, {rela, rela_size}}) {
          if (table == 0) continue;
          // NOLINTNEXTLINE(performance-no-int-to-ptr)
          const auto* r = reinterpret_cast<const ElfW(Rela)*>(table);
          for (size_t n = size / sizeof(ElfW(Rela)), i = 0; i < n; ++i) {
            const auto type = ELF64_R_TYPE(r[i].r_info);
            if (type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) continue;
            // NOLINTNEXTLINE(performance-no-int-to-ptr)
            const auto* sym = reinterpret_cast<const ElfW(Sym)*>(symtab) + ELF64_R_SYM(r[i].r_info);
            // NOLINTNEXTLINE(performance-no-int-to-ptr)
            if (std::strcmp(reinterpret_cast<const char*>(strtab) + sym->st_name, "kill") != 0)
              continue;
            // NOLINTNEXTLINE(performance-no-int-to-ptr)
            out->slot = reinterpret_cast<uint64_t*>(base + r[i].r_offset);
            return 1;
          }
        }
        return 1;
      },
      &found);
  if (found.slot == nullptr) return false;
  // The GOT is read-only after relocation (RELRO, as Debian builds QEMU).
  const long page = ::sysconf(_SC_PAGESIZE);
  // NOLINTNEXTLINE(performance-no-int-to-ptr): the page of a pointer, for mprotect
  auto* first = reinterpret_cast<void*>(reinterpret_cast<uintptr_t>(found.slot) &
                                        ~static_cast<uintptr_t>(page - 1));
  // Left writable: without BIND_NOW, lazy binding still writes its page.
  if (::mprotect(first, static_cast<size_t>(page), PROT_READ | PROT_WRITE) != 0) return false;
  *found.slot = reinterpret_cast<uint64_t>(&KillHook);
  return true;
}

// This image was started by a followed execve (plugin argument exec=FILE):
// the recording goes on from the state the plugin in the old image handed
// over. The calling thread's stream is adopted by this image's first
// thread (StartThread); the others ended at the exec.
void AdoptCarry(const std::string& path) {
  auto text = base::ReadFile(path, size_t{1} << 34);
  ::unlink(path.c_str());
  Result<ExecCarry> parsed =
      text ? ParseExecCarry(*text) : Result<ExecCarry>(std::move(text).error());
  if (!parsed) {
    Report(NoteMessage{"execve: the state before the exec was lost (" + parsed.error().ToString() +
                       "): the trace starts at the new program"});
    return;
  }
  ExecCarry& c = *parsed;
  g_seq.store(c.next_seq);
  // The new program starts one tick after the execve retired: the exec's
  // records (COMM, the new image's MMAP2s) come strictly after the last
  // block of the old program, as the kernel's do on hardware, so a decoder
  // switching address spaces at the latest timing packet it has read
  // (the old stream's last CYC, at the execve's time) still decodes that
  // block in the old space.
  const uint64_t start = c.clock + 1;
  g_clock.store(start);
  g_clone_clock.store(start);
  g_start_time = start;
  g_slow_skipped.store(c.slow_skipped);
  g_main = c.main;
  g_opts.duration_ms = c.duration_left_ms;
  // The control pipe is the driver's only if its fd still is (the program
  // may have closed it and opened something else there).
  if (g_opts.ctl_fd >= 0 && (c.ctl_ino == 0 || c.ctl_ino != g_ctl_ino)) g_opts.ctl_fd = -1;
  if (c.jit_fd >= 0) {
    SetCloexec(c.jit_fd, true);
    g_jit_fd.reset(c.jit_fd);
  }
  for (CarriedThread& t : c.threads) {
    if (t.self) {
      SetCloexec(t.fd, true);
      g_adopt = std::move(t);
      continue;
    }
    // The kernel killed the other threads at the exec.
    auto* ts = new ThreadState(PtStreamOptions{});
    ts->pid = t.pid;
    ts->tid = t.tid;
    ts->clock = std::max(t.clock, c.clock);
    ts->insns = t.insns;
    ts->hash = t.hash;
    ts->wrapped = t.wrapped;
    ts->file = t.file;
    for (std::vector<uint8_t>& chunk : t.ring) {
      ts->ring_bytes += chunk.size();
      ts->ring.push_back(std::move(chunk));
    }
    if (!t.exited) Report(ExitMessage(ts));
    if (g_opts.full) {
      if (!ts->file.empty()) FullStreamLine(ts);
      delete ts;
    } else {
      g_finished.push_back(ts);
    }
  }
}

void ControlThread() {
  // --duration counts from when the guest starts running (its first
  // translated block), not from QEMU's own start-up.
  std::chrono::steady_clock::time_point start;
  bool started = false;
  for (;;) {
    int timeout = -1;
    if (g_opts.duration_ms > 0) {
      if (!started && g_images_done.load()) {
        start = std::chrono::steady_clock::now();
        started = true;
        g_duration_start_ns.store(SteadyNs());
      }
      if (!started) {
        timeout = 2;  // look again soon
      } else {
        auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(
                           std::chrono::steady_clock::now() - start)
                           .count();
        timeout = elapsed >= static_cast<int64_t>(g_opts.duration_ms)
                      ? 0
                      : static_cast<int>(g_opts.duration_ms - elapsed);
      }
    }
    pollfd p{g_opts.ctl_fd, POLLIN, 0};
    int r = ::poll(&p, g_opts.ctl_fd >= 0 ? 1 : 0, timeout);
    if (r == 0) {
      if (!started) continue;
      g_flags.fetch_or(kReqDuration);
      g_opts.duration_ms = 0;
      if (g_opts.ctl_fd < 0) return;
      continue;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return;
    }
    char c = 0;
    const ssize_t n = ::read(g_opts.ctl_fd, &c, 1);
    if (n == 0) {
      // End of file: the driver went away (a detach; had it died, QEMU
      // would have died with it) unless the program put another file at
      // the pipe's fd.
      struct stat st {};
      if (::fstat(g_opts.ctl_fd, &st) == 0 && st.st_ino == g_ctl_ino) Detach();
      return;
    }
    if (n != 1) return;  // the program closed the fd
    if (c == 'c') g_flags.fetch_or(kReqCtrlC);
    if (c == 's') g_flags.fetch_or(kReqSnapshot);
    if (c == 'd') {  // --after=detach: the driver leaves the program running
      Detach();
      return;
    }
  }
}

// A plugin argument's number (decimal, or hex with 0x).
bool ParseU64(std::string_view s, uint64_t* v) {
  auto n = base::ParseUint(s, 0);
  if (n) *v = *n;
  return n.has_value();
}

}  // namespace
}  // namespace ptsnap::emulate

using namespace ptsnap::emulate;

int qemu_plugin_install(qemu_plugin_id_t id, const qemu_info_t* info, int argc, char** argv) {
  if (info->version.cur != PTSNAP_QEMU_PLUGIN_API_VERSION || info->system_emulation ||
      std::strcmp(info->target_name, "x86_64") != 0) {
    std::fprintf(stderr,
                 "ptsnap: unsupported QEMU (plugin API version %d, target %s): --emulate needs "
                 "qemu-x86_64 user mode with plugin API version %d (QEMU 7.x, Debian 12's "
                 "qemu-user)\n",
                 info->version.cur, info->target_name, PTSNAP_QEMU_PLUGIN_API_VERSION);
    return -1;
  }
  std::string carry_path;
  for (int i = 0; i < argc; ++i) {
    std::string_view a = argv[i];
    size_t eq = a.find('=');
    std::string_view k = a.substr(0, eq), v = eq == a.npos ? "" : a.substr(eq + 1);
    uint64_t n = 0;
    bool ok = true;
    if (k != "exec") g_plugin_args.emplace_back(a);
    if (k == "exec") {
      carry_path = std::string(v);
    } else if (k == "out") {
      g_opts.out = std::string(v);
    } else if (k == "mode") {
      g_opts.full = v == "full";
    } else if (k == "size") {
      ok = ParseU64(v, &g_opts.size);
    } else if (k == "psb") {
      ok = ParseU64(v, &n) && n >= 256 && n <= (1 << 20);
      g_opts.psb_period = n;
    } else if (k == "retcomp") {
      g_opts.retcomp = v != "0";
    } else if (k == "mtc") {
      g_opts.mtc = v == "1";
    } else if (k == "mtc_freq") {
      ok = ParseU64(v, &g_opts.mtc_freq) && g_opts.mtc_freq <= 15;
    } else if (k == "cyc") {
      g_opts.cyc = v == "1";
    } else if (k == "cyc_thresh") {
      ok = ParseU64(v, &g_opts.cyc_thresh) && g_opts.cyc_thresh <= 15;
    } else if (k == "multi") {
      g_opts.multi = v == "1";
    } else if (k == "whole") {
      g_opts.whole_rings = v == "1";
    } else if (k == "null") {
      // Benchmark baseline: callbacks registered, but they return at once.
      if (v == "1") g_flags.store(kStopped);
    } else if (k == "hash") {
      g_opts.hash = v == "1";
    } else if (k == "jit") {
      g_opts.jit = v != "0";
    } else if (k == "duration_ms") {
      ok = ParseU64(v, &g_opts.duration_ms);
    } else if (k == "ctl") {
      ok = ParseU64(v, &n);
      g_opts.ctl_fd = static_cast<int>(n);
    } else if (k == "trigger") {
      ok = ParseU64(v, &n);
      g_opts.trigger.push_back(n);
    } else if (k == "trigger_name") {
      g_opts.trigger_name = std::string(v);
    } else if (k == "slow") {
      ok = ParseU64(v, &g_opts.slow);
    } else if (k == "slow_ns") {
      ok = ParseU64(v, &g_opts.slow_ns);
    } else if (k == "slow_name") {
      g_opts.slow_name = std::string(v);
    } else if (k == "filter") {
      auto f = ParseFilterArg(v);
      ok = f.has_value();
      if (f) {
        g_opts.filtering = g_opts.filtering || !f->trace_stop;
        g_opts.filters.push_back(std::move(*f));
      }
    } else if (k == "only_in") {
      ok = ParseU64(v, &g_opts.only_in) && g_opts.only_in != 0;
    } else if (k == "waits") {
      g_opts.waits = v == "1";
    } else if (k == "stop") {
      ok = ParseU64(v, &n);
      g_opts.stop.push_back(n);
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "ptsnap: bad plugin argument '%s'\n", argv[i]);
      return -1;
    }
  }
  if (g_opts.out.empty()) {
    std::fprintf(stderr, "ptsnap: the plugin needs out=DIR\n");
    return -1;
  }
  g_id = id;
  Dl_info self{};
  if (::dladdr(reinterpret_cast<void*>(&qemu_plugin_install), &self) != 0 &&
      self.dli_fname != nullptr)
    g_plugin_path = self.dli_fname;
  if (g_opts.ctl_fd >= 0) {
    struct stat st {};
    if (::fstat(g_opts.ctl_fd, &st) == 0) g_ctl_ino = st.st_ino;
  }
  OpenEvents();
  if (!carry_path.empty()) AdoptCarry(carry_path);
  qemu_plugin_register_vcpu_tb_trans_cb(id, OnTbTrans);
  qemu_plugin_register_vcpu_syscall_cb(id, OnSyscall);
  qemu_plugin_register_vcpu_syscall_ret_cb(id, OnSyscallRet);
  qemu_plugin_register_atexit_cb(id, OnExit, nullptr);
  if (!HookQemuKill())
    std::fprintf(stderr,
                 "ptsnap: warning: qemu-x86_64 has no `kill` import to watch: a program killed by "
                 "a signal ends the recording without a snapshot\n");
  if (g_opts.ctl_fd >= 0 || g_opts.duration_ms > 0) {
    // The control thread must never take a signal. A process-directed
    // signal (the guest's SIGALRM from setitimer, a SIGCHLD, a kill from
    // outside) goes to any thread that does not block it; the kernel picks
    // a thread other than the main one when that one is off-CPU with a
    // signal already pending, which a loaded machine makes likely. QEMU's
    // host_signal_handler assumes a vCPU thread (thread_cpu->env_ptr) and
    // dies with SIGSEGV on this one, which has no vCPU. QEMU blocks all
    // signals in its own helper threads (RCU) for the same reason. The new
    // thread inherits the creator's mask, so block everything around the
    // creation: no window in which it could be chosen.
    sigset_t all, old;
    ::sigfillset(&all);
    ::pthread_sigmask(SIG_SETMASK, &all, &old);
    std::thread(ControlThread).detach();
    ::pthread_sigmask(SIG_SETMASK, &old, nullptr);
  }
  return 0;
}
