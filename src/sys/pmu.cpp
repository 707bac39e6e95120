#include "sys/pmu.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "base/file_util.h"
#include "base/string_util.h"

namespace ptsnap::sys {
namespace {

std::string DevicePath(std::string_view name) {
  return "/sys/bus/event_source/devices/" + std::string(name);
}

// Reads a small sysfs file; on failure records a warning and returns nullopt.
std::optional<std::string> ReadOrWarn(const std::filesystem::path& path, const std::string& shown,
                                      std::vector<std::string>* warnings) {
  auto text = base::ReadFile(path, 4096);
  if (!text) {
    warnings->push_back(shown + ": " + text.error().ToString());
    return std::nullopt;
  }
  return std::move(*text);
}

std::optional<uint32_t> ReadU32(const base::RootPath& root, const std::string& shown,
                                std::vector<std::string>* warnings) {
  std::filesystem::path p = root.Resolve(shown);
  std::error_code ec;
  if (!std::filesystem::exists(p, ec)) return std::nullopt;
  auto text = ReadOrWarn(p, shown, warnings);
  if (!text) return std::nullopt;
  auto v = base::ParseUint(*text);
  if (!v || *v > UINT32_MAX) {
    warnings->push_back(shown + ": not a decimal number: '" +
                        std::string(base::Trim(*text).substr(0, 40)) + "'");
    return std::nullopt;
  }
  return static_cast<uint32_t>(*v);
}

// Lists regular entries of a directory, sorted; empty when it does not exist.
std::vector<std::string> ListDir(const std::filesystem::path& dir) {
  std::vector<std::string> names;
  std::error_code ec;
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    names.push_back(it->path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

int FormatTerm::width() const {
  int w = 0;
  for (const BitRange& r : ranges) w += r.width();
  return w;
}

Result<FormatTerm> ParseFormatTerm(std::string_view text) {
  text = base::Trim(text);
  size_t colon = text.find(':');
  if (colon == std::string_view::npos) {
    return Error("expected 'config:<bits>', got '" + std::string(text.substr(0, 40)) + "'");
  }
  FormatTerm term;
  std::string_view word = text.substr(0, colon);
  if (word == "config") {
    term.word = ConfigWord::kConfig;
  } else if (word == "config1") {
    term.word = ConfigWord::kConfig1;
  } else if (word == "config2") {
    term.word = ConfigWord::kConfig2;
  } else {
    return Error("unknown config word '" + std::string(word.substr(0, 40)) + "'");
  }
  std::string_view list = text.substr(colon + 1);
  if (list.empty()) return Error("no bits after '" + std::string(word) + ":'");
  uint64_t used_mask = 0;
  for (std::string_view part : base::Split(list, ',')) {
    size_t dash = part.find('-');
    auto lo = base::ParseUint(part.substr(0, dash));
    auto hi = dash == std::string_view::npos ? lo : base::ParseUint(part.substr(dash + 1));
    if (!lo || !hi) return Error("bad bit range '" + std::string(part.substr(0, 40)) + "'");
    if (*lo > 63 || *hi > 63) {
      return Error("bit " + std::to_string(*lo > 63 ? *lo : *hi) + " out of range 0-63");
    }
    if (*lo > *hi) return Error("bit range '" + std::string(part) + "' runs backwards");
    BitRange r{static_cast<int>(*lo), static_cast<int>(*hi)};
    uint64_t mask = (r.width() == 64 ? ~uint64_t{0} : ((uint64_t{1} << r.width()) - 1)) << r.lo;
    if (used_mask & mask) return Error("bit range '" + std::string(part) + "' overlaps another");
    used_mask |= mask;
    term.ranges.push_back(r);
  }
  return term;
}

Result<uint64_t> ParseCapValue(std::string_view text) {
  std::string_view t = base::Trim(text);
  if (base::StartsWith(t, "0x") || base::StartsWith(t, "0X")) t.remove_prefix(2);
  auto v = base::ParseUint(t, 16);
  if (!v) return Error("not a hex number: '" + std::string(base::Trim(text).substr(0, 40)) + "'");
  return *v;
}

Result<TscArtRatio> ParseTscArtRatio(std::string_view text) {
  std::string_view t = base::Trim(text);
  size_t colon = t.find(':');
  if (colon == std::string_view::npos) {
    return Error("expected 'numerator:denominator', got '" + std::string(t.substr(0, 40)) + "'");
  }
  auto n = base::ParseUint(t.substr(0, colon));
  auto d = base::ParseUint(t.substr(colon + 1));
  if (!n || !d || *n > UINT32_MAX || *d > UINT32_MAX) {
    return Error("expected 'numerator:denominator', got '" + std::string(t.substr(0, 40)) + "'");
  }
  return TscArtRatio{static_cast<uint32_t>(*n), static_cast<uint32_t>(*d)};
}

uint64_t PmuInfo::Cap(std::string_view cap) const {
  auto it = caps.find(std::string(cap));
  return it == caps.end() ? 0 : it->second;
}

bool PmuInfo::HasTerm(std::string_view term) const { return format.count(std::string(term)) != 0; }

PmuInfo ReadPmu(const base::RootPath& root, std::string_view name) {
  PmuInfo pmu;
  pmu.name = std::string(name);
  const std::string dev = DevicePath(name);
  std::error_code ec;
  if (!std::filesystem::is_directory(root.Resolve(dev), ec)) return pmu;
  pmu.present = true;

  pmu.type = ReadU32(root, dev + "/type", &pmu.warnings);
  if (!pmu.type && pmu.warnings.empty()) pmu.warnings.push_back(dev + "/type: missing");

  for (const std::string& term : ListDir(root.Resolve(dev + "/format"))) {
    std::string shown = dev + "/format/" + term;
    auto text = ReadOrWarn(root.Resolve(shown), shown, &pmu.warnings);
    if (!text) continue;
    auto parsed = ParseFormatTerm(*text);
    if (!parsed) {
      pmu.warnings.push_back(shown + ": " + parsed.error().ToString());
      continue;
    }
    pmu.format.emplace(term, std::move(*parsed));
  }
  for (const std::string& cap : ListDir(root.Resolve(dev + "/caps"))) {
    std::string shown = dev + "/caps/" + cap;
    auto text = ReadOrWarn(root.Resolve(shown), shown, &pmu.warnings);
    if (!text) continue;
    auto v = ParseCapValue(*text);
    if (!v) {
      pmu.warnings.push_back(shown + ": " + v.error().ToString());
      continue;
    }
    pmu.caps.emplace(cap, *v);
  }
  pmu.nr_addr_filters = ReadU32(root, dev + "/nr_addr_filters", &pmu.warnings);
  pmu.max_nonturbo_ratio = ReadU32(root, dev + "/max_nonturbo_ratio", &pmu.warnings);
  std::string ratio_path = dev + "/tsc_art_ratio";
  if (std::filesystem::exists(root.Resolve(ratio_path), ec)) {
    if (auto text = ReadOrWarn(root.Resolve(ratio_path), ratio_path, &pmu.warnings)) {
      auto r = ParseTscArtRatio(*text);
      if (r) {
        pmu.tsc_art_ratio = *r;
      } else {
        pmu.warnings.push_back(ratio_path + ": " + r.error().ToString());
      }
    }
  }
  return pmu;
}

Result<void> PlaceValue(const FormatTerm& term, uint64_t value, uint64_t* word) {
  int width = term.width();
  if (width < 64 && (value >> width) != 0) {
    return Error("value " + std::to_string(value) + " does not fit in " + std::to_string(width) +
                 " bit" + (width == 1 ? "" : "s"));
  }
  for (const BitRange& r : term.ranges) {
    int w = r.width();
    uint64_t mask = w == 64 ? ~uint64_t{0} : ((uint64_t{1} << w) - 1);
    *word = (*word & ~(mask << r.lo)) | ((value & mask) << r.lo);
    value = w == 64 ? 0 : value >> w;
  }
  return Ok();
}

Result<void> SetTerm(const PmuInfo& pmu, std::string_view name, uint64_t value, uint64_t* config) {
  auto it = pmu.format.find(std::string(name));
  if (it == pmu.format.end()) {
    return Error("PMU " + pmu.name + " has no format term '" + std::string(name) + "'");
  }
  if (it->second.word != ConfigWord::kConfig) {
    return Error("format term '" + std::string(name) + "' is not in attr.config");
  }
  PTSNAP_TRY_CTX(PlaceValue(it->second, value, config),
                 "setting " + pmu.name + " term '" + std::string(name) + "'");
  return Ok();
}

Result<void> SetTermInAttr(const PmuInfo& pmu, std::string_view name, uint64_t value,
                           perf_event_attr* attr) {
  auto it = pmu.format.find(std::string(name));
  if (it == pmu.format.end()) {
    return Error("PMU " + pmu.name + " has no format term '" + std::string(name) + "'");
  }
  __u64* word = it->second.word == ConfigWord::kConfig    ? &attr->config
                : it->second.word == ConfigWord::kConfig1 ? &attr->config1
                                                          : &attr->config2;
  uint64_t value_word = *word;
  PTSNAP_TRY_CTX(PlaceValue(it->second, value, &value_word),
                 "setting " + pmu.name + " term '" + std::string(name) + "'");
  *word = value_word;
  return Ok();
}

}  // namespace ptsnap::sys
