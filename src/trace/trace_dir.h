// Writing and reading trace directories (docs/trace-format.md).
//
// Crash safety: streams and sideband are written before the manifest that
// lists them; the manifest is replaced atomically (rename) or, between such
// rewrites, what changed is appended to manifest.journal (one line, synced),
// so at any moment the directory holds a readable trace of what was
// captured so far.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/file_util.h"
#include "base/mapped_region.h"
#include "base/unique_fd.h"
#include "ptsnap/result.h"
#include "trace/manifest.h"
#include "trace/perf_record.h"

namespace ptsnap::trace {

// Where a trace directory keeps process `pid`'s JIT symbol map, copied from
// the recording machine's /tmp/perf-PID.map (TraceWriter::CopyPerfMaps):
// DIR/jit/perf-PID.map.
// mkdir -p for a directory in a trace: mode 0700 for every directory it
// creates (an existing `dir` is tightened to 0700 too), given to the user
// who ran sudo (base::GiveToInvoker).
Result<void> MakeTraceDirs(const std::filesystem::path& dir);
std::filesystem::path PerfMapPath(const std::filesystem::path& dir, int32_t pid);
// Where DIR keeps process `pid`'s jitdump: DIR/jit/jit-PID.dump.
std::filesystem::path JitdumpPath(const std::filesystem::path& dir, int32_t pid);

class TraceWriter {
 public:
  static constexpr size_t kReserveBytes = 256 << 10;
  // Creates `dir` (and parents; mode 0700, it may hold kernel memory) and
  // writes the initial manifest with state kRecording (version and state of
  // `initial` are overridden). Fails if `dir` holds a manifest already, so a
  // previous recording is never overwritten ("DIR already holds a trace
  // (manifest.json exists); ..."). A sideband file without a manifest (an
  // attempt that died before starting) is truncated. Files are mode 0600.
  // A file `.reserve` (kReserveBytes) holds room for the manifest: a
  // manifest write that meets a full disk removes it and tries once more.
  static Result<TraceWriter> Create(const std::filesystem::path& dir, Manifest initial);

  TraceWriter(TraceWriter&&) noexcept = default;
  TraceWriter& operator=(TraceWriter&&) noexcept = default;

