// The protocol between the QEMU plugin and its readers (the driver's
// ParseEvents in events.cpp and ptsnap-emulate-check): the messages the
// plugin appends to events.<pid> in its output directory, one per line.
//
// A line is the message's kind, then its fields in the order its schema
// (the Fields function of each message below) lists them, each after one
// space:
//   mmap2 TIME PID TID ADDR LEN PGOFF MAJ MIN INO PROT FLAGS PATH
//   comm TIME PID TID EXEC NAME
//   fork|exit TIME PID PPID TID PTID
//   itrace TIME PID TID
//   stream SEQ PID TID WRAPPED INSNS HASH FOLLOWS RING FILE
//                                                 (SEQ 0: full-execution stream)
//   slowcall SEQ BEGIN LENGTH                     (precedes snapshot SEQ)
//   snapshot SEQ TIME TID REASON[ DETAIL]
//   note TEXT
//   done TIME
// Numbers are unsigned decimal (EXEC and WRAPPED 0 or 1) and must fit their
// field's type. REASON is one word. The last text field runs to the end of
// the line and may hold spaces; a backslash and a newline in it are written
// "\\" and "\n", so every string round-trips. PATH, NAME, REASON and FILE are
// never empty, and FILE is a plain file name in the output directory (no
// '/'). TIME is the virtual clock (docs/emulation.md, "Time").
//
// FormatMessage is the one writer (the plugin's), ParseMessage and
// ParseMessages the one parser. Both are pure; the parser is fuzzed
// through events_fuzzer.cpp, which also checks that what it accepts
// formats back to the same message.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ptsnap/result.h"

namespace ptsnap::emulate {

// HASH of a stream: FNV-1a over the addresses of the instructions it
// retired, in order, when the plugin runs with hash=1; otherwise the seed.
inline constexpr uint64_t kStreamHashSeed = 0xcbf29ce484222325ull;
inline constexpr uint64_t kStreamHashPrime = 0x100000001b3ull;

// Each message's schema lists its fields for the writer and the parser
// alike: `v.Num(name, field)` for a number, `v.Word(name, field)` for a
// word, `v.Text(name, field, may_be_empty)` for the text that ends the line
// and `v.FileName(name, field)` for a FILE. `Self` is the message, const for
// the writer.

// An executable file mapping (PERF_RECORD_MMAP2).
struct MmapMessage {
  static constexpr std::string_view kKind = "mmap2";
  uint64_t time = 0;
  uint32_t pid = 0, tid = 0;
  uint64_t addr = 0, len = 0, pgoff = 0;
  uint32_t maj = 0, min = 0;
  uint64_t ino = 0;
  uint32_t prot = 0, flags = 0;
  std::string path;
  bool operator==(const MmapMessage&) const = default;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v.Num("time", m.time);
    v.Num("pid", m.pid);
    v.Num("tid", m.tid);
    v.Num("addr", m.addr);
    v.Num("len", m.len);
    v.Num("pgoff", m.pgoff);
    v.Num("maj", m.maj);
    v.Num("min", m.min);
    v.Num("ino", m.ino);
    v.Num("prot", m.prot);
    v.Num("flags", m.flags);
    v.Text("path", m.path, false);
  }
};

// The process's command name (PERF_RECORD_COMM; `exec` as after an execve).
struct CommMessage {
  static constexpr std::string_view kKind = "comm";
  uint64_t time = 0;
  uint32_t pid = 0, tid = 0;
  bool exec = false;
  std::string name;
  bool operator==(const CommMessage&) const = default;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v.Num("time", m.time);
    v.Num("pid", m.pid);
    v.Num("tid", m.tid);
    v.Num("exec", m.exec);
    v.Text("name", m.name, false);
  }
};

// A new thread or process (`fork`) or a thread's end (`exit`), as
// PERF_RECORD_FORK and PERF_RECORD_EXIT.
struct TaskMessage {
  bool exit = false;  // the kind: "exit" or "fork"
  uint64_t time = 0;
  uint32_t pid = 0, ppid = 0, tid = 0, ptid = 0;
  bool operator==(const TaskMessage&) const = default;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v.Num("time", m.time);
    v.Num("pid", m.pid);
    v.Num("ppid", m.ppid);
    v.Num("tid", m.tid);
    v.Num("ptid", m.ptid);
  }
};

// A thread's tracing starts (PERF_RECORD_ITRACE_START).
struct ItraceMessage {
  static constexpr std::string_view kKind = "itrace";
  uint64_t time = 0;
  uint32_t pid = 0, tid = 0;
  bool operator==(const ItraceMessage&) const = default;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v.Num("time", m.time);
    v.Num("pid", m.pid);
    v.Num("tid", m.tid);
  }
};

