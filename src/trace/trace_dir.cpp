#include "trace/trace_dir.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <functional>
#include <limits>
#include <optional>
#include <system_error>
#include <utility>

#include "base/file_util.h"
#include "base/string_util.h"
#include "trace/jit_code.h"
#include "trace/owned_file.h"

namespace ptsnap::trace {
namespace {

constexpr char kManifestFile[] = "manifest.json";
constexpr char kJournalFile[] = "manifest.journal";
// The journal may grow to manifest.json's size, and to this much while the
// manifest is smaller, before a Flush compacts it. Compactions then write
// at most about twice the journal's bytes: amortised, a Flush costs a
// constant factor of its own line, however many streams came before.
constexpr uint64_t kMinJournalBytes = 64 << 10;
// A manifest.journal is at most as large as manifest.json (see above); this
// bounds what a reader takes in from a hostile one.
constexpr size_t kMaxManifestBytes = size_t{64} << 20;
constexpr char kReserveFile[] = ".reserve";
constexpr char kStreamDir[] = "pt";
constexpr char kSamplesDir[] = "samples";

// "pt/<id>.pt" or "samples/<id>.data".
std::string StreamFile(StreamKind kind, uint32_t id) {
  return kind == StreamKind::kSamples
             ? std::string(kSamplesDir) + "/" + std::to_string(id) + ".data"
             : std::string(kStreamDir) + "/" + std::to_string(id) + ".pt";
}
constexpr char kJitDir[] = "jit";
// The directory may hold kernel memory (kcore) and the traced program's
// data: owner only.
constexpr mode_t kDirMode = 0700;
constexpr mode_t kFileMode = 0600;

std::string_view AsChars(std::span<const std::byte> bytes) {
  return {reinterpret_cast<const char*>(bytes.data()), bytes.size()};
}

std::span<const std::byte> AsBytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

std::string StreamName(const Stream& s) {
  return "stream " + std::to_string(s.id) + " (" + s.file + ")";
}

bool AllZero(std::span<const std::byte> bytes) {
  return std::all_of(bytes.begin(), bytes.end(), [](std::byte b) { return b == std::byte{0}; });
}

std::string PerfMapName(int32_t pid) { return "perf-" + std::to_string(pid) + ".map"; }

// Moves `file` (a regular file someone else wrote for this trace: the
// emulator's) to `to` with the trace's mode and owner; across filesystems
// by copy. Returns its size.
Result<uint64_t> MoveIntoTrace(const std::filesystem::path& file, const std::filesystem::path& to) {
  struct stat st;
  if (::lstat(file.c_str(), &st) != 0) return Error::FromErrno("stat " + file.string());
  if (!S_ISREG(st.st_mode)) return Error(file.string() + " is not a regular file");
  if (::rename(file.c_str(), to.c_str()) != 0) {
    if (errno != EXDEV) return Error::FromErrno("move " + file.string() + " to " + to.string());
    PTSNAP_ASSIGN_OR_RETURN(std::string data,
                            base::ReadFile(file, static_cast<size_t>(st.st_size) + 1));
    PTSNAP_TRY(base::WriteFileAtomic(to, data, kFileMode));
    ::unlink(file.c_str());
  }
  if (::chmod(to.c_str(), kFileMode) != 0) return Error::FromErrno("chmod " + to.string());
  base::GiveToInvoker(to);
  return static_cast<uint64_t>(st.st_size);
}

// Appends all of `data` or nothing: a write cut short (a full disk) is
// truncated away again, so a file never holds more than what was listed
// plus whole appends, and the space it took is free for the manifest.
Result<void> AppendWhole(int fd, std::span<const std::byte> data, const std::string& path) {
  const off_t before = ::lseek(fd, 0, SEEK_END);
  auto written = base::WriteAll(fd, AsChars(data), path);
  if (!written && before >= 0) (void)::ftruncate(fd, before);
  return written;
}

// Reads a file line by line through a window of kChunk bytes (a longer line
// is held whole): a manifest or journal is never read in at once.
class LineReader {
 public:
  LineReader(int fd, std::string what, uint64_t limit)
      : fd_(fd), what_(std::move(what)), left_(limit) {}

  // The next line, without its newline, in `line` (valid until the next
  // call); false at the end. Bytes after the last newline (a torn line) are
  // not returned.
  Result<bool> Next(std::string_view& line) {
    for (;;) {
      const size_t nl = buf_.find('\n', pos_);
      if (nl != std::string::npos) {
        line = std::string_view(buf_).substr(pos_, nl - pos_);
        pos_ = nl + 1;
        return true;
      }
      buf_.erase(0, pos_);
      pos_ = 0;
      if (left_ == 0) return false;
      const size_t want = static_cast<size_t>(std::min<uint64_t>(left_, kChunk));
      const size_t had = buf_.size();
      buf_.resize(had + want);
      ssize_t n = 0;
      do {
        n = ::read(fd_, buf_.data() + had, want);
      } while (n < 0 && errno == EINTR);
      if (n < 0) return Error::FromErrno("read " + what_);
      buf_.resize(had + static_cast<size_t>(n));
      left_ = n == 0 ? 0 : left_ - static_cast<uint64_t>(n);
    }
  }

