#include "record/options.h"

#include <algorithm>
#include <cctype>

#include "base/string_util.h"

namespace ptsnap::record {

std::optional<AfterRecording> AfterRecordingFrom(std::string_view s) {
  if (s == "kill") return AfterRecording::kKill;
  if (s == "wait") return AfterRecording::kWait;
  if (s == "detach") return AfterRecording::kDetach;
  return std::nullopt;
}

Result<uint64_t> ParseSize(std::string_view text) {
  std::string_view s = base::Trim(text);
  size_t digits = 0;
  while (digits < s.size() && std::isdigit(static_cast<unsigned char>(s[digits]))) ++digits;
  auto number = base::ParseUint(s.substr(0, digits));
  std::string unit;
  for (char c : s.substr(digits))
    if (c != ' ') unit += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  int shift = -1;
  if (unit.empty() || unit == "b") shift = 0;
  if (unit == "k" || unit == "kb" || unit == "kib") shift = 10;
  if (unit == "m" || unit == "mb" || unit == "mib") shift = 20;
  if (unit == "g" || unit == "gb" || unit == "gib") shift = 30;
  if (!number || shift < 0 || *number > (UINT64_MAX >> (shift + 1)))
    return Error("bad size '" + std::string(text) + "': use a number with an optional K, M or G " +
                 "suffix, e.g. 4M");
  return *number << shift;
}

Result<uint64_t> ParseDuration(std::string_view text) {
  const std::optional<uint64_t> ns = base::ParseDurationNs(text);
  if (!ns) {
    if (base::ParseDurationNs(text, "ms"))
      return Error("bad duration '" + std::string(text) +
                   "': give a unit (ns, us, ms, s, m or h), e.g. " + std::string(base::Trim(text)) +
                   "ms");
    return Error("bad duration '" + std::string(text) +
                 "': use a number and a unit (ns, us, ms, s, m or h), e.g. 2ms, 500us, 1.5ms, "
                 "800ns");
  }
  constexpr uint64_t kDayNs = uint64_t{86400} * 1'000'000'000;
  if (*ns == 0) return Error("duration '" + std::string(text) + "' is shorter than 1 ns");
  if (*ns > kDayNs) return Error("duration '" + std::string(text) + "' is longer than a day");
  return *ns;
}

Result<std::chrono::milliseconds> ParseRecordingDuration(std::string_view text) {
  const std::optional<uint64_t> ns = base::ParseDurationNs(text, "s");
  if (!ns || *ns == 0)
    return Error("bad --duration '" + std::string(text) + "': use e.g. 10s, 500ms, 2m, 1.5s");
  return std::chrono::milliseconds((*ns + 999'999) / 1'000'000);
}

uint64_t RoundToPowerOfTwoPages(uint64_t bytes, bool* rounded) {
  constexpr uint64_t kPage = 4096;
  uint64_t pages = (bytes + kPage - 1) / kPage;
  if (pages == 0) pages = 1;
  uint64_t p2 = 1;
  while (p2 < pages) p2 <<= 1;
  if (rounded != nullptr) *rounded = p2 * kPage != bytes;
  return p2 * kPage;
}

Result<void> CheckAuxSize(uint64_t aux_bytes, bool full_execution) {
  // tools/perf/arch/x86/util/intel-pt.c: "intel_pt: the AUX area must be at
  // least 8 KiB" (full trace) / "... 4 KiB" (snapshot).
  const uint64_t min = full_execution ? 8192 : 4096;
  if (aux_bytes >= min) return Ok();
  return Error("--snapshot-size " + base::ExactSize(aux_bytes) + " is too small" +
               (full_execution ? " for --full-execution" : "") + ": the PT buffer needs at least " +
               base::ExactSize(min) + " (perf's minimum); pass --snapshot-size " +
               (full_execution ? "8K" : "4K") + " or more")
      .WithKind(ErrorKind::kUsage);  // a bad command line, as --snapshot-size 0 is
}

std::optional<std::string> PsbPeriodWarning(uint64_t snapshot_bytes, uint64_t psb_period_bytes) {
  constexpr uint64_t kNear = 256;  // perf's INTEL_PT_PSB_PERIOD_NEAR
  if (psb_period_bytes == 0 || snapshot_bytes > psb_period_bytes + kNear) return std::nullopt;
  return "--snapshot-size " + base::ExactSize(snapshot_bytes) +
         " may be too small for the PSB period (a PSB packet about every " +
         base::ExactSize(psb_period_bytes) +
         "): decoding starts at a PSB, so a snapshot may hold little that decodes; pass a "
         "larger --snapshot-size or a smaller psb_period (--timer-resolution custom:psb_period=N)";
}

std::filesystem::path DefaultTraceDir(const std::filesystem::path& output) {
  std::filesystem::path out = output.empty() ? std::filesystem::path("trace.fxt.gz") : output;
  std::string name = out.filename().string();
  // Strip every suffix: trace.fxt.gz -> trace.
  auto dot = name.find('.');
  if (dot != std::string::npos && dot > 0) name = name.substr(0, dot);
  if (name.empty()) name = "trace";
  return out.parent_path() / (name + ".ptsnap");
}

}  // namespace ptsnap::record
