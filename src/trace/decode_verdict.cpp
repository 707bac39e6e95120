#include "trace/decode_verdict.h"

#include <nlohmann/json.hpp>
#include <system_error>
#include <type_traits>

#include "base/file_util.h"

namespace ptsnap::trace {
namespace {

using Json = nlohmann::json;

// The verdict of a far larger file is not ours: a few hundred bytes is usual.
constexpr size_t kMaxVerdictSize = size_t{64} << 10;

template <typename T>
Result<void> Get(const Json& j, const char* key, T* out) {
  const auto it = j.find(key);
  if (it == j.end()) return Ok();
  if constexpr (std::is_same_v<T, std::string>) {
    if (!it->is_string()) return Error(std::string("\"") + key + "\" is not a string");
  } else {
    if (!it->is_number_unsigned()) {
      return Error(std::string("\"") + key + "\" is not a non-negative integer");
    }
  }
  *out = it->get<T>();
  return Ok();
}

}  // namespace

std::string SerializeDecodeVerdict(const DecodeVerdict& v) {
  Json j = Json::object();
  j["by"] = v.by;
  j["ptsnap_version"] = v.ptsnap_version;
  j["decoded_unix_ns"] = v.decoded_unix_ns;
  j["output"] = v.output;
  j["slices"] = v.slices;
  j["damaged_bytes"] = v.damaged_bytes;
  j["impossible"] = v.impossible;
  j["first_impossible"] = v.first_impossible;
  return j.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
}

Result<DecodeVerdict> ParseDecodeVerdict(std::string_view json) {
  const Json j = Json::parse(json.begin(), json.end(), nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return Error("not valid JSON");
  if (!j.is_object()) return Error("not a JSON object");
  DecodeVerdict v;
  PTSNAP_TRY(Get(j, "by", &v.by));
  PTSNAP_TRY(Get(j, "ptsnap_version", &v.ptsnap_version));
  PTSNAP_TRY(Get(j, "decoded_unix_ns", &v.decoded_unix_ns));
  PTSNAP_TRY(Get(j, "output", &v.output));
  PTSNAP_TRY(Get(j, "slices", &v.slices));
  PTSNAP_TRY(Get(j, "damaged_bytes", &v.damaged_bytes));
  PTSNAP_TRY(Get(j, "impossible", &v.impossible));
  PTSNAP_TRY(Get(j, "first_impossible", &v.first_impossible));
  return v;
}

Result<void> WriteDecodeVerdict(const std::filesystem::path& dir, const DecodeVerdict& v) {
  return base::WriteFileAtomic(dir / kDecodeVerdictFile, SerializeDecodeVerdict(v), 0600);
}

Result<std::optional<DecodeVerdict>> ReadDecodeVerdict(const std::filesystem::path& dir) {
  const std::filesystem::path path = dir / kDecodeVerdictFile;
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<DecodeVerdict>();
  PTSNAP_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path, kMaxVerdictSize));
  auto v = ParseDecodeVerdict(text);
  if (!v) return std::move(v).error().AddContext(path.string());
  return std::optional<DecodeVerdict>(std::move(*v));
}

}  // namespace ptsnap::trace