 private:
  static constexpr size_t kChunk = 64 << 10;
  int fd_;
  std::string what_;
  uint64_t left_;
  std::string buf_;
  size_t pos_ = 0;
};

using ElementFn = std::function<Result<void>(std::string_view)>;

// Calls `fn` with the text of each element of the list `key` ("snapshots"
// or "streams") of the manifest.json `fd`, as it stands in the file ("{" to
// "}", inner lines indented), and returns the file's journal_seq. The file
// is the writer's own, in SerializeManifest's layout (an element's lines are
// indented deeper than its braces; no string holds a raw newline): that
// layout is relied on, and anything else is an error.
Result<uint64_t> ScanManifestList(int fd, const std::string& what, std::string_view key,
                                  const ElementFn& fn) {
  if (::lseek(fd, 0, SEEK_SET) != 0) return Error::FromErrno("seek " + what);
  LineReader lines(fd, what, std::numeric_limits<uint64_t>::max());
  const std::string open = "  \"" + std::string(key) + "\": [";
  constexpr std::string_view kJournalSeq = "  \"journal_seq\": ";
  enum class At { kBefore, kIn, kAfter } at = At::kBefore;
  std::string element;  // the element being read; empty between elements
  std::optional<uint64_t> journal_seq;
  std::string_view line;
  for (;;) {
    PTSNAP_ASSIGN_OR_RETURN(const bool more, lines.Next(line));
    if (!more) break;
    if (at == At::kIn) {
      if (!element.empty()) {
        element += '\n';
        if (line == "    }" || line == "    },") {
          element += "    }";
          PTSNAP_TRY(fn(element));
          element.clear();
        } else {
          element += line;
        }
      } else if (line == "    {") {
        element = "{";
      } else if (line == "  ]," || line == "  ]") {
        at = At::kAfter;
      } else {
        return Error(what + ": unexpected text in the list \"" + std::string(key) +
                     "\" (not as ptsnap wrote it)");
      }
    } else if (at == At::kBefore && line.starts_with(open)) {
      at = line == open ? At::kIn : At::kAfter;  // "[]": empty
    } else if (line.starts_with(kJournalSeq)) {
      journal_seq = base::ParseUint(line.substr(kJournalSeq.size()));
    }
  }
  if (at != At::kAfter || !journal_seq)
    return Error(what + ": no complete \"" + std::string(key) +
                 "\" list or journal_seq (not as ptsnap wrote it)");
  return *journal_seq;
}

// Calls `fn` with each line among the first `bytes` of the journal `fd`
// whose seq is above `after` (the lines before are in manifest.json).
Result<void> ScanJournal(int fd, const std::string& what, uint64_t bytes, uint64_t after,
                         const std::function<Result<void>(const ManifestChange&)>& fn) {
  if (::lseek(fd, 0, SEEK_SET) != 0) return Error::FromErrno("seek " + what);
  LineReader lines(fd, what, bytes);
  std::string_view line;
  for (size_t line_no = 1;; ++line_no) {
    PTSNAP_ASSIGN_OR_RETURN(const bool more, lines.Next(line));
    if (!more) return Ok();
    auto change = ParseManifestChange(line);
    if (!change)
      return std::move(change).error().AddContext(what + ": line " + std::to_string(line_no));
    if (change->seq > after) PTSNAP_TRY(fn(*change));
  }
}

}  // namespace

Result<void> MakeTraceDirs(const std::filesystem::path& dir) {
  std::filesystem::path p;
  for (const auto& part : dir) {
    p /= part;
    if (::mkdir(p.c_str(), kDirMode) == 0) {
      base::GiveToInvoker(p);
    } else if (errno != EEXIST) {
      return Error::FromErrno("create directory " + p.string());
    }
  }
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) return Error::FromErrno("stat " + dir.string());
  if (!S_ISDIR(st.st_mode)) return Error(dir.string() + " exists and is not a directory");
  if (::chmod(dir.c_str(), kDirMode) != 0) return Error::FromErrno("chmod " + dir.string());
  base::GiveToInvoker(dir);
  return Ok();
}

std::filesystem::path PerfMapPath(const std::filesystem::path& dir, int32_t pid) {
  return dir / kJitDir / PerfMapName(pid);
}

std::filesystem::path JitdumpPath(const std::filesystem::path& dir, int32_t pid) {
  return dir / kJitDir / ("jit-" + std::to_string(pid) + ".dump");
}

// ---- TraceWriter ---------------------------------------------------------

