// ptsnap-stepcount: an independent ground-truth instruction counter for the timing tests.
//
// ptsnap's emulated PT source advances its virtual clock by one tick per retired instruction, so
// a function's duration in ptsnap's output is the number of instructions it retired. This tool
// measures the same numbers without QEMU, libipt or any ptsnap code: it runs PROGRAM natively
// under ptrace, single-steps every instruction of every thread until the program exits, and keeps
// a shadow stack of the functions named with --func (resolved in PROGRAM's ELF .symtab). The
// timing tests compare ptsnap's per-call timestamps against it. Single-stepping costs two context
// switches and a few ptrace calls per instruction (60k to 120k steps/s with tracer and tracee
// pinned to one CPU), so the programs it checks are small.
//
// Usage: ptsnap-stepcount [-v] [-o FILE] [--func NAME]... -- PROGRAM [ARGS...]
//        ptsnap-stepcount [-v] [-o FILE] --all-calls -- PROGRAM [ARGS...]
//   --func NAME  track the function NAME (a .symtab symbol, or a demangled C++ name)
//   --all-calls  track every call instead (below); PROGRAM may be stripped
//   -o FILE      write the output to FILE; PROGRAM's own stdout stays on stdout
//   -v           print the resolved functions and the stepping rate on stderr
//
// Output (stdout, or FILE with -o), written after PROGRAM exits:
//   call NAME DEPTH BEGIN DURATION THREAD   one line per finished frame of a tracked function,
//                                           sorted by THREAD, then by entry (BEGIN)
//   thread THREAD N                         instructions retired by each thread
//   total N                                 instructions retired by all threads
// THREAD is 0 for the main thread and 1, 2, ... for the other threads in order of creation. BEGIN
// is the number of instructions the thread retired before the function's first instruction;
// DURATION is the number it retired from that instruction up to and including the one that left
// the function (its `ret`, the tail-call jump, or the jump with which longjmp or the C++ unwinder
// leaves it). DEPTH is the number of open tracked frames below it on the thread's shadow stack.
// Frames still open when their thread exits are reported on stderr only.
//
// --all-calls: every call instruction of every thread makes a frame, whatever it calls (a symbol,
// a PLT stub, code no symbol names), by the call rule of the shadow stack below, and the frame
// ends by its leaving rule; a jump never makes or ends a frame (a tail call, a jump into a split
// `.cold` part, a jump table: the frame of the last call runs on), so a frame is the whole chain
// from the call to the return that pops its return address. Output, instead of the call lines:
//   frame BEGIN DURATION DEPTH THREAD TARGET SITE   one line per finished frame, sorted by THREAD,
//                                                   then BEGIN
//   open BEGIN DEPTH THREAD TARGET SITE             a frame still open when its thread exited
//                                                   (exit() called below it), same order
// BEGIN, DURATION, DEPTH and THREAD are as above, DEPTH counting every open call frame below it;
// TARGET is the callee's first instruction and SITE the call instruction, in hex. A thread's
// first instruction (_start, or the code after clone) and a signal handler's entry are no calls:
// they make no frame.
//
// Exit status: PROGRAM's
// (128 + signal if it was killed), 125 for usage or ELF errors, 127 when PROGRAM cannot be opened
// or executed.
//
// Counting conventions (chosen to match Intel PT, which retires these once):
// - Counting starts at PROGRAM's first instruction after execve; a new thread's count starts with
//   its first instruction after clone. The exit/exit_group syscall that ends a thread is counted
//   (it retires, but no single-step trap follows it).
// - A rep-prefixed string instruction traps once per iteration: consecutive steps at the same RIP
//   count as one instruction.
// - The trap the kernel reports on entering a signal handler retires nothing and is not counted;
//   a tracked function entered as a handler gets a frame.
//
// Shadow stack: when RIP reaches a tracked function's entry address by a call (RSP dropped by 8
// and the pushed return address follows the previous instruction) a frame {func, BEGIN, RSP} is
// pushed. When it is reached with RSP unchanged (a jump: a tail call), the new frame replaces the
// top frame if that one was entered at the same RSP (the top frame ends at that moment), else it
// is pushed. After every step, every frame whose entry RSP is below the current RSP has lost its
// return address (ret, longjmp, exception unwinding) and is left: it ends with that instruction
// if it was a ret (RIP is now the frame's return address) or another control transfer (RIP is
// not within 15 bytes after the previous instruction), else with the next control transfer
// (longjmp and libgcc's unwinder switch the stack an instruction or two before their jump). This
// way frames end where Intel PT sees control leave them. PROGRAM must be a static non-PIE
// x86-64 executable, so symbol addresses are run-time addresses; it runs with address space
// randomization off, so that its runs are reproducible.
#include <elf.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <sched.h>
#include <signal.h>
#include <sys/personality.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/user.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cxxabi.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cinttypes>
#include <cstdarg>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