  // Appends raw perf records to sideband.data (kept open; O_APPEND).
  Result<void> AppendSideband(std::span<const std::byte> records);
  // Writes `data` as a new PT stream file, fills in id/file/size, adds it to
  // the manifest and rewrites the manifest. Returns the stream id (ids are
  // 0, 1, 2, ... in the order added; the file is "pt/<id>.pt").
  Result<uint32_t> AddStream(Stream info, std::span<const std::byte> data);
  // As AddStream, but the manifest is not rewritten: the stream is listed by
  // the next Flush (AddSnapshot, Finish). A snapshot of N threads' streams
  // then writes the manifest once, not N + 1 times (with 1,000 threads the
  // rewrites, each of the whole manifest, were most of a snapshot's cost).
  Result<uint32_t> AddStreamUnlisted(Stream info, std::span<const std::byte> data);
  // Streaming (full-execution mode): BeginStream creates an empty stream
  // file, lists it (size 0) and rewrites the manifest; AppendStream appends
  // to it and raises its size in the in-memory manifest only. Flush (or any
  // call that rewrites the manifest) syncs the stream files first, so the
  // manifest on disk never lists more bytes than the file holds; a crash
  // leaves the file possibly longer than the manifest says, which readers
  // accept while the state is "recording". Returns the stream id.
  Result<uint32_t> BeginStream(Stream info);
  // Lists the finished file `file` as a new stream by renaming it into the
  // directory (no copy: the emulator's work files live in the trace
  // directory, so a full disk does not stop them being kept); a file on
  // another file system is copied. Then rewrites the manifest.
  Result<uint32_t> AdoptStream(Stream info, const std::filesystem::path& file);
  Result<void> AppendStream(uint32_t id, std::span<const std::byte> data);
  // As AppendStream, but a full disk keeps what fits: after `data` is refused
  // whole, its leading pieces are appended one by one until one does not fit
  // (`piece(rest)`: the length of the piece `rest` starts with, 0 for none:
  // a whole record, or any length for PT). The full disk's error is still
  // returned; the stream's size says what was kept.
  Result<void> AppendStreamKeepingWhatFits(
      uint32_t id, std::span<const std::byte> data,
      const std::function<size_t(std::span<const std::byte>)>& piece);
  // The in-memory entry of stream `id`, which the caller may change (the
  // next Flush writes its figures): a full-execution stream (snapshot 0,
  // which may grow), or any stream the next Flush is still to list. nullptr
  // otherwise: a snapshot's streams are whole when listed, and once listed
  // the writer keeps them on disk only (its memory does not grow with the
  // streams of a long recording).
  Stream* FindStream(uint32_t id);
  // Records a snapshot and rewrites the manifest.
  Result<void> AddSnapshot(Snapshot snap);
  // Any other manifest change (lost counts, kcore, binaries): edit, then
  // Flush. Streams change only through FindStream (or the calls above) and
  // snapshots through AddSnapshot: Flush writes the streams those touched,
  // not all of them. The lists here are only what the writer keeps in
  // memory: `streams` the entries FindStream finds (all of a full-execution
  // recording's), `snapshots` those the next Flush is to list. The rest is
  // on disk (manifest.json and manifest.journal), read back when compacting.
  Manifest& manifest() { return manifest_; }
  // Snapshots and streams listed so far, on disk or to be by the next Flush.
  [[nodiscard]] uint32_t snapshot_count() const {
    return snapshots_listed_ + static_cast<uint32_t>(manifest_.snapshots.size());
  }
  // Every snapshot's reason, in the order taken, listed or not (manifest()
  // keeps only those the next Flush lists).
  [[nodiscard]] const std::vector<SnapshotReason>& snapshot_reasons() const {
    return snapshot_reasons_;
  }
  [[nodiscard]] uint32_t stream_count() const {
    return streams_listed_ + static_cast<uint32_t>(manifest_.streams.size() - listed_streams_);
  }
  // Makes the manifest on disk say what manifest() says. It fdatasyncs the
  // sideband and open streams first, so the manifest never refers to
  // records that are not on disk. Then it appends one line to
  // manifest.journal with what changed since the last Flush (new streams
  // and snapshots, the figures of streams FindStream or AppendStream
  // touched, changed top-level fields) and fdatasyncs it: the cost does not
  // grow with the streams listed before. When the journal has grown past
  // manifest.json's size (and at the first Flush) it compacts instead:
  // manifest.json is rewritten atomically with everything, then the
  // journal emptied; the compaction streams, reading the lists back from
  // manifest.json and the journal's lines after its journal_seq element by
  // element as it writes (the streams in memory with their current
  // figures), so ptsnap's memory does not grow with them. A compaction
  // that meets a full disk removes `.reserve` and retries, then falls back
  // to a journal line; a line that meets one is cut back (no torn line is
  // left mid-journal), `.reserve` removed and the line tried once more.
  // Nothing changed: nothing is written.
  Result<void> Flush();
  // Sets the final state (and, for a recording ptsnap's own failure
  // stopped, `stop_error`) and compacts: manifest.json lists everything and
  // manifest.journal is removed. The space reserved for this last manifest
  // (see Create) is released first, so a recording that filled the disk
  // still ends with a manifest listing what it wrote (when even the
  // rewrite does not fit, the final state is a journal line instead, and
  // the journal stays).
  Result<void> Finish(State state = State::kComplete, std::string stop_error = "");
  // Bytes written to manifest.json and manifest.journal so far (the figure
  // behind the per-snapshot cost; tests and benchmarks read it).
  [[nodiscard]] uint64_t manifest_bytes_written() const { return manifest_bytes_written_; }
  // Copies each `from`/perf-PID.map (the JIT symbol maps runtimes write, in
  // perf's convention) of `pids` to PerfMapPath(dir(), pid), mode 0600
  // (jit/ created 0700 when there is one). A map that does not exist is
  // skipped; one that cannot be read or written is an error naming it (the
  // maps after it are not copied). Call it when recording ends: the maps
  // belong to the recording machine at that moment.
  Result<void> CopyPerfMaps(std::span<const int32_t> pids,
                            const std::filesystem::path& from = "/tmp");
  // Copies the jitdump `from` (perf's format, trace/jitdump.h: what a
  // runtime writes when asked to, found by the marker mapping of its file,
  // JitdumpMarkerPid) of process `pid` to JitdumpPath(dir(), pid), mode
  // 0600, jit/ created 0700. Call it when recording ends: the runtime
  // appends to it as it compiles.
  Result<void> CopyJitdump(int32_t pid, const std::filesystem::path& from);
  // Moves the emulator's JIT code capture of process `pid` (`file`, which
  // the plugin may go on appending to through its open descriptor) to
  // JitCodePath(dir(), pid) (trace/jit_code.h), mode 0600, jit/ created
  // 0700. A file on another file system is copied as it is now.
  Result<void> AdoptJitCode(int32_t pid, const std::filesystem::path& file);

  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