Result<TraceWriter> TraceWriter::Create(const std::filesystem::path& dir, Manifest initial) {
  PTSNAP_TRY(MakeTraceDirs(dir));
  std::filesystem::path manifest_path = dir / kManifestFile;
  struct stat st;
  if (::lstat(manifest_path.c_str(), &st) == 0) {
    return Error(dir.string() +
                 " already holds a trace (manifest.json exists); choose another directory or "
                 "remove it first");
  }
  if (errno != ENOENT) return Error::FromErrno("stat " + manifest_path.string());

  if (initial.sideband.empty()) initial.sideband = "sideband.data";
  if (initial.sideband.find('/') != std::string::npos || initial.sideband == "..") {
    return Error("sideband file name \"" + initial.sideband + "\" must be a plain file name");
  }
  PTSNAP_TRY(MakeTraceDirs(dir / (initial.source == Source::kSampled ? kSamplesDir : kStreamDir)));

  // O_TRUNC: leftovers of an earlier attempt that never wrote a manifest
  // must not be read as this recording's sideband.
  // O_EXCL | O_NOFOLLOW after removing it: never written through a link.
  std::filesystem::path sideband_path = dir / initial.sideband;
  if (::unlink(sideband_path.c_str()) != 0 && errno != ENOENT)
    return Error::FromErrno("remove " + sideband_path.string());
  base::UniqueFd fd(::open(sideband_path.c_str(),
                           O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC,
                           kFileMode));
  if (!fd) return Error::FromErrno("create " + sideband_path.string());
  if (::fchmod(fd.get(), kFileMode) != 0)
    return Error::FromErrno("chmod " + sideband_path.string());
  base::GiveToInvoker(fd.get());

  // A journal without a manifest belongs to no trace (nor ever to this one).
  std::filesystem::path journal_path = dir / kJournalFile;
  if (::unlink(journal_path.c_str()) != 0 && errno != ENOENT)
    return Error::FromErrno("remove " + journal_path.string());

  // Room for the last manifest when the disk fills (Flush). Best effort: a
  // disk already too full for it fails at the first manifest anyway.
  (void)base::WriteFileAtomic(dir / kReserveFile, std::string(kReserveBytes, '\0'), kFileMode);

  initial.version = kManifestVersion;
  initial.state = State::kRecording;
  initial.journal_seq = 0;
  TraceWriter w(dir, std::move(initial), std::move(fd));
  for (const Stream& s : w.manifest_.streams)
    w.next_stream_id_ = std::max(w.next_stream_id_, s.id + 1);
  PTSNAP_TRY(w.Flush());
  return w;
}

Result<void> TraceWriter::AppendSideband(std::span<const std::byte> records) {
  if (!sideband_) return Error("sideband file is not open");
  return AppendWhole(sideband_.get(), records, (dir_ / manifest_.sideband).string());
}

uint32_t TraceWriter::NameNewStream(Stream& info) {
  const uint32_t id = next_stream_id_;
  info.id = id;
  info.file = StreamFile(info.kind, id);
  return id;
}

void TraceWriter::List(Stream info) {
  next_stream_id_ = std::max(next_stream_id_, info.id + 1);
  // A reader of version 1 would take the file for the whole ring.
  if (info.follows) manifest_.version = kManifestVersionFollows;
  manifest_.streams.push_back(std::move(info));
}

Result<uint32_t> TraceWriter::AddStream(Stream info, std::span<const std::byte> data) {
  PTSNAP_ASSIGN_OR_RETURN(uint32_t id, AddStreamUnlisted(std::move(info), data));
  PTSNAP_TRY(Flush());
  return id;
}

Result<uint32_t> TraceWriter::AddStreamUnlisted(Stream info, std::span<const std::byte> data) {
  const uint32_t id = NameNewStream(info);
  info.size = data.size();
  // The stream file first, then (at the next Flush) the manifest that lists it.
  PTSNAP_TRY(base::WriteFileAtomic(dir_ / info.file, AsChars(data), kFileMode));
  List(std::move(info));
  return id;
}

Result<uint32_t> TraceWriter::BeginStream(Stream info) {
  const uint32_t id = NameNewStream(info);
  info.size = 0;
  const std::filesystem::path path = dir_ / info.file;
  base::UniqueFd fd(::open(
      path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, kFileMode));
  if (!fd) return Error::FromErrno("create " + path.string());
  if (::fchmod(fd.get(), kFileMode) != 0) return Error::FromErrno("chmod " + path.string());
  base::GiveToInvoker(fd.get());
  open_streams_.emplace_back(id, std::move(fd));
  List(std::move(info));
  PTSNAP_TRY(Flush());
  return id;
}

std::optional<size_t> TraceWriter::StreamIndexOf(uint32_t id) const {
  // Newest first: the streams being grown are the latest (and those in
  // memory are a full-execution recording's threads, or one snapshot's).
  for (size_t k = manifest_.streams.size(); k-- > 0;)
    if (manifest_.streams[k].id == id) return k;
  return std::nullopt;
}

Stream* TraceWriter::FindStream(uint32_t id) {
  const std::optional<size_t> k = StreamIndexOf(id);
  if (!k) return nullptr;
  // The caller may change it: the next Flush writes its figures.
  if (std::find(touched_streams_.begin(), touched_streams_.end(), id) == touched_streams_.end())
    touched_streams_.push_back(id);
  return &manifest_.streams[*k];
}

Result<void> TraceWriter::AppendStream(uint32_t id, std::span<const std::byte> data) {
  Stream* s = FindStream(id);
  int fd = -1;
  for (const auto& [sid, f] : open_streams_)
    if (sid == id) fd = f.get();
  if (s == nullptr || fd < 0) return Error("stream " + std::to_string(id) + " is not open");
  PTSNAP_TRY(AppendWhole(fd, data, (dir_ / s->file).string()));
  s->size += data.size();
  return Ok();
}