namespace {

constexpr int kExitUsage = 125;
constexpr int kExitExec = 127;
constexpr uint64_t kMaxInstructionLength = 15;

void Say(const char* prefix, const char* format, va_list args) {
  std::fprintf(stderr, "ptsnap-stepcount: %s", prefix);
  std::vfprintf(stderr, format, args);
  std::fprintf(stderr, "\n");
}

[[noreturn]] __attribute__((format(printf, 1, 2))) void Die(const char* format, ...) {
  va_list args;
  va_start(args, format);
  Say("", format, args);
  va_end(args);
  std::exit(kExitUsage);
}

__attribute__((format(printf, 1, 2))) void Warn(const char* format, ...) {
  va_list args;
  va_start(args, format);
  Say("warning: ", format, args);
  va_end(args);
}

struct Options {
  std::vector<std::string> funcs;
  bool all_calls = false;
  std::string output;
  bool verbose = false;
  std::vector<char*> argv;  // PROGRAM ARGS..., null-terminated
};

void Usage(FILE* out) {
  std::fprintf(out,
               "usage: ptsnap-stepcount [-v] [-o FILE] [--func NAME]... -- PROGRAM [ARGS...]\n"
               "       ptsnap-stepcount [-v] [-o FILE] --all-calls -- PROGRAM [ARGS...]\n"
               "Single-steps PROGRAM (static, non-PIE) to exit and prints the instructions\n"
               "retired by each call of every --func NAME (or of every call) and in total.\n");
}

Options ParseOptions(int argc, char** argv) {
  Options options;
  int i = 1;
  auto value = [&](const char* flag) -> std::string {
    if (i + 1 >= argc) Die("%s needs an argument", flag);
    return argv[++i];
  };
  for (; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "--") {
      ++i;
      break;
    } else if (arg == "--func") {
      options.funcs.push_back(value("--func"));
    } else if (arg.rfind("--func=", 0) == 0) {
      options.funcs.push_back(arg.substr(7));
    } else if (arg == "--all-calls") {
      options.all_calls = true;
    } else if (arg == "-o" || arg == "--output") {
      options.output = value("--output");
    } else if (arg == "-v" || arg == "--verbose") {
      options.verbose = true;
    } else if (arg == "-h" || arg == "--help") {
      Usage(stdout);
      std::exit(0);
    } else if (!arg.empty() && arg[0] == '-') {
      Usage(stderr);
      Die("unknown option %s", arg.c_str());
    } else {
      break;  // PROGRAM without a leading --
    }
  }
  if (i >= argc) {
    Usage(stderr);
    Die("no PROGRAM given");
  }
  if (options.all_calls && !options.funcs.empty()) Die("--all-calls tracks every call: no --func");
  options.argv.assign(argv + i, argv + argc);
  options.argv.push_back(nullptr);
  return options;
}

struct Func {
  std::string name;
  uint64_t addr = 0;
  uint64_t size = 0;
};

// "catcher(int)" for "_Z7catcheri"; empty if `name` is not a mangled C++ name.
std::string Demangle(const char* name) {
  if (std::strncmp(name, "_Z", 2) != 0) return {};
  int status = 0;
  char* demangled = abi::__cxa_demangle(name, nullptr, nullptr, &status);
  if (demangled == nullptr) return {};
  std::string result = demangled;
  std::free(demangled);
  return result;
}