 private:
  // The next stream id (one past the largest) and its file, set in `info`.
  uint32_t NameNewStream(Stream& info);
  TraceWriter(std::filesystem::path dir, Manifest m, base::UniqueFd sideband)
      : dir_(std::move(dir)), manifest_(std::move(m)), sideband_(std::move(sideband)) {}
  // Appends `info` to the manifest (in memory).
  void List(Stream info);
  // fdatasyncs the sideband and the open streams.
  Result<void> SyncData();
  // Flush; `compact`: rewrite manifest.json even when a line would do.
  Result<void> Write(bool compact);
  // What changed since the last Flush, as the journal line `seq`; `fields`:
  // SerializeManifestFields of manifest_.
  ManifestChange Changes(uint64_t seq, const ManifestFields& fields) const;
  // After a write: what manifest_ says is on disk. A snapshot's streams
  // leave memory.
  void MarkWritten(uint64_t seq, ManifestFields fields);
  // Rewrites manifest.json with everything (journal_seq `seq`), then empties
  // the journal; MarkWritten once the new manifest is in place (also when
  // an error follows).
  Result<void> Compact(uint64_t seq, ManifestFields& fields);
  // The new manifest.json's text, to `write`; its byte count to `bytes`.
  Result<void> WriteCompacted(uint64_t seq, const base::WriteChunkFn& write, uint64_t& bytes);
  // The index in manifest_.streams of stream `id`, if in memory.
  [[nodiscard]] std::optional<size_t> StreamIndexOf(uint32_t id) const;
  // Appends `line` to the journal and syncs it.
  Result<void> AppendJournal(std::string_view line);
  Result<void> AppendJournalOnce(std::string_view line);

  std::filesystem::path dir_;
  Manifest manifest_;
  base::UniqueFd sideband_;
  std::vector<std::pair<uint32_t, base::UniqueFd>> open_streams_;  // BeginStream'ed files
  base::UniqueFd journal_;  // manifest.journal (O_APPEND), opened at its first line
  // As of the last Flush: the journal's last line (manifest.journal_seq
  // after a compaction), its bytes, manifest.json's bytes (0: not yet
  // written, or compact at the next Flush), the entries of manifest_.streams
  // already listed (the first ones), the snapshots and streams listed in
  // all, the top-level fields.
  uint64_t journal_seq_ = 0;
  uint64_t journal_bytes_ = 0;
  uint64_t manifest_file_bytes_ = 0;
  size_t listed_streams_ = 0;
  uint32_t snapshots_listed_ = 0;
  std::vector<SnapshotReason> snapshot_reasons_;
  uint32_t streams_listed_ = 0;
  ManifestFields listed_fields_;
  std::vector<uint32_t> touched_streams_;  // ids FindStream/AppendStream handed out since
  uint32_t next_stream_id_ = 0;
  uint64_t manifest_bytes_written_ = 0;
};

// A stream's bytes for decoding, read-only: the file mapped (MAP_PRIVATE,
// MADV_SEQUENTIAL), so that they stay page cache the kernel can reclaim
// rather than memory of the process that grows with the trace; held in a
// string where nothing can be mapped (an empty stream, a file system
// without mmap). Move-only.
class StreamBytes {
 public:
  StreamBytes() = default;
  explicit StreamBytes(std::string held) : held_(std::move(held)) {}
  StreamBytes(base::MappedRegion map, size_t size) : map_(std::move(map)), size_(size) {}

  [[nodiscard]] std::string_view view() const {
    if (map_.empty()) return held_;
    return {reinterpret_cast<const char*>(map_.data()), size_};
  }
  [[nodiscard]] bool mapped() const { return !map_.empty(); }
  // The decoder is past `offset` and will not read before it again but
  // rarely: a mapping's pages before it leave this process's memory (they
  // stay page cache, and read back from it if touched), so that the
  // memory a decode holds does not grow with the stream. Nothing for held
  // bytes.
  void DropBefore(uint64_t offset) const;
  // Listed bytes the file no longer has (MapStream with
  // ShortStream::kKeepWhatIsThere): they would follow view(), from offset
  // view().size() of the stream. 0 for a whole stream.
  [[nodiscard]] uint64_t missing() const { return missing_; }
  void set_missing(uint64_t missing) { missing_ = missing; }

