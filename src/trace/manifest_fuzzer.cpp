// Fuzzes ParseManifest and ApplyJournal; a manifest that parses (with its
// journal replayed) must serialise and parse back to the same value, and so
// must each of its streams alone (ParseManifestStream, what a compaction
// reads back). Each journal line goes through ParseManifestChange too: one
// that parses must serialise and parse back to the same line.
//
// Two input modes. Text starting with a byte below 0x80 (every seed: '{') is
// parsed as it is: up to a NUL as manifest.json, and what follows the NUL (if
// any) as manifest.journal. Otherwise byte 1 picks a field of a valid
// manifest and the rest is JSON for its new value, so the field checks
// (types, ranges, paths) are reached far more often than random text would.
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "trace/manifest.h"

namespace {

using ptsnap::trace::Manifest;

void CheckJournalLines(std::string_view journal) {
  while (!journal.empty()) {
    const size_t end = journal.find('\n');
    const std::string_view line = journal.substr(0, end);
    journal = end == std::string_view::npos ? std::string_view() : journal.substr(end + 1);
    auto c = ptsnap::trace::ParseManifestChange(line);
    if (!c) continue;
    const std::string text = ptsnap::trace::SerializeManifestChange(*c);
    auto again =
        ptsnap::trace::ParseManifestChange(std::string_view(text).substr(0, text.size() - 1));
    if (!again || ptsnap::trace::SerializeManifestChange(*again) != text) __builtin_trap();
  }
}

void CheckRoundTrip(std::string_view text, std::optional<std::string_view> journal = {}) {
  if (journal) CheckJournalLines(*journal);
  auto m = ptsnap::trace::ParseManifest(text);
  if (!m) return;
  if (journal && !ptsnap::trace::ApplyJournal(*m, *journal)) return;
  auto again = ptsnap::trace::ParseManifest(ptsnap::trace::SerializeManifest(*m));
  if (!again || !(*again == *m)) __builtin_trap();
  const size_t separator = ptsnap::trace::ManifestElementSeparator(true).size();
  for (const ptsnap::trace::Stream& s : m->streams) {
    auto one = ptsnap::trace::ParseManifestStream(
        ptsnap::trace::SerializeManifestElement(s, true).substr(separator));
    if (!one || !(*one == s)) __builtin_trap();
  }
  // Its fields journalled as a writer would (every one "changed") must
  // replay onto it unchanged: a journal line's `set` reads like the file.
  ptsnap::trace::ManifestChange all{.seq = m->journal_seq + 1,
                                    .set = ptsnap::trace::SerializeManifestFields(*m)};
  Manifest replayed = *again;
  if (!ptsnap::trace::ApplyJournal(replayed, ptsnap::trace::SerializeManifestChange(all)))
    __builtin_trap();
  replayed.journal_seq = m->journal_seq;
  if (!(replayed == *m)) __builtin_trap();
}

const nlohmann::json& Template() {
  static const nlohmann::json t = [] {
    Manifest m;
    m.command = {"/bin/true"};
    m.pids = {1};
    m.kernel_start = 0xffffffff81000000ull;
    m.snapshots = {{.seq = 1,
                    .reason = ptsnap::trace::SnapshotReason::kExit,
                    .detail = "",
                    .time = 5,
                    .tid = 1}};
    m.snapshots.push_back({.seq = 2, .reason = ptsnap::trace::SnapshotReason::kTrigger});
    m.streams = {{.id = 0, .file = "pt/0.pt", .pid = 1, .tid = 1, .snapshot = 1, .size = 8},
                 {.id = 1,
                  .file = "pt/1.pt",
                  .pid = 1,
                  .tid = 1,
                  .snapshot = 2,
                  .size = 4,
                  .follows = 0,
                  .ring_bytes = 10}};
    m.version = ptsnap::trace::kManifestVersionFollows;
    m.binaries = {{.path = "/bin/true", .build_id = "ab", .copy = "binaries/ab/true"}};
    return nlohmann::json::parse(ptsnap::trace::SerializeManifest(m));
  }();
  return t;
}

constexpr const char* kFields[] = {
    "/version",
    "/format",
    "/source",
    "/state",
    "/scope",
    "/mode",
    "/created_unix_ns",
    "/command",
    "/command/0",
    "/pids",
    "/pids/0",
    "/kernel",
    "/kernel/start",
    "/kernel/release",
    "/cpu",
    "/cpu/family",
    "/pt",
    "/pt/config",
    "/pt/tsc",
    "/pt/filter",
    "/time_conv",
    "/time_conv/time_zero",
    "/time_conv/time_shift",
    "/time_conv/time_mult",
    "/sideband",
    "/snapshots",
    "/snapshots/0",
    "/snapshots/0/seq",
    "/streams",
    "/streams/0",
    "/streams/0/file",
    "/streams/0/size",
    "/streams/0/pid",
    "/streams/0/cpu",
    "/streams/0/wrapped",
    "/streams/1/follows",
    "/streams/1/ring_bytes",
    "/streams/1/size",
    "/streams/1/tid",
    "/streams/0/follows",
    "/kcore",
    "/kcore/dir",
    "/binaries",
    "/binaries/0/copy",
    "/binaries/0/path",
    "/emulator",
    "/lost_records",
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  if (size < 2 || data[0] < 0x80) {
    const size_t nul = in.find('\0');
    if (nul == std::string_view::npos) {
      CheckRoundTrip(in);
    } else {
      CheckRoundTrip(in.substr(0, nul), in.substr(nul + 1));
    }
    return 0;
  }
  const char* field = kFields[data[1] % (sizeof kFields / sizeof kFields[0])];
  std::string_view value_text = in.substr(2);
  nlohmann::json value = nlohmann::json::parse(value_text, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) value = std::string(value_text);
  nlohmann::json doc = Template();
  doc[nlohmann::json::json_pointer(field)] = std::move(value);
  CheckRoundTrip(doc.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  return 0;
}