// Resolves every name (a symbol, or a demangled C++ name such as "ns::f(int)") to its function
// symbol in `path`'s .symtab; dies on any problem.
std::vector<Func> ResolveFuncs(const std::string& path, const std::vector<std::string>& names) {
  if (elf_version(EV_CURRENT) == EV_NONE) Die("libelf: %s", elf_errmsg(-1));
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::fprintf(stderr, "ptsnap-stepcount: cannot open %s: %s\n", path.c_str(),
                 std::strerror(errno));
    std::exit(kExitExec);
  }
  Elf* elf = elf_begin(fd, ELF_C_READ, nullptr);
  if (elf == nullptr || elf_kind(elf) != ELF_K_ELF) Die("%s is not an ELF file", path.c_str());
  GElf_Ehdr ehdr;
  if (gelf_getehdr(elf, &ehdr) == nullptr) Die("%s: %s", path.c_str(), elf_errmsg(-1));
  if (ehdr.e_machine != EM_X86_64) Die("%s is not an x86-64 program", path.c_str());
  if (ehdr.e_type == ET_DYN) {
    Die("%s is position-independent (ET_DYN): symbol addresses are not run-time addresses; "
        "link it with -static -no-pie",
        path.c_str());
  }
  if (ehdr.e_type != ET_EXEC) Die("%s is not an executable", path.c_str());
  size_t phnum = 0;
  if (elf_getphdrnum(elf, &phnum) != 0) Die("%s: %s", path.c_str(), elf_errmsg(-1));
  for (size_t i = 0; i < phnum; ++i) {
    GElf_Phdr phdr;
    if (gelf_getphdr(elf, static_cast<int>(i), &phdr) == nullptr) continue;
    if (phdr.p_type == PT_INTERP || phdr.p_type == PT_DYNAMIC) {
      Die("%s is dynamically linked: code in shared libraries is not resolved; link it with "
          "-static",
          path.c_str());
    }
  }

  // name -> distinct definitions (address, size)
  std::map<std::string, std::map<uint64_t, uint64_t>> found;
  for (const std::string& name : names) found[name];
  bool have_symtab = false;
  for (Elf_Scn* scn = elf_nextscn(elf, nullptr); scn != nullptr; scn = elf_nextscn(elf, scn)) {
    GElf_Shdr shdr;
    if (gelf_getshdr(scn, &shdr) == nullptr || shdr.sh_type != SHT_SYMTAB) continue;
    have_symtab = true;
    Elf_Data* data = elf_getdata(scn, nullptr);
    if (data == nullptr || shdr.sh_entsize == 0) continue;
    size_t count = shdr.sh_size / shdr.sh_entsize;
    for (size_t i = 0; i < count; ++i) {
      GElf_Sym sym;
      if (gelf_getsym(data, static_cast<int>(i), &sym) == nullptr) continue;
      if (GELF_ST_TYPE(sym.st_info) != STT_FUNC || sym.st_shndx == SHN_UNDEF) continue;
      const char* name = elf_strptr(elf, shdr.sh_link, sym.st_name);
      if (name == nullptr) continue;
      auto it = found.find(name);
      if (it == found.end() && name[0] == '_') {
        std::string demangled = Demangle(name);
        if (!demangled.empty()) it = found.find(demangled);
      }
      if (it != found.end()) it->second[sym.st_value] = sym.st_size;
    }
  }
  if (!have_symtab && !names.empty()) Die("%s has no .symtab (stripped?)", path.c_str());

  std::vector<Func> funcs;
  for (const std::string& name : names) {
    const auto& defs = found[name];
    if (defs.empty()) Die("no function symbol %s in %s's .symtab", name.c_str(), path.c_str());
    if (defs.size() > 1) {
      Die("function symbol %s is ambiguous in %s (%zu definitions, e.g. at 0x%" PRIx64
          " and 0x%" PRIx64 ")",
          name.c_str(), path.c_str(), defs.size(), defs.begin()->first, defs.rbegin()->first);
    }
    if (std::any_of(funcs.begin(), funcs.end(), [&](const Func& f) { return f.name == name; })) {
      continue;  // --func given twice
    }
    funcs.push_back({name, defs.begin()->first, defs.begin()->second});
  }
  elf_end(elf);
  close(fd);
  return funcs;
}

