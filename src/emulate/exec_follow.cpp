#include "emulate/exec_follow.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <utility>

#include "base/string_util.h"
#include "base/unique_fd.h"

namespace ptsnap::emulate {

namespace {

// An ELF header (ELFMAG, ELFCLASS64, ELFDATA2LSB, ET_EXEC or ET_DYN,
// EM_X86_64) in the first bytes of a file.
bool IsElf(std::string_view head) {
  return head.size() >= 4 && head.substr(0, 4) ==
                                 "\x7f"
                                 "ELF";
}
bool IsAmd64Elf(std::string_view head) {
  if (!IsElf(head) || head.size() < 20) return false;
  auto u16 = [&](size_t at) {
    return static_cast<unsigned>(static_cast<uint8_t>(head[at])) |
           static_cast<unsigned>(static_cast<uint8_t>(head[at + 1])) << 8;
  };
  const unsigned type = u16(16), machine = u16(18);
  return head[4] == 2 && head[5] == 1 && (type == 2 || type == 3) && machine == 62;
}

ExecTarget Target(ExecTarget::Kind kind, std::string why) {
  ExecTarget t;
  t.kind = kind;
  t.why = std::move(why);
  return t;
}
ExecTarget Native(std::string why) { return Target(ExecTarget::Kind::kNative, std::move(why)); }
ExecTarget Fails(std::string why) { return Target(ExecTarget::Kind::kFails, std::move(why)); }

}  // namespace

ExecTarget ResolveExec(const std::string& path, std::vector<std::string> argv,
                       const ExecFileReader& read) {
  std::string file = path;
  // fs/exec.c (exec_binprm): each #! rewrite is one more level.
  for (int depth = 0; depth <= kMaxExecRewrites; ++depth) {
    const std::optional<ExecFile> f = read(file);
    if (!f) return Fails(file + " does not exist");                 // ENOENT
    if (!f->executable) return Fails(file + " is not executable");  // EACCES
    if (IsElf(f->head)) {
      if (!IsAmd64Elf(f->head)) return Native(file + " is not an x86-64 program");
      if (f->changes_credentials)
        return Native(file +
                      " is set-user-ID or set-group-ID (under QEMU it would run without "
                      "the credentials it sets)");
      if (!f->readable) return Native(file + " is not readable (QEMU reads what it loads)");
      ExecTarget t;
      t.kind = ExecTarget::Kind::kFollow;
      t.program = file;
      t.argv = std::move(argv);
      return t;
    }
    std::optional<ScriptInterpreter> interp = ParseScriptInterpreter(f->head);
    if (!interp) {
      if (f->head.starts_with("#!")) return Fails(file + "'s #! line names no interpreter");
      return Native(file + " is neither an ELF program nor a #! script");
    }
    // load_script: argv[0] is replaced by [interpreter, arg, the file].
    std::vector<std::string> next{interp->path};
    if (interp->arg) next.push_back(*interp->arg);
    next.push_back(file);
    for (size_t i = 1; i < argv.size(); ++i) next.push_back(std::move(argv[i]));
    argv = std::move(next);
    file = interp->path;
  }
  return Fails(path + " has more than " + std::to_string(kMaxExecRewrites) +
               " levels of #! interpreters");  // ELOOP
}

std::optional<ExecFile> ReadExecFile(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return std::nullopt;
  ExecFile f;
  // The kernel checks execute permission with the effective ids.
  f.executable = S_ISREG(st.st_mode) && ::faccessat(AT_FDCWD, path.c_str(), X_OK, AT_EACCESS) == 0;
  f.changes_credentials = ((st.st_mode & S_ISUID) != 0 && st.st_uid != ::geteuid()) ||
                          ((st.st_mode & S_ISGID) != 0 && st.st_gid != ::getegid());
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  f.readable = static_cast<bool>(fd);
  if (fd) {
    char buf[kExecHeadBytes];
    const ssize_t n = ::pread(fd.get(), buf, sizeof(buf), 0);
    if (n > 0) f.head.assign(buf, static_cast<size_t>(n));
  }
  return f;
}

std::vector<std::string> QemuExecCommand(const std::string& qemu, const std::string& plugin_arg,
                                         const ExecTarget& target) {
  std::vector<std::string> out{
      qemu, "-plugin",     plugin_arg, "-0", target.argv.empty() ? std::string() : target.argv[0],
      "--", target.program};
  for (size_t i = 1; i < target.argv.size(); ++i) out.push_back(target.argv[i]);
  return out;
}

std::string EscapePluginArg(std::string_view value) {
  std::string out;
  for (char c : value) {
    out += c;
    if (c == ',') out += ',';
  }
  return out;
}

// ptsnap-exec-carry 1
// clock C / seq S / jit_fd J / ctl_ino I / duration_left_ms D / slow_skipped K
// main LEN, then LEN bytes and a newline
// per thread: thread PID TID CLOCK INSNS HASH WRAPPED EXITED SELF FD CHUNKS FILELEN,
//   FILELEN bytes and a newline, then CHUNKS times: chunk LEN, LEN bytes, a newline
// end
namespace {

constexpr std::string_view kCarryMagic = "ptsnap-exec-carry 1";

void Bytes(std::string& out, std::string_view line, std::string_view bytes) {
  out += line;
  out += ' ';
  out += std::to_string(bytes.size());
  out += '\n';
  out += bytes;
  out += '\n';
}

// A cursor over the carry's text.
class CarryReader {
 public:
  explicit CarryReader(std::string_view text) : text_(text) {}
  // The next line's fields (split on spaces), or an error at the end.
  Result<std::vector<std::string_view>> Line() {
    const size_t nl = text_.find('\n');
    if (nl == std::string_view::npos) return Error("the exec hand-over file is cut short");
    std::string_view line = text_.substr(0, nl);
    text_.remove_prefix(nl + 1);
    return base::Split(line, ' ');
  }
  Result<std::string_view> Take(uint64_t n) {
    if (text_.size() < n + 1 || text_[n] != '\n')
      return Error("the exec hand-over file is cut short");
    std::string_view b = text_.substr(0, n);
    text_.remove_prefix(n + 1);
    return b;
  }
  // "KEY N": N.
  Result<uint64_t> Num(std::string_view key) {
    PTSNAP_ASSIGN_OR_RETURN(auto f, Line());
    auto n = f.size() == 2 && f[0] == key ? base::ParseUint(f[1]) : std::nullopt;
    if (!n) return Error("the exec hand-over file has no " + std::string(key));
    return *n;
  }
  Result<int> Fd(std::string_view key) {
    PTSNAP_ASSIGN_OR_RETURN(auto f, Line());
    auto n = f.size() == 2 && f[0] == key ? base::ParseInt(f[1]) : std::nullopt;
    if (!n || *n < -1 || *n > INT32_MAX)
      return Error("the exec hand-over file has no " + std::string(key));
    return static_cast<int>(*n);
  }
  // "KEY LEN" and the bytes.
  Result<std::string_view> Blob(std::string_view key) {
    PTSNAP_ASSIGN_OR_RETURN(uint64_t n, Num(key));
    return Take(n);
  }