 private:
  base::MappedRegion map_;
  size_t size_ = 0;
  std::string held_;
  uint64_t missing_ = 0;
};

// What MapStream does with a stream file shorter than the manifest lists
// (cut by hand, or truncated since it was recorded): fail, as for any other
// size mismatch, or give the bytes that are there and count the rest in
// StreamBytes::missing() (the decoder: it decodes up to the cut and says
// how many bytes are gone).
enum class ShortStream : uint8_t { kError, kKeepWhatIsThere };

class TraceReader {
 public:
  // Reads and validates manifest.json, then replays manifest.journal when
  // there is one (ApplyJournal: a torn last line is ignored; errors are
  // "DIR/manifest.journal: line N: ..."). Errors say what is missing or corrupt
  // and that the directory is not a ptsnap trace when there is no manifest:
  // "DIR does not exist", "DIR is not a ptsnap trace directory (no
  // manifest.json)", "DIR/manifest.json: unsupported version N (this ptsnap
  // reads 1)", "DIR/manifest.json: field 'x.y': ..." (docs/errors.md).
  static Result<TraceReader> Open(const std::filesystem::path& dir);

  [[nodiscard]] const Manifest& manifest() const { return manifest_; }
  [[nodiscard]] const std::filesystem::path& dir() const { return dir_; }

  // The stream's bytes; an error naming the stream if its file is missing or
  // its size differs from the manifest's. A file longer than the manifest
  // says is accepted (and cut to the manifest's size) while the state is
  // "recording": a full-execution recording that died between appending
  // and rewriting the manifest.
  //
  // A stream that follows another (Stream::follows) is put back together:
  // the last ViewedBytes(stream) = ring_bytes bytes of its chain's files
  // (each checked as above), oldest first, exactly what a whole-ring file
  // would hold. A piece of the chain that is missing or of the wrong size is
  // an error naming both streams ("stream 12 (pt/12.pt) continues stream
  // 11's bytes: stream 11 (pt/11.pt) is missing: ..."), as is a chain that
  // holds fewer bytes than ring_bytes.
  Result<std::string> ReadStream(const Stream& stream) const;
  // The same bytes, with the same checks and errors, mapped (StreamBytes)
  // instead of read (a stream that follows another: held, as put back
  // together). A file truncated while mapped would make reading it a
  // SIGBUS: ptsnap never cuts into a stream's listed bytes (a recording
  // appends). With ShortStream::kKeepWhatIsThere, a file shorter than
  // listed is no error: its bytes are mapped and the rest counted in
  // missing() (for a stream that follows another, only its own file may be
  // short: its bytes are the view's last).
  Result<StreamBytes> MapStream(const Stream& stream,
                                ShortStream short_file = ShortStream::kError) const;
  // The streams whose files the bytes of `stream` are read from, newest
  // (`stream` itself) first, each with how many of its last listed bytes
  // they take: one piece for a stream that follows none. `short_by`: the
  // bytes of ring_bytes the chain cannot hold (0 for a consistent manifest).
  // Reads no file.
  struct Chain {
    struct Piece {
      const Stream* stream;
      uint64_t bytes;
    };
    std::vector<Piece> pieces;
    uint64_t short_by = 0;
  };
  [[nodiscard]] Chain ChainOf(const Stream& stream) const;
  // All sideband records, sorted by sample_id.time (stable). A torn tail (a
  // partial last record, or zero bytes a crash left at the end) is ignored
  // and counted in truncated_tail; any other corrupt record is an error
  // naming its offset.
  Result<RecordStream> ReadSideband() const;

 private:
  TraceReader(std::filesystem::path dir, Manifest m);
  // A stream that follows another, put back together (ReadStream) from its
  // ChainOf; the bytes its own file lacks (kKeepWhatIsThere) in `missing`.
  Result<std::string> ReadChain(const Stream& stream, ShortStream short_file,
                                uint64_t* missing) const;
  // The stream's file, open, once its size (`file_size`) agrees with the
  // manifest (or is shorter, with ShortStream::kKeepWhatIsThere).
  Result<base::UniqueFd> OpenStream(const Stream& stream, uint64_t* file_size,
                                    ShortStream short_file = ShortStream::kError) const;
  // MapStream's mapping of `stream.size` bytes, once OpenStream opened `fd`.
  Result<StreamBytes> MapOpenStream(const Stream& stream, int fd, uint64_t file_size) const;
  // ReadStream's reading, once OpenStream opened `fd`.
  Result<std::string> ReadOpenStream(const Stream& stream, int fd, uint64_t file_size) const;
  std::filesystem::path dir_;
  Manifest manifest_;
  std::unordered_map<uint32_t, size_t> stream_index_;  // id -> index in manifest_.streams
};

}  // namespace ptsnap::trace