// Frame::func of a frame --all-calls made.
constexpr size_t kAnyCall = SIZE_MAX;

struct Frame {
  size_t func;      // index into the tracked functions, or kAnyCall
  size_t depth;     // tracked frames below it
  uint64_t begin;   // thread's instruction count before the function's first instruction
  uint64_t rsp;     // RSP at the first instruction (it points at the return address)
  uint64_t ret;     // the return address
  uint64_t site;    // the call instruction (0: not entered by a call)
  uint64_t target;  // the first instruction
  uint64_t seq;     // global entry order
};

struct Call {
  size_t func;
  size_t depth;
  uint64_t begin;
  uint64_t duration;
  int thread;
  uint64_t seq;
  uint64_t target;  // the callee's first instruction
  uint64_t site;
  bool open;  // still open when its thread exited (--all-calls reports these)
};

struct Thread {
  int index = 0;
  bool started = false;  // counting (after execve for the main thread, after clone for others)
  uint64_t count = 0;    // instructions retired
  uint64_t rip = 0;      // the next instruction to retire
  uint64_t rsp = 0;
  std::vector<Frame> stack;
  // Frames whose return address the stack pointer has passed (longjmp, unwinder) without a
  // control transfer yet; outermost last. They end with the next transfer.
  std::vector<Frame> leaving;
};

class Tracer {
 public:
  Tracer(std::vector<Func> funcs, bool all_calls, bool verbose)
      : funcs_(std::move(funcs)), all_calls_(all_calls), verbose_(verbose) {
    for (size_t i = 0; i < funcs_.size(); ++i) {
      auto [it, inserted] = entries_.emplace(funcs_[i].addr, i);
      if (!inserted) {
        Warn("%s and %s share the address 0x%" PRIx64 "; tracking it as %s",
             funcs_[it->second].name.c_str(), funcs_[i].name.c_str(), funcs_[i].addr,
             funcs_[it->second].name.c_str());
      }
    }
  }

  // Runs the traced child `pid` (stopped by its raise(SIGSTOP)) to exit; returns its exit status.
  int Run(pid_t pid) {
    main_pid_ = pid;
    Lookup(pid);
    long options =
        PTRACE_O_TRACECLONE | PTRACE_O_TRACEEXEC | PTRACE_O_TRACEEXIT | PTRACE_O_EXITKILL;
    if (ptrace(PTRACE_SETOPTIONS, pid, nullptr, reinterpret_cast<void*>(options)) != 0) {
      Die("PTRACE_SETOPTIONS: %s", std::strerror(errno));
    }
    Resume(pid, PTRACE_CONT, 0);
    auto start = std::chrono::steady_clock::now();
    int exit_status = 0;
    for (;;) {
      int status = 0;
      pid_t tid = waitpid(-1, &status, __WALL);
      if (tid < 0) {
        if (errno == EINTR) continue;
        if (errno == ECHILD) break;
        Die("waitpid: %s", std::strerror(errno));
      }
      if (WIFEXITED(status) || WIFSIGNALED(status)) {
        if (tid == pid) {
          exit_status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
          if (!Lookup(pid).started) std::exit(kExitExec);  // execv failed; the child said why
        }
        Exited(tid);
        continue;
      }
      if (WIFSTOPPED(status)) Stopped(tid, status);
    }
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (verbose_) {
      std::fprintf(stderr, "ptsnap-stepcount: %" PRIu64 " steps in %.2f s (%.0f steps/s)\n", steps_,
                   seconds, static_cast<double>(steps_) / seconds);
    }
    return exit_status;
  }