 private:
  std::string_view text_;
};

}  // namespace

std::string FormatExecCarry(const ExecCarry& c) {
  std::string out(kCarryMagic);
  out += "\nclock " + std::to_string(c.clock) + "\nseq " + std::to_string(c.next_seq) +
         "\njit_fd " + std::to_string(c.jit_fd) + "\nctl_ino " + std::to_string(c.ctl_ino) +
         "\nduration_left_ms " + std::to_string(c.duration_left_ms) + "\nslow_skipped " +
         std::to_string(c.slow_skipped) + "\n";
  Bytes(out, "main", c.main);
  for (const CarriedThread& t : c.threads) {
    out += "thread " + std::to_string(t.pid) + " " + std::to_string(t.tid) + " " +
           std::to_string(t.clock) + " " + std::to_string(t.insns) + " " + std::to_string(t.hash) +
           " " + (t.wrapped ? "1" : "0") + " " + (t.exited ? "1" : "0") + " " +
           (t.self ? "1" : "0") + " " + std::to_string(t.fd) + " " + std::to_string(t.ring.size());
    Bytes(out, "", t.file);
    for (const std::vector<uint8_t>& chunk : t.ring)
      Bytes(out, "chunk", {reinterpret_cast<const char*>(chunk.data()), chunk.size()});
  }
  out += "end\n";
  return out;
}

Result<ExecCarry> ParseExecCarry(std::string_view text) {
  CarryReader in(text);
  ExecCarry c;
  {
    PTSNAP_ASSIGN_OR_RETURN(auto magic, in.Line());
    if (magic.size() != 2 || magic[0] != "ptsnap-exec-carry" || magic[1] != "1")
      return Error("not an exec hand-over file of this plugin version");
  }
  PTSNAP_ASSIGN_OR_RETURN(c.clock, in.Num("clock"));
  PTSNAP_ASSIGN_OR_RETURN(uint64_t seq, in.Num("seq"));
  if (seq == 0 || seq > UINT32_MAX) return Error("the exec hand-over file's seq is out of range");
  c.next_seq = static_cast<uint32_t>(seq);
  PTSNAP_ASSIGN_OR_RETURN(c.jit_fd, in.Fd("jit_fd"));
  PTSNAP_ASSIGN_OR_RETURN(c.ctl_ino, in.Num("ctl_ino"));
  PTSNAP_ASSIGN_OR_RETURN(c.duration_left_ms, in.Num("duration_left_ms"));
  PTSNAP_ASSIGN_OR_RETURN(c.slow_skipped, in.Num("slow_skipped"));
  PTSNAP_ASSIGN_OR_RETURN(std::string_view main, in.Blob("main"));
  c.main = std::string(main);
  for (;;) {
    PTSNAP_ASSIGN_OR_RETURN(auto f, in.Line());
    if (f.size() == 1 && f[0] == "end") return c;
    if (f.size() != 12 || f[0] != "thread")
      return Error("the exec hand-over file has a malformed thread line");
    auto pid = base::ParseInt(f[1]), tid = base::ParseInt(f[2]), fd = base::ParseInt(f[9]);
    auto clock = base::ParseUint(f[3]), insns = base::ParseUint(f[4]), hash = base::ParseUint(f[5]);
    auto chunks = base::ParseUint(f[10]), file_len = base::ParseUint(f[11]);
    auto flag = [](std::string_view s) { return s == "0" || s == "1"; };
    if (!pid || !tid || !fd || !clock || !insns || !hash || !chunks || !file_len || !flag(f[6]) ||
        !flag(f[7]) || !flag(f[8]) || *pid <= 0 || *pid > INT32_MAX || *tid <= 0 ||
        *tid > INT32_MAX || *fd < -1 || *fd > INT32_MAX)
      return Error("the exec hand-over file has a malformed thread line");
    CarriedThread t;
    t.pid = static_cast<int32_t>(*pid);
    t.tid = static_cast<int32_t>(*tid);
    t.clock = *clock;
    t.insns = *insns;
    t.hash = *hash;
    t.wrapped = f[6] == "1";
    t.exited = f[7] == "1";
    t.self = f[8] == "1";
    t.fd = static_cast<int>(*fd);
    PTSNAP_ASSIGN_OR_RETURN(std::string_view file, in.Take(*file_len));
    t.file = std::string(file);
    for (uint64_t i = 0; i < *chunks; ++i) {
      PTSNAP_ASSIGN_OR_RETURN(std::string_view chunk, in.Blob("chunk"));
      t.ring.emplace_back(chunk.begin(), chunk.end());
    }
    c.threads.push_back(std::move(t));
  }
}

}  // namespace ptsnap::emulate
