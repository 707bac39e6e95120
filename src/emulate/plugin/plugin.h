#pragma once
// The plugin's state (private to src/emulate/plugin/): one `Plugin` object
// holds all of it, with one `Vcpu` per vCPU and one `ThreadState` per guest
// thread; each job's member functions live in the file plugin.cpp's header
// comment names. QEMU's C callbacks (plugin.cpp)
// are trampolines into the one instance, `g_plugin`.
//
// Threads: QEMU calls the vCPU callbacks (OnTbExec, OnSyscall, ...) on the
// guest thread of that vCPU; a vCPU's `Vcpu` is touched by its own thread
// only, except `thread`, which snapshots read under `mu_`. The control
// thread (ControlThread) only sets `flags_`, detaches, and clears
// opts_.duration_ms once it fired.

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/unique_fd.h"
#include "elf/segments.h"
#include "emulate/exec_follow.h"
#include "emulate/exit_class.h"
#include "emulate/jit_shadow.h"
#include "emulate/plugin/qemu_plugin_api.h"
#include "emulate/plugin_protocol.h"
#include "emulate/pt_stream.h"
#include "emulate/syscall_wait.h"

namespace ptsnap::emulate {

constexpr unsigned kMaxVcpus = 4096;
// TbInfo::flags. kFlagTrigger, kFlagStop: the block is a trigger's or a
// stop indicator's entry; kFlagSlow: --slower-than's function entry.
constexpr uint8_t kFlagTrigger = 1, kFlagStop = 2, kFlagSlow = 4;
// --filter: the block starts inside a `filter` range / a `tracestop` range.
constexpr uint8_t kFlagInFilter = 8, kFlagTraceStop = 16;
// --only-in: the block is the function's entry.
constexpr uint8_t kFlagOnlyIn = 32;

// Plugin::flags_: kStopped | pending requests. kReqSnapshot: the driver
// asked for a snapshot ('s' on the control pipe: SIGUSR2,
// Recording::Snapshot); tracing goes on after it.
constexpr int kStopped = 1, kReqCtrlC = 2, kReqDuration = 4, kReqSnapshot = 8;

// A block of code from memory no file backs whose bytes differ from what
// was captured there so far: captured when it first runs.
struct JitPending {
  std::vector<uint8_t> code;
  std::atomic<bool> done{false};
};

// A translated block, as its exec callback sees it (made at translation,
// lives as long as QEMU may run the block).
struct TbInfo {
  uint64_t start = 0, last_ip = 0, fallthrough = 0, target = 0;
  JitPending* jit = nullptr;  // null: code from a file (or nothing to capture)
  uint32_t ninsn = 0;
  ExitKind kind = ExitKind::kNone;
  bool pushes = false;
  uint8_t flags = 0;
  std::vector<uint64_t> ips;  // hash mode only
};

// The plugin's arguments (options.cpp, ParseOptions).
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
  bool null = false;  // null=1: callbacks registered, but they return at once (benchmark baseline)
  uint64_t duration_ms = 0;
  int ctl_fd = -1;
  std::vector<uint64_t> trigger, stop;  // link-time addresses in the main binary
  // Triggers in shared libraries (lib_trigger=OFFSET:PATH): file offsets,
  // armed wherever PATH is mapped executable, as a uprobe on a file is.
  std::vector<FileOffset> lib_trigger;
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
  // A followed execve's hand-over file (exec=FILE; "" when none) and every
  // other argument as QEMU passed it, for the qemu-x86_64 an exec starts.
  std::string carry_path;
  std::vector<std::string> args;
};

// Parses the plugin's key=value arguments. Returns the first bad one's
// message ("bad plugin argument 'psb=1'") on failure.
Result<Options> ParseOptions(int argc, const char* const* argv);

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

// One guest thread: its encoder, virtual clock and ring (or full-mode file).
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

// Per vCPU (one guest thread each in user mode): the thread it runs and
// what its syscall callbacks carry from entry to return. Cache-line aligned:
// each is written by its own vCPU's thread.
struct alignas(64) Vcpu {
  ThreadState* thread = nullptr;   // null until its first block (StartThread)
  uint64_t waiting_on[2] = {};     // futex words it waits on (0: none)
  uint64_t pending_ctid = 0;       // clone's child_tid with CLONE_CHILD_CLEARTID
  uint64_t pending_mmap[4] = {};   // prot, fd, len, offset of an mmap in flight; prot 0 = none
  uint64_t pending_unmap[2] = {};  // addr, len of a munmap or MAP_FIXED anonymous mmap
  SyscallWall syscall_wall;        // --emulate-waits: the syscall it is in
};