  void Print(FILE* out) {
    std::sort(calls_.begin(), calls_.end(), [](const Call& a, const Call& b) {
      return a.thread != b.thread ? a.thread < b.thread : a.seq < b.seq;
    });
    for (const Call& call : calls_) {
      if (all_calls_) {
        if (call.open) {
          std::fprintf(out, "open %" PRIu64 " %zu %d 0x%" PRIx64 " 0x%" PRIx64 "\n", call.begin,
                       call.depth, call.thread, call.target, call.site);
        } else {
          std::fprintf(out, "frame %" PRIu64 " %" PRIu64 " %zu %d 0x%" PRIx64 " 0x%" PRIx64 "\n",
                       call.begin, call.duration, call.depth, call.thread, call.target, call.site);
        }
        continue;
      }
      std::fprintf(out, "call %s %zu %" PRIu64 " %" PRIu64 " %d\n", funcs_[call.func].name.c_str(),
                   call.depth, call.begin, call.duration, call.thread);
    }
    uint64_t total = 0;
    for (const auto& [index, count] : thread_counts_) {
      std::fprintf(out, "thread %d %" PRIu64 "\n", index, count);
      total += count;
    }
    std::fprintf(out, "total %" PRIu64 "\n", total);
  }

 private:
  Thread& Lookup(pid_t tid) {
    auto it = threads_.find(tid);
    if (it == threads_.end()) {
      it = threads_.emplace(tid, Thread{}).first;
      it->second.index = next_index_++;
    }
    return it->second;
  }

  static void Resume(pid_t tid, enum __ptrace_request request, int sig) {
    if (ptrace(request, tid, nullptr, reinterpret_cast<void*>(static_cast<long>(sig))) != 0 &&
        errno != ESRCH) {  // ESRCH: killed meanwhile (exit_group of another thread)
      Die("ptrace resume of %d: %s", tid, std::strerror(errno));
    }
  }

  static bool GetRegs(pid_t tid, user_regs_struct* regs) {
    return ptrace(PTRACE_GETREGS, tid, nullptr, regs) == 0;
  }

  void Stopped(pid_t tid, int status) {
    Thread& thread = Lookup(tid);
    int sig = WSTOPSIG(status);
    int event = status >> 16;
    if (event != 0) {
      Event(tid, thread, event);
      return;
    }
    if (!thread.started) {
      if (tid != main_pid_ && sig == SIGSTOP) {  // a new thread's first stop
        Start(tid, thread);
        Resume(tid, PTRACE_SINGLESTEP, 0);
      } else {
        Resume(tid, tid == main_pid_ ? PTRACE_CONT : PTRACE_SINGLESTEP, sig);
      }
      return;
    }
    if (sig == SIGTRAP) {
      siginfo_t info;
      if (ptrace(PTRACE_GETSIGINFO, tid, nullptr, &info) == 0) {
        if (info.si_code == TRAP_TRACE || info.si_code == TRAP_BRKPT) {  // BRKPT: after syscall
          Step(tid, thread);
          Resume(tid, PTRACE_SINGLESTEP, 0);
          return;
        }
        if (info.si_code == SIGTRAP) {  // ptrace_notify on entering a signal handler
          EnterHandler(tid, thread);
          Resume(tid, PTRACE_SINGLESTEP, 0);
          return;
        }
      }
    }
    // A signal for the program: deliver it. The kernel reports the handler's entry as a trap.
    Resume(tid, PTRACE_SINGLESTEP, sig);
  }

  void Event(pid_t tid, Thread& thread, int event) {
    switch (event) {
      case PTRACE_EVENT_EXEC:
        if (tid == main_pid_ && !thread.started) {
          Start(tid, thread);
        } else {
          Warn("thread %d ran execve again; its frames and symbols no longer match", thread.index);
        }
        break;
      case PTRACE_EVENT_CLONE: {
        unsigned long new_tid = 0;
        if (ptrace(PTRACE_GETEVENTMSG, tid, nullptr, &new_tid) == 0) {
          Lookup(static_cast<pid_t>(new_tid));  // numbered in order of creation
        }
        break;
      }
      case PTRACE_EVENT_EXIT: {
        // The exit or exit_group syscall retired; the trap after it never comes.
        user_regs_struct regs;
        if (thread.started && GetRegs(tid, &regs) &&
            (regs.orig_rax == SYS_exit || regs.orig_rax == SYS_exit_group)) {
          ++thread.count;
        }
        Resume(tid, PTRACE_CONT, 0);
        return;
      }
      default: break;
    }
    Resume(tid, thread.started ? PTRACE_SINGLESTEP : PTRACE_CONT, 0);
  }