// A stream file the plugin wrote: one thread's PT of snapshot `seq`, or of
// the whole execution (seq 0, full mode). A later line for the same file
// supersedes an earlier one.
//
// In snapshot mode the file holds the thread's whole ring (`follows` 0), or
// only what the ring gained since that thread's stream of snapshot
// `follows` (the plugin's number; every byte since is still in the ring):
// the snapshot's bytes are then the last `ring` bytes of the files of
// snapshot `follows`'s chain and this one (trace::Stream::follows).
// `ring`: the bytes the ring held at the snapshot (0 in full mode).
struct StreamMessage {
  static constexpr std::string_view kKind = "stream";
  uint32_t seq = 0;
  int32_t pid = 0, tid = 0;
  bool wrapped = false;          // the ring dropped older bytes
  uint64_t insns = 0, hash = 0;  // what the plugin retired (and hashed) in this stream
  uint32_t follows = 0;          // the snapshot whose stream this file continues; 0: none
  uint64_t ring = 0;             // bytes in the ring at the snapshot
  std::string file;
  bool operator==(const StreamMessage&) const = default;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v.Num("seq", m.seq);
    v.Num("pid", m.pid);
    v.Num("tid", m.tid);
    v.Num("wrapped", m.wrapped);
    v.Num("insns", m.insns);
    v.Num("hash", m.hash);
    v.Num("follows", m.follows);
    v.Num("ring", m.ring);
    v.FileName("file", m.file);
  }
};

// A snapshot the plugin took: `reason` is a trace::SnapshotReason's name,
// `detail` the trigger's name or why (may be empty).
struct SnapshotMessage {
  static constexpr std::string_view kKind = "snapshot";
  uint32_t seq = 0;
  uint64_t time = 0;
  uint32_t tid = 0;
  std::string reason, detail;
  bool operator==(const SnapshotMessage&) const = default;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v.Num("seq", m.seq);
    v.Num("time", m.time);
    v.Num("tid", m.tid);
    v.Word("reason", m.reason);
    v.Text("detail", m.detail, true);
  }
};

// The slow call (--slower-than) that snapshot `seq` is taken for: it began
// at virtual time `begin` and ran `length` ticks. Written just before that
// snapshot's line; the snapshot's TIME is when the call returned.
struct SlowCallMessage {
  static constexpr std::string_view kKind = "slowcall";
  uint32_t seq = 0;
  uint64_t begin = 0, length = 0;
  bool operator==(const SlowCallMessage&) const = default;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v.Num("seq", m.seq);
    v.Num("begin", m.begin);
    v.Num("length", m.length);
  }
};

// Something the user should know (the driver logs it as a warning).
struct NoteMessage {
  static constexpr std::string_view kKind = "note";
  std::string text;
  bool operator==(const NoteMessage&) const = default;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v.Text("text", m.text, true);
  }
};

// The plugin's atexit ran (or an execve ended tracing): the log is complete.
struct DoneMessage {
  static constexpr std::string_view kKind = "done";
  uint64_t time = 0;
  bool operator==(const DoneMessage&) const = default;
  template <typename Self, typename V>
  static void Fields(Self& m, V& v) {
    v.Num("time", m.time);
  }
};

using PluginMessage =
    std::variant<MmapMessage, CommMessage, TaskMessage, ItraceMessage, StreamMessage,
                 SlowCallMessage, SnapshotMessage, NoteMessage, DoneMessage>;

// The message as one line, newline included. Total for every message whose
// fields meet the schema above; a word with a space or an empty PATH, NAME
// or FILE would not parse back (the plugin never writes one).
[[nodiscard]] std::string FormatMessage(const PluginMessage& m);

// One line without its newline. The error names the field that is wrong.
[[nodiscard]] Result<PluginMessage> ParseMessage(std::string_view line);

// Every line of `text` (one process's log), in order. A malformed line is
// an error naming its number; a torn last line (no newline: the process
// died writing it) is ignored.
[[nodiscard]] Result<std::vector<PluginMessage>> ParseMessages(std::string_view text);

// The other direction: one --filter range for the plugin, its argument
// `filter=ACTION:OFFSET:SIZE:PATH` (ACTION `filter` or `tracestop`, numbers
// decimal, PATH canonical and last, so it may hold ':'). Offsets are file
// offsets in PATH, as PERF_EVENT_IOC_SET_FILTER takes them; the plugin maps
// them wherever PATH is mapped executable (record/addr_filter.h).
struct FilterRange {
  bool trace_stop = false;  // tracestop: tracing ends when the range is entered
  uint64_t offset = 0, size = 0;
  std::string path;
  bool operator==(const FilterRange&) const = default;
};
// A shared-library trigger for the plugin, `lib_trigger=OFFSET:PATH`: the
// function's file offset in PATH (canonical, last, so it may hold ':').
struct FileOffset {
  uint64_t offset = 0;
  std::string path;
  bool operator==(const FileOffset&) const = default;
};
[[nodiscard]] std::string FormatFileOffsetArg(const FileOffset& f);
// nullopt: malformed or no path.
[[nodiscard]] std::optional<FileOffset> ParseFileOffsetArg(std::string_view value);

// The value after "filter=". FormatFilterArg is the driver's writer,
// ParseFilterArg the plugin's parser (nullopt: malformed, size 0, no path).
[[nodiscard]] std::string FormatFilterArg(const FilterRange& r);
[[nodiscard]] std::optional<FilterRange> ParseFilterArg(std::string_view value);

}  // namespace ptsnap::emulate