Result<void> TraceWriter::AppendStreamKeepingWhatFits(
    uint32_t id, std::span<const std::byte> data,
    const std::function<size_t(std::span<const std::byte>)>& piece) {
  auto appended = AppendStream(id, data);
  if (appended || appended.error().errnum() != ENOSPC) return appended;
  for (size_t off = 0; off < data.size();) {
    const size_t n = piece(data.subspan(off));
    if (n == 0 || n > data.size() - off || !AppendStream(id, data.subspan(off, n))) break;
    off += n;
  }
  return appended;
}

Result<void> TraceWriter::AddSnapshot(Snapshot snap) {
  snapshot_reasons_.push_back(snap.reason);
  manifest_.snapshots.push_back(std::move(snap));
  return Flush();
}

Result<void> TraceWriter::SyncData() {
  // Sideband records the manifest may refer to reach the disk first.
  if (sideband_ && ::fdatasync(sideband_.get()) != 0 && errno != EINVAL) {
    return Error::FromErrno("fsync " + (dir_ / manifest_.sideband).string());
  }
  for (const auto& [id, fd] : open_streams_) {
    if (::fdatasync(fd.get()) != 0 && errno != EINVAL)
      return Error::FromErrno("fsync stream " + std::to_string(id));
  }
  return Ok();
}

ManifestChange TraceWriter::Changes(uint64_t seq, const ManifestFields& fields) const {
  ManifestChange c;
  c.seq = seq;
  c.snapshots = manifest_.snapshots;
  c.streams.assign(manifest_.streams.begin() + static_cast<ptrdiff_t>(listed_streams_),
                   manifest_.streams.end());
  for (uint32_t id : touched_streams_) {
    // Streams listed since are in c.streams whole.
    const std::optional<size_t> k = StreamIndexOf(id);
    if (!k || *k >= listed_streams_) continue;
    const Stream& s = manifest_.streams[*k];
    c.sizes.push_back(
        {.id = id, .size = s.size, .lost_bytes = s.lost_bytes, .truncated = s.truncated});
  }
  // A handful of fields, compared as the JSON they are written as.
  for (const auto& field : fields) {
    if (std::find(listed_fields_.begin(), listed_fields_.end(), field) == listed_fields_.end())
      c.set.push_back(field);
  }
  for (const auto& listed : listed_fields_) {
    if (std::none_of(fields.begin(), fields.end(),
                     [&](const auto& f) { return f.first == listed.first; }))
      c.set.emplace_back(listed.first, "null");
  }
  return c;
}

void TraceWriter::MarkWritten(uint64_t seq, ManifestFields fields) {
  journal_seq_ = seq;
  snapshots_listed_ += static_cast<uint32_t>(manifest_.snapshots.size());
  streams_listed_ += static_cast<uint32_t>(manifest_.streams.size() - listed_streams_);
  manifest_.snapshots.clear();
  // A snapshot's streams are whole when listed: from now on they are on
  // disk only. Full-execution streams stay, to grow.
  std::erase_if(manifest_.streams, [](const Stream& s) { return s.snapshot != 0; });
  listed_streams_ = manifest_.streams.size();
  listed_fields_ = std::move(fields);
  touched_streams_.clear();
}