  void Start(pid_t tid, Thread& thread) {
    user_regs_struct regs;
    if (!GetRegs(tid, &regs)) Die("PTRACE_GETREGS of %d: %s", tid, std::strerror(errno));
    thread.started = true;
    thread.rip = regs.rip;
    thread.rsp = regs.rsp;
    auto it = entries_.find(thread.rip);
    uint64_t ret = 0;
    if (it != entries_.end() && Peek(tid, thread.rsp, &ret)) Push(thread, it->second, ret, 0);
  }

  // The trap after the instruction at thread.rip retired (or after one rep iteration of it).
  void Step(pid_t tid, Thread& thread) {
    ++steps_;
    user_regs_struct regs;
    if (!GetRegs(tid, &regs)) Die("PTRACE_GETREGS of %d: %s", tid, std::strerror(errno));
    if (regs.rip == thread.rip) return;  // another iteration of a rep instruction
    ++thread.count;
    uint64_t prev_rip = thread.rip;
    uint64_t prev_rsp = thread.rsp;
    thread.rip = regs.rip;
    thread.rsp = regs.rsp;

    // Frames whose return address is gone: a ret, or the stack switch of longjmp or of the C++
    // unwinder. Those end with the control transfer that leaves them: the ret itself, or the
    // jump after the stack switch (`mov %r8,%rsp; ...; jmp *%rdx` in longjmp,
    // `mov %rcx,%rsp; pop %rcx; jmp *%rcx` in libgcc's _Unwind_RaiseException).
    while (!thread.stack.empty() && thread.stack.back().rsp < thread.rsp) {
      thread.leaving.push_back(thread.stack.back());
      thread.stack.pop_back();
    }
    bool sequential = thread.rip > prev_rip && thread.rip <= prev_rip + kMaxInstructionLength;
    if (!thread.leaving.empty() && (!sequential || thread.rip == thread.leaving.back().ret)) {
      EndLeaving(thread);
    }

    if (all_calls_) {
      // A call: RSP dropped by 8 to a return address just past the previous instruction, and RIP
      // is elsewhere (a push of that address would fall through to it).
      uint64_t ret = 0;
      if (thread.rsp != prev_rsp - 8 || !Peek(tid, thread.rsp, &ret)) return;
      if (ret <= prev_rip || ret > prev_rip + kMaxInstructionLength || ret == thread.rip) return;
      Push(thread, kAnyCall, ret, prev_rip);
      return;
    }
    auto it = entries_.find(thread.rip);
    if (it == entries_.end()) return;
    uint64_t ret = 0;
    if (!Peek(tid, thread.rsp, &ret)) return;
    if (thread.rsp == prev_rsp - 8) {
      if (ret <= prev_rip || ret > prev_rip + kMaxInstructionLength) return;  // not a call
      Push(thread, it->second, ret, prev_rip);
    } else if (thread.rsp == prev_rsp) {
      // A jump (a tail call): it takes the place of a frame entered at the same RSP.
      if (!thread.stack.empty() && thread.stack.back().rsp == thread.rsp) {
        thread.leaving.push_back(thread.stack.back());
        thread.stack.pop_back();
        EndLeaving(thread);
      }
      Push(thread, it->second, ret, 0);
    }
  }

  // After the trap that reports a signal handler's entry: it retired nothing. A tracked handler
  // gets a frame; its return address is the sigreturn trampoline.
  void EnterHandler(pid_t tid, Thread& thread) {
    user_regs_struct regs;
    if (!GetRegs(tid, &regs)) return;
    thread.rip = regs.rip;
    thread.rsp = regs.rsp;
    auto it = entries_.find(thread.rip);
    uint64_t ret = 0;
    if (it != entries_.end() && Peek(tid, thread.rsp, &ret)) Push(thread, it->second, ret, 0);
  }