// --filter ranges at their run-time addresses, [lo, hi) (filters.cpp).
struct RuntimeRange {
  uint64_t lo = 0, hi = 0;
  bool trace_stop = false;
};

[[noreturn]] void Die(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
// A pid or tid as the protocol (and perf) carries it.
inline uint32_t U32(pid_t id) { return static_cast<uint32_t>(id); }
uint64_t MonotonicNs();  // CLOCK_MONOTONIC
int64_t SteadyNs();      // std::chrono::steady_clock
// Thread `t` ended (PERF_RECORD_EXIT: pid, ppid, tid, ptid as the kernel
// fills them for a thread).
TaskMessage ExitMessage(const ThreadState* t);
// Points qemu-x86_64's GOT slot of `kill` at the plugin's hook (control.cpp),
// which sees a fatal signal before QEMU dies of it. False when it found none.
bool HookQemuKill();

class Plugin {
 public:
  // --- plugin.cpp: set-up (qemu_plugin_install) ---
  // Takes the parsed arguments, opens the event log and adopts a followed
  // exec's state. Before any callback is registered.
  void Install(qemu_plugin_id_t id, Options opts, std::string plugin_path);
  const Options& opts() const { return opts_; }

  // --- tb_exec.cpp: the hot path, one call per executed block ---
  void OnTbExec(unsigned vcpu, const TbInfo* tb);
  // --- translate.cpp ---
  void OnTbTrans(qemu_plugin_tb* tb);
  // --- syscalls.cpp ---
  void OnSyscall(unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
                 uint64_t a5, uint64_t a6);
  void OnSyscallRet(unsigned vcpu, int64_t num, int64_t ret);
  // --- control.cpp: the control pipe, the end, fatal signals ---
  void OnExit();
  void ControlThread();
  void OnFatalSignal(int sig);
  bool detached() const { return detached_.load(); }

 private:
  // control.cpp
  void Detach();
  void ResetIfDetached();
  void HandleRequests(ThreadState* self, int flags);
  void ReportEnd();

  // clock.cpp: the virtual clock and futex causality.
  uint64_t Now() const { return clock_.load(std::memory_order_relaxed); }
  void Publish(const ThreadState* t);
  void FutexWoken(uint64_t addr, uint64_t clock);
  uint64_t ClearChildTid(pid_t tid);
  void FutexCatch(ThreadState* t, uint64_t addr);

  // sideband.cpp: the event log and the work directory.
  void Report(const PluginMessage& m);
  bool DriverGone(int err);
  base::UniqueFd OpenWorkFile(const std::string& path, int flags);
  void OpenEvents();
  void EmitMmap2(uint64_t time, uint64_t addr, uint64_t len, uint64_t pgoff, const char* path,
                 int prot, int flags);
  void EmitElfMappings(const std::string& path, const elf::LoadLayout& img, uint64_t bias);
  void DescribeImages();

  // threads.cpp
  ThreadState* StartThread(unsigned vcpu);
  void EndThread(unsigned vcpu);

  // streams.cpp: rings, stream files, snapshots.
  void Drain(ThreadState* t);
  void DrainEveryThread();
  std::string StreamFile(pid_t tid, uint32_t seq) const;
  void WriteRing(ThreadState* t, uint32_t seq);
  void TakeSnapshot(const char* reason, const std::string& detail, ThreadState* self,
                    const SlowCallEntry* slow = nullptr);
  void FullStreamLine(ThreadState* t);
  void FinishFullStream(ThreadState* t);

  // jit.cpp: JIT code capture.
  void AddFileCode(uint64_t lo, uint64_t hi);
  void RemoveFileCode(uint64_t lo, uint64_t hi);
  bool InFileCode(uint64_t addr);
  JitPending* PendingJit(qemu_plugin_tb* tb, const TbInfo& info);
  bool CaptureJit(const ThreadState* t, const TbInfo* tb, uint64_t now);

  // filters.cpp: --filter.
  void MapFilterRanges(uint64_t addr, uint64_t len, uint64_t pgoff, const char* path);
  void MapLibTriggers(uint64_t addr, uint64_t len, uint64_t pgoff, const char* path);
  uint8_t FilterFlags(uint64_t ip);
  static void LeaveFilter(ThreadState* t, const TbInfo* p, const TbInfo* tb);

  // shadow_stack.cpp: --slower-than and --only-in.
  static void ShadowStep(ThreadState* t, const TbInfo* tb);
  std::optional<SlowCallEntry> SlowCallStep(ThreadState* t, const TbInfo* tb);
  static bool OnlyInStep(ThreadState* t, const TbInfo* tb);
  std::string SlowCallDetail(const ThreadState* t, const SlowCallEntry& e) const;

  // tb_exec.cpp: OnTbExec's snapshot points (off the common path).
  bool SlowCallSnapshot(ThreadState* t, const TbInfo* tb);
  bool TriggerSnapshot(ThreadState* t, const TbInfo* tb);

  // exec.cpp: following execve.
  std::string CarryPath() const;
  CarriedThread Carried(ThreadState* t, bool self, bool exited);
  int FollowExec(ThreadState* self, const ExecTarget& target, const std::vector<std::string>& envp);
  void OnExec(unsigned vcpu, int64_t num, uint64_t a1, uint64_t a2, uint64_t a3, uint64_t a4,
              uint64_t a5);
  void AdoptCarry(const std::string& path);

  Options opts_;
  std::atomic<int> flags_{0};  // kStopped | pending requests
  // --after=detach (docs/recording.md, "When recording ends first"): the
  // driver left the program running and went away ('d' on the control pipe,
  // its end of the pipe closed, or its work directory gone). The plugin
  // writes nothing more, and asks QEMU once, from a vCPU thread, to drop its
  // callbacks (reset_asked_), so the program runs on at QEMU's own speed.
  std::atomic<bool> detached_{false}, reset_asked_{false};
  qemu_plugin_id_t id_ = 0;

  std::mutex mu_;  // thread table, snapshots, events
  Vcpu vcpus_[kMaxVcpus];
  std::vector<ThreadState*> finished_;  // exited, not yet in a snapshot (snapshot mode)
  std::atomic<uint32_t> seq_{1};

  // The latest time any thread has published (at a syscall, a thread start
  // or exit). Single-threaded, every time equals the thread's
  // retired-instruction count (deterministic recordings).
  std::atomic<uint64_t> clock_{0};
  // Futex causality: per futex word, the latest time a thread woke it; per
  // thread, the word the kernel wakes when it exits (clear_child_tid).
  std::mutex futex_mu_;
  std::unordered_map<uint64_t, uint64_t> futex_clock_;
  std::unordered_map<pid_t, uint64_t> clear_tid_;
  std::atomic<uint64_t> clone_clock_{0};  // the creator's time at the last clone/fork

  base::UniqueFd events_;  // events.<pid_>
  pid_t pid_ = 0;
  // A followed execve (docs/emulation.md, "exec"): this plugin's file (its
  // arguments are in opts_.args); the program trigger addresses were
  // resolved in (realpath; "" until the guest is loaded); the guest's start
  // time (0, or the execve's time in the image an exec started); the state
  // of the thread that called execve, for the first thread of this image.
  std::string plugin_path_;
  std::string main_;
  uint64_t start_time_ = 0;
  std::optional<CarriedThread> adopt_;
  uint64_t ctl_ino_ = 0;  // the control pipe's inode
  // --duration: CLOCK_MONOTONIC ns when it started counting (0: not yet).
  std::atomic<int64_t> duration_start_ns_{0};
  // Set at the first translation, once QEMU has loaded the guest: the guest
  // runs from then on (the control thread's --duration counts from it).
  std::atomic<bool> images_done_{false};
  // Run-time addresses of the triggers, stop indicators, --slower-than's
  // and --only-in's functions (DescribeImages).
  std::vector<uint64_t> trigger_rt_, stop_rt_;  // trigger_rt_ under range_mu_ (mmaps add to it)
  uint64_t slow_rt_ = 0;
  uint64_t only_in_rt_ = 0;
  std::atomic<uint64_t> slow_skipped_{0};  // every thread's, for the note at exit

  // JIT code capture (docs/emulation.md, "JIT code"). file_code_: the
  // executable file mappings, [lo, hi): blocks outside them run from
  // anonymous or written memory and have their bytes captured, once per
  // distinct content (shadow_), into jit-code.<pid>.
  std::mutex jit_mu_;
  std::vector<std::pair<uint64_t, uint64_t>> file_code_;
  JitShadow shadow_;
  base::UniqueFd jit_fd_;
  std::atomic<uint64_t> jit_records_{0}, jit_bytes_{0};

  std::mutex range_mu_;
  std::vector<RuntimeRange> ranges_;
};

// QEMU's exec callback (plugin.cpp): a trampoline into g_plugin.OnTbExec.
void OnTbExecCallback(unsigned vcpu, void* udata);

// The one instance (plugin.cpp).
extern Plugin g_plugin;

}  // namespace ptsnap::emulate