Result<void> TraceWriter::WriteCompacted(uint64_t seq, const base::WriteChunkFn& write,
                                         uint64_t& bytes) {
  // In pieces of about kChunk bytes: the text is never held whole.
  constexpr size_t kChunk = 64 << 10;
  std::string out;
  bytes = 0;
  const auto put = [&](std::string_view piece) -> Result<void> {
    out += piece;
    if (out.size() < kChunk) return Ok();
    bytes += out.size();
    PTSNAP_TRY(write(out));
    out.clear();
    return Ok();
  };
  const std::filesystem::path manifest_path = dir_ / kManifestFile;
  const std::filesystem::path journal_path = dir_ / kJournalFile;
  // What is on disk: manifest.json (none before the first compaction) and
  // the journal's lines after its journal_seq (a compaction that stopped
  // before emptying the journal leaves lines it holds already).
  base::UniqueFd old(::open(manifest_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
  if (!old && errno != ENOENT) return Error::FromErrno("open " + manifest_path.string());
  base::UniqueFd journal;
  if (journal_bytes_ > 0) {
    journal.reset(::open(journal_path.c_str(), O_RDONLY | O_NOFOLLOW | O_CLOEXEC));
    if (!journal) return Error::FromErrno("open " + journal_path.string());
  }

  // The top-level fields (SerializeManifestFrame ignores the lists).
  const uint64_t journal_seq_before = manifest_.journal_seq;
  manifest_.journal_seq = seq;
  const ManifestFrame frame = SerializeManifestFrame(manifest_);
  manifest_.journal_seq = journal_seq_before;

  bool first = true;
  const auto element = [&](std::string_view text) -> Result<void> {
    PTSNAP_TRY(put(ManifestElementSeparator(first)));
    first = false;
    return put(text);
  };
  PTSNAP_TRY(put(frame.head));
  uint64_t on_disk_seq = 0;
  if (old) {
    PTSNAP_ASSIGN_OR_RETURN(
        on_disk_seq, ScanManifestList(old.get(), manifest_path.string(), "snapshots", element));
  }
  if (journal) {
    PTSNAP_TRY(ScanJournal(journal.get(), journal_path.string(), journal_bytes_, on_disk_seq,
                           [&](const ManifestChange& c) -> Result<void> {
                             for (const Snapshot& s : c.snapshots)
                               PTSNAP_TRY(
                                   put(SerializeManifestElement(s, std::exchange(first, false))));
                             return Ok();
                           }));
  }
  for (const Snapshot& s : manifest_.snapshots)
    PTSNAP_TRY(put(SerializeManifestElement(s, std::exchange(first, false))));
  PTSNAP_TRY(put(ManifestListEnd(first)));
  PTSNAP_TRY(put(frame.middle));

  // Streams: those in memory (full-execution ones, which grow) with their
  // current figures, in their place; the others as they were listed.
  first = true;
  const auto stream = [&](const Stream& s) -> Result<void> {
    const std::optional<size_t> k = StreamIndexOf(s.id);
    return put(
        SerializeManifestElement(k ? manifest_.streams[*k] : s, std::exchange(first, false)));
  };
  if (old) {
    PTSNAP_TRY(ScanManifestList(old.get(), manifest_path.string(), "streams",
                                [&](std::string_view text) -> Result<void> {
                                  if (listed_streams_ == 0) return element(text);
                                  PTSNAP_ASSIGN_OR_RETURN(Stream s, ParseManifestStream(text));
                                  return stream(s);
                                }));
  }
  if (journal) {
    PTSNAP_TRY(ScanJournal(journal.get(), journal_path.string(), journal_bytes_, on_disk_seq,
                           [&](const ManifestChange& c) -> Result<void> {
                             for (const Stream& s : c.streams) PTSNAP_TRY(stream(s));
                             return Ok();
                           }));
  }
  for (size_t k = listed_streams_; k < manifest_.streams.size(); ++k)
    PTSNAP_TRY(put(SerializeManifestElement(manifest_.streams[k], std::exchange(first, false))));
  PTSNAP_TRY(put(ManifestListEnd(first)));
  PTSNAP_TRY(put(frame.tail));
  bytes += out.size();
  return write(out);
}

Result<void> TraceWriter::Compact(uint64_t seq, ManifestFields& fields) {
  const std::filesystem::path path = dir_ / kManifestFile;
  uint64_t bytes = 0;
  bool renamed = false;
  const auto produce = [&](const base::WriteChunkFn& write) {
    return WriteCompacted(seq, write, bytes);
  };
  auto written = base::WriteFileAtomicWith(path, kFileMode, produce, &renamed);
  if (!written && !renamed && written.error().errnum() == ENOSPC &&
      ::unlink((dir_ / kReserveFile).c_str()) == 0)
    written = base::WriteFileAtomicWith(path, kFileMode, produce, &renamed);
  if (!renamed) {
    // manifest.json is as it was (the rename never happened). A full disk
    // falls back to a journal line (Write); anything else compacts again at
    // the next Flush.
    if (written.error().errnum() != ENOSPC) manifest_file_bytes_ = 0;
    return written;
  }
  // The new manifest holds everything up to `seq`, whatever follows.
  manifest_.journal_seq = seq;
  manifest_bytes_written_ += bytes;
  manifest_file_bytes_ = bytes;
  MarkWritten(seq, std::move(fields));
  if (!written) {
    manifest_file_bytes_ = 0;  // the directory's sync failed: compact again
    return written;
  }
  // Only now, with the new manifest renamed into place (and its directory
  // synced), may the journal go: a crash in between leaves lines the
  // manifest holds already, which readers skip by their seq.
  if (journal_ && journal_bytes_ > 0) {
    if (::ftruncate(journal_.get(), 0) != 0 || ::fdatasync(journal_.get()) != 0) {
      manifest_file_bytes_ = 0;  // compact again at the next Flush
      return Error::FromErrno("truncate " + (dir_ / kJournalFile).string());
    }
  }
  journal_bytes_ = 0;
  return Ok();
}

Result<void> TraceWriter::AppendJournalOnce(std::string_view line) {
  const std::filesystem::path path = dir_ / kJournalFile;
  if (!journal_) {
    base::UniqueFd fd(::open(
        path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_APPEND | O_CLOEXEC, kFileMode));
    if (!fd) return Error::FromErrno("create " + path.string());
    if (::fchmod(fd.get(), kFileMode) != 0) return Error::FromErrno("chmod " + path.string());
    base::GiveToInvoker(fd.get());
    journal_ = std::move(fd);
  }
  auto written = base::WriteAll(journal_.get(), line, path.string());
  if (written && ::fdatasync(journal_.get()) != 0 && errno != EINVAL)
    written = Error::FromErrno("fsync " + path.string());
  if (!written) {
    // Cut a partial line back off: later lines must not follow a torn one.
    // If even that fails, the next Flush rewrites the manifest and empties
    // the journal.
    if (::ftruncate(journal_.get(), static_cast<off_t>(journal_bytes_)) != 0)
      manifest_file_bytes_ = 0;
    return written;
  }
  journal_bytes_ += line.size();
  manifest_bytes_written_ += line.size();
  return Ok();
}

Result<void> TraceWriter::AppendJournal(std::string_view line) {
  auto appended = AppendJournalOnce(line);
  if (!appended && appended.error().errnum() == ENOSPC &&
      ::unlink((dir_ / kReserveFile).c_str()) == 0)
    appended = AppendJournalOnce(line);
  return appended;
}

Result<void> TraceWriter::Write(bool compact) {
  PTSNAP_TRY(SyncData());
  const uint64_t seq = journal_seq_ + 1;
  ManifestFields fields = SerializeManifestFields(manifest_);
  ManifestChange change = Changes(seq, fields);
  if (!compact && manifest_file_bytes_ != 0 && change.empty()) {
    touched_streams_.clear();
    return Ok();
  }
  const std::string line = SerializeManifestChange(change);
  if (compact || manifest_file_bytes_ == 0 ||
      journal_bytes_ + line.size() > std::max(manifest_file_bytes_, kMinJournalBytes)) {
    auto compacted = Compact(seq, fields);
    if (compacted) return Ok();
    // No room for the whole manifest, and manifest.json is as it was: the
    // line says the same in far less room.
    if (compacted.error().errnum() != ENOSPC || manifest_file_bytes_ == 0 || journal_seq_ == seq)
      return compacted;
  }
  PTSNAP_TRY(AppendJournal(line));
  MarkWritten(seq, std::move(fields));
  return Ok();
}

Result<void> TraceWriter::Flush() { return Write(/*compact=*/false); }

Result<void> TraceWriter::Finish(State state, std::string stop_error) {
  ::unlink((dir_ / kReserveFile).c_str());
  manifest_.state = state;
  manifest_.stop_error = std::move(stop_error);
  // What others wrote for us (the emulator's files, directories made with
  // std::filesystem) goes to the sudo user too.
  base::GiveTreeToInvoker(dir_);
  PTSNAP_TRY(Write(/*compact=*/true));
  if (journal_bytes_ == 0) {
    // manifest.json holds everything: the (empty) journal goes.
    journal_.reset();
    ::unlink((dir_ / kJournalFile).c_str());
  }
  return Ok();
}

Result<uint32_t> TraceWriter::AdoptStream(Stream info, const std::filesystem::path& file) {
  const uint32_t id = NameNewStream(info);
  PTSNAP_ASSIGN_OR_RETURN(const uint64_t size, MoveIntoTrace(file, dir_ / info.file));
  info.size = size;
  List(std::move(info));
  PTSNAP_TRY(Flush());
  return id;
}

Result<void> TraceWriter::CopyPerfMaps(std::span<const int32_t> pids,
                                       const std::filesystem::path& from) {
  for (int32_t pid : pids) {
    const std::filesystem::path src = from / PerfMapName(pid);
    if (::access(src.c_str(), F_OK) != 0 && errno == ENOENT) continue;  // no JIT in that process
    // The decoder reads at most this much of a map (base::ReadFile's default).
    PTSNAP_ASSIGN_OR_RETURN(std::string text, base::ReadFile(src));
    PTSNAP_TRY(MakeTraceDirs(dir_ / kJitDir));
    PTSNAP_TRY(base::WriteFileAtomic(PerfMapPath(dir_, pid), text, kFileMode));
  }
  return Ok();
}

Result<void> TraceWriter::CopyJitdump(int32_t pid, const std::filesystem::path& from) {
  PTSNAP_ASSIGN_OR_RETURN(std::string data, base::ReadFile(from, size_t{1} << 30));
  PTSNAP_TRY(MakeTraceDirs(dir_ / kJitDir));
  return base::WriteFileAtomic(JitdumpPath(dir_, pid), data, kFileMode);
}

Result<void> TraceWriter::AdoptJitCode(int32_t pid, const std::filesystem::path& file) {
  PTSNAP_TRY(MakeTraceDirs(dir_ / kJitDir));
  PTSNAP_TRY(MoveIntoTrace(file, JitCodePath(dir_, pid)));
  return Ok();
}

// ---- TraceReader ---------------------------------------------------------

Result<TraceReader> TraceReader::Open(const std::filesystem::path& dir) {
  struct stat st;
  if (::stat(dir.c_str(), &st) != 0) {
    if (errno == ENOENT) return Error(dir.string() + " does not exist");
    return Error::FromErrno(dir.string());
  }
  if (!S_ISDIR(st.st_mode)) {
    return Error(dir.string() + " is not a ptsnap trace directory (not a directory)");
  }
  std::filesystem::path manifest_path = dir / kManifestFile;
  if (::access(manifest_path.c_str(), F_OK) != 0 && errno == ENOENT) {
    return Error(dir.string() + " is not a ptsnap trace directory (no manifest.json)");
  }
  PTSNAP_ASSIGN_OR_RETURN(std::string text, ReadOwnedFile(dir, kManifestFile, kMaxManifestBytes));
  auto m = ParseManifest(text);
  if (!m) return std::move(m).error().AddContext(manifest_path.string());
  // What changed after manifest.json was last written (a recording still
  // going, or cut short): manifest.journal, when there is one.
  const std::filesystem::path journal_path = dir / kJournalFile;
  if (::lstat(journal_path.c_str(), &st) == 0 || errno != ENOENT) {
    PTSNAP_ASSIGN_OR_RETURN(std::string journal,
                            ReadOwnedFile(dir, kJournalFile, kMaxManifestBytes));
    if (auto r = ApplyJournal(*m, journal); !r)
      return std::move(r).error().AddContext(journal_path.string());
  }
  return TraceReader(dir, std::move(*m));
}

TraceReader::TraceReader(std::filesystem::path dir, Manifest m)
    : dir_(std::move(dir)), manifest_(std::move(m)) {
  for (size_t k = 0; k < manifest_.streams.size(); ++k)
    stream_index_.emplace(manifest_.streams[k].id, k);
}

Result<base::UniqueFd> TraceReader::OpenStream(const Stream& stream, uint64_t* file_size,
                                               ShortStream short_file) const {
  std::filesystem::path path = dir_ / stream.file;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return Error(StreamName(stream) + " is missing: " + path.string() +
                 " does not exist (the trace directory is incomplete)");
  }
  auto fd = OpenOwnedFile(dir_, stream.file);
  if (!fd) return std::move(fd).error().AddContext(StreamName(stream));
  if (::fstat(fd->get(), &st) != 0)
    return Error::FromErrno(StreamName(stream) + ": stat " + path.string());
  // A recording that did not end complete (killed, or stopped by an
  // error) may have bytes after the last flush: only the listed ones count.
  const bool cut_short = manifest_.state != State::kComplete;
  const bool keep_short = short_file == ShortStream::kKeepWhatIsThere;
  if (static_cast<uint64_t>(st.st_size) != stream.size &&
      !(cut_short && static_cast<uint64_t>(st.st_size) > stream.size) &&
      !(keep_short && static_cast<uint64_t>(st.st_size) < stream.size)) {
    return Error(StreamName(stream) + " has " + std::to_string(st.st_size) +
                 " bytes but the manifest says " + std::to_string(stream.size) +
                 " (the file was changed or truncated)");
  }
  *file_size = static_cast<uint64_t>(st.st_size);
  return std::move(*fd);
}

namespace {

// `size` bytes of `fd` from `offset` on, appended to `out`; fewer when the
// file ends first.
Result<void> ReadAt(int fd, uint64_t offset, uint64_t size, std::string& out,
                    const std::string& what) {
  const size_t had = out.size();
  out.resize(had + size);
  uint64_t got = 0;
  while (got < size) {
    const ssize_t n =
        ::pread(fd, out.data() + had + got, size - got, static_cast<off_t>(offset + got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      out.resize(had);
      return Error::FromErrno("read " + what);
    }
    if (n == 0) break;
    got += static_cast<uint64_t>(n);
  }
  out.resize(had + got);
  return Ok();
}

}  // namespace

TraceReader::Chain TraceReader::ChainOf(const Stream& stream) const {
  Chain chain;
  if (!stream.follows) {
    chain.pieces.push_back({&stream, stream.size});
    return chain;
  }
  // Every `follows` names a stream listed before the one that names it
  // (ParseManifest), so the walk ends; the bound is for a manifest built
  // otherwise.
  uint64_t need = stream.ring_bytes;
  for (const Stream* at = &stream;;) {
    const uint64_t take = std::min(at->size, need);
    chain.pieces.push_back({at, take});
    need -= take;
    if (need == 0) break;
    const auto it = at->follows ? stream_index_.find(*at->follows) : stream_index_.end();
    if (it == stream_index_.end() || chain.pieces.size() > manifest_.streams.size()) {
      chain.short_by = need;
      break;
    }
    at = &manifest_.streams[it->second];
  }
  return chain;
}

Result<std::string> TraceReader::ReadChain(const Stream& stream, ShortStream short_file,
                                           uint64_t* missing) const {
  const Chain chain = ChainOf(stream);
  if (chain.short_by != 0) {
    return Error(StreamName(stream) + ": the ring held " + std::to_string(stream.ring_bytes) +
                 " bytes (ring_bytes), but the streams it continues hold only " +
                 std::to_string(stream.ring_bytes - chain.short_by) +
                 " (the manifest is inconsistent)");
  }
  const std::vector<Chain::Piece>& pieces = chain.pieces;
  // Not reserved from ring_bytes: only the files, checked against the
  // manifest as they are opened, bound what is read.
  std::string out;
  *missing = 0;
  for (size_t k = pieces.size(); k-- > 0;) {
    const Stream& from = *pieces[k].stream;
    const bool own = k == 0;  // the stream's own file: the view's last bytes
    uint64_t file_size = 0;
    auto fd = OpenStream(from, &file_size, own ? short_file : ShortStream::kError);
    if (!fd) {
      if (own) return std::move(fd).error();
      return std::move(fd).error().AddContext(StreamName(stream) + " continues stream " +
                                              std::to_string(from.id) + "'s bytes");
    }
    // The piece's last listed bytes, of what the file holds (only the
    // stream's own file may be short, with kKeepWhatIsThere).
    const uint64_t begin = from.size - pieces[k].bytes;
    const uint64_t end = std::max(begin, std::min(from.size, file_size));
    const size_t had = out.size();
    PTSNAP_TRY(ReadAt(fd->get(), begin, end - begin, out, (dir_ / from.file).string()));
    const uint64_t got = out.size() - had;
    if (got != pieces[k].bytes) {
      if (!own || short_file == ShortStream::kError)
        return Error(StreamName(from) + " changed while being read");
      *missing = pieces[k].bytes - got;
    }
  }
  return out;
}

Result<std::string> TraceReader::ReadStream(const Stream& stream) const {
  if (stream.follows) {
    uint64_t missing = 0;
    return ReadChain(stream, ShortStream::kError, &missing);
  }
  uint64_t file_size = 0;
  PTSNAP_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenStream(stream, &file_size));
  return ReadOpenStream(stream, fd.get(), file_size);
}

Result<std::string> TraceReader::ReadOpenStream(const Stream& stream, int fd,
                                                uint64_t file_size) const {
  PTSNAP_ASSIGN_OR_RETURN(std::string data, base::ReadFd(fd, static_cast<size_t>(file_size),
                                                         (dir_ / stream.file).string()));
  if (data.size() > stream.size && manifest_.state != State::kComplete) data.resize(stream.size);
  if (data.size() != stream.size) {
    return Error(StreamName(stream) + " changed while being read");
  }
  return data;
}

void StreamBytes::DropBefore(uint64_t offset) const {
  if (map_.empty()) return;
  const auto page = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  const uint64_t n = std::min<uint64_t>(offset, size_) / page * page;
  // MADV_DONTNEED on a private file mapping never written: the pages are
  // unmapped, and a later read maps the file's bytes again.
  if (n != 0) (void)::madvise(map_.data(), n, MADV_DONTNEED);
}

Result<StreamBytes> TraceReader::MapStream(const Stream& stream, ShortStream short_file) const {
  if (stream.follows) {
    uint64_t missing = 0;
    PTSNAP_ASSIGN_OR_RETURN(std::string data, ReadChain(stream, short_file, &missing));
    StreamBytes bytes(std::move(data));
    bytes.set_missing(missing);
    return bytes;
  }
  uint64_t file_size = 0;
  PTSNAP_ASSIGN_OR_RETURN(base::UniqueFd fd, OpenStream(stream, &file_size, short_file));
  if (file_size < stream.size) {
    // Cut: only the bytes the file has, never a page past its end (SIGBUS).
    Stream there = stream;
    there.size = file_size;
    PTSNAP_ASSIGN_OR_RETURN(StreamBytes bytes, MapOpenStream(there, fd.get(), file_size));
    bytes.set_missing(stream.size - file_size);
    return bytes;
  }
  return MapOpenStream(stream, fd.get(), file_size);
}

Result<StreamBytes> TraceReader::MapOpenStream(const Stream& stream, int fd,
                                               uint64_t file_size) const {
  if (stream.size == 0) return StreamBytes();
  // The file over the start of a reservation one page longer, whose rest
  // reads as zeros: the bytes after the stream can be read as a string's
  // terminator can (never past it: the decoders stop at their end).
  const auto size = static_cast<size_t>(stream.size);
  const auto page = static_cast<size_t>(::sysconf(_SC_PAGESIZE));
  auto area = base::MappedRegion::Map((size + page - 1) / page * page + page, PROT_READ,
                                      MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (!area ||
      ::mmap(area->data(), size, PROT_READ, MAP_PRIVATE | MAP_FIXED, fd, 0) == MAP_FAILED) {
    // A file system that cannot map it: read it.
    PTSNAP_ASSIGN_OR_RETURN(std::string data, ReadOpenStream(stream, fd, file_size));
    return StreamBytes(std::move(data));
  }
  (void)::madvise(area->data(), size, MADV_SEQUENTIAL);
  return StreamBytes(std::move(*area), size);
}

Result<RecordStream> TraceReader::ReadSideband() const {
  std::filesystem::path path = dir_ / manifest_.sideband;
  struct stat st;
  if (::lstat(path.c_str(), &st) != 0 && errno == ENOENT) {
    return Error(manifest_.sideband + " is missing: " + path.string() +
                 " does not exist (the trace directory is incomplete)");
  }
  PTSNAP_ASSIGN_OR_RETURN(std::string data, ReadOwnedFile(dir_, manifest_.sideband,
                                                          std::numeric_limits<size_t>::max() / 2));
  std::span<const std::byte> bytes = AsBytes(data);
  RecordScan scan = ScanRecords(bytes);
  if (scan.corrupt_offset) {
    // A crash can leave the file's last blocks zero-filled (the size was
    // updated before the data reached the disk): treat that as a torn tail.
    auto rest = bytes.subspan(*scan.corrupt_offset);
    if (!AllZero(rest)) {
      return Error(manifest_.sideband + ": corrupt perf record at offset " +
                   std::to_string(*scan.corrupt_offset) + ": " + scan.corrupt_error);
    }
    scan.stream.truncated_tail = rest.size();
  }
  std::stable_sort(
      scan.stream.records.begin(), scan.stream.records.end(),
      [](const Record& a, const Record& b) { return a.sample_id.time < b.sample_id.time; });
  return std::move(scan.stream);
}

}  // namespace ptsnap::trace