  static bool Peek(pid_t tid, uint64_t addr, uint64_t* value) {
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, tid, addr, nullptr);
    if (errno != 0) return false;
    *value = static_cast<uint64_t>(word);
    return true;
  }

  void Push(Thread& thread, size_t func, uint64_t ret, uint64_t site) {
    thread.stack.push_back(
        {func, thread.stack.size(), thread.count, thread.rsp, ret, site, thread.rip, next_seq_++});
  }

  // The instruction just retired left the frames in thread.leaving.
  void EndLeaving(Thread& thread) {
    for (const Frame& frame : thread.leaving) {
      calls_.push_back({frame.func, frame.depth, frame.begin, thread.count - frame.begin,
                        thread.index, frame.seq, frame.target, frame.site, false});
    }
    thread.leaving.clear();
  }

  void Exited(pid_t tid) {
    auto it = threads_.find(tid);
    if (it == threads_.end()) return;
    Thread& thread = it->second;
    thread.stack.insert(thread.stack.end(), thread.leaving.rbegin(), thread.leaving.rend());
    for (const Frame& frame : thread.stack) {
      if (frame.func == kAnyCall) {
        calls_.push_back({frame.func, frame.depth, frame.begin, 0, thread.index, frame.seq,
                          frame.target, frame.site, true});
        continue;
      }
      Warn("thread %d exited inside %s (depth %zu, begin %" PRIu64 "): no call line for it",
           thread.index, funcs_[frame.func].name.c_str(), frame.depth, frame.begin);
    }
    thread_counts_[thread.index] += thread.count;
    threads_.erase(it);  // the kernel may reuse the tid for a later thread
  }

  std::vector<Func> funcs_;
  bool all_calls_;
  bool verbose_;
  std::unordered_map<uint64_t, size_t> entries_;  // entry address -> func index
  std::unordered_map<pid_t, Thread> threads_;
  std::map<int, uint64_t> thread_counts_;  // thread index -> instructions, for exited threads
  std::vector<Call> calls_;
  pid_t main_pid_ = 0;
  int next_index_ = 0;
  uint64_t next_seq_ = 0;
  uint64_t steps_ = 0;
};

// Tracer and tracee take turns on every step; on one CPU the switch between them is cheapest.
void PinToOneCpu() {
  int cpu = sched_getcpu();
  if (cpu < 0) return;
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  if (sched_setaffinity(0, sizeof(set), &set) != 0) {
    Warn("cannot pin to CPU %d: %s", cpu, std::strerror(errno));
  }
}

}  // namespace

int main(int argc, char** argv) {
  Options options = ParseOptions(argc, argv);
  std::vector<Func> funcs = ResolveFuncs(options.argv[0], options.funcs);
  if (options.verbose) {
    for (const Func& func : funcs) {
      std::fprintf(stderr, "ptsnap-stepcount: %s at 0x%" PRIx64 ", %" PRIu64 " bytes\n",
                   func.name.c_str(), func.addr, func.size);
    }
  }
  FILE* out = stdout;
  if (!options.output.empty()) {
    out = std::fopen(options.output.c_str(), "w");
    if (out == nullptr) Die("cannot write %s: %s", options.output.c_str(), std::strerror(errno));
  }
  Tracer tracer(std::move(funcs), options.all_calls, options.verbose);

  PinToOneCpu();
  std::fflush(nullptr);
  pid_t pid = fork();
  if (pid < 0) Die("fork: %s", std::strerror(errno));
  if (pid == 0) {
    if (ptrace(PTRACE_TRACEME, 0, nullptr, nullptr) != 0) _exit(kExitExec);
    personality(ADDR_NO_RANDOMIZE);
    raise(SIGSTOP);
    execv(options.argv[0], options.argv.data());
    std::fprintf(stderr, "ptsnap-stepcount: cannot execute %s: %s\n", options.argv[0],
                 std::strerror(errno));
    _exit(kExitExec);
  }
  int status = 0;
  if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
    Die("the child did not stop before execve");
  }
  int exit_status = tracer.Run(pid);
  tracer.Print(out);
  if (out != stdout && std::fclose(out) != 0) Die("cannot write %s", options.output.c_str());
  return exit_status;
}
