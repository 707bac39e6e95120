#include "sys/proc_maps.h"

#include "base/file_util.h"
#include "base/string_util.h"

namespace ptsnap::sys {
namespace {

// Consumes one whitespace-delimited field from the front of `s`.
std::string_view NextField(std::string_view* s) {
  size_t i = 0;
  while (i < s->size() && ((*s)[i] == ' ' || (*s)[i] == '\t')) ++i;
  size_t start = i;
  while (i < s->size() && (*s)[i] != ' ' && (*s)[i] != '\t') ++i;
  std::string_view f = s->substr(start, i - start);
  s->remove_prefix(i);
  return f;
}

Result<MapEntry> ParseLine(std::string_view line) {
  MapEntry e;
  std::string_view range = NextField(&line);
  std::string_view perms = NextField(&line);
  std::string_view offset = NextField(&line);
  std::string_view dev = NextField(&line);
  std::string_view inode = NextField(&line);
  size_t dash = range.find('-');
  if (dash == std::string_view::npos)
    return Error("bad address range '" + std::string(range) + "'");
  auto start = base::ParseUint(range.substr(0, dash), 16);
  auto end = base::ParseUint(range.substr(dash + 1), 16);
  if (!start || !end || *end < *start) {
    return Error("bad address range '" + std::string(range.substr(0, 40)) + "'");
  }
  if (perms.size() != 4 || (perms[0] != 'r' && perms[0] != '-') ||
      (perms[1] != 'w' && perms[1] != '-') || (perms[2] != 'x' && perms[2] != '-') ||
      (perms[3] != 'p' && perms[3] != 's')) {
    return Error("bad permissions '" + std::string(perms.substr(0, 8)) + "'");
  }
  auto off = base::ParseUint(offset, 16);
  if (!off) return Error("bad offset '" + std::string(offset.substr(0, 20)) + "'");
  size_t colon = dev.find(':');
  auto major =
      colon == std::string_view::npos ? std::nullopt : base::ParseUint(dev.substr(0, colon), 16);
  auto minor =
      colon == std::string_view::npos ? std::nullopt : base::ParseUint(dev.substr(colon + 1), 16);
  if (!major || !minor || *major > UINT32_MAX || *minor > UINT32_MAX) {
    return Error("bad device '" + std::string(dev.substr(0, 20)) + "'");
  }
  auto ino = base::ParseUint(inode);
  if (!ino) return Error("bad inode '" + std::string(inode.substr(0, 20)) + "'");
  e.start = *start;
  e.end = *end;
  e.read = perms[0] == 'r';
  e.write = perms[1] == 'w';
  e.exec = perms[2] == 'x';
  e.shared = perms[3] == 's';
  e.offset = *off;
  e.dev_major = static_cast<uint32_t>(*major);
  e.dev_minor = static_cast<uint32_t>(*minor);
  e.inode = *ino;
  // The path is the rest of the line after the padding; it may hold spaces.
  while (!line.empty() && (line.front() == ' ' || line.front() == '\t')) line.remove_prefix(1);
  constexpr std::string_view kDeleted = " (deleted)";
  if (line.size() > kDeleted.size() && line.substr(line.size() - kDeleted.size()) == kDeleted) {
    line.remove_suffix(kDeleted.size());
    e.deleted = true;
  }
  e.path = std::string(line);
  return e;
}

}  // namespace

Result<std::vector<MapEntry>> ParseProcMaps(std::string_view text) {
  std::vector<MapEntry> out;
  size_t line_no = 0;
  while (!text.empty()) {
    size_t nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text.remove_prefix(nl == std::string_view::npos ? text.size() : nl + 1);
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (base::Trim(line).empty()) continue;
    auto e = ParseLine(line);
    if (!e) return std::move(e).error().AddContext("line " + std::to_string(line_no));
    out.push_back(std::move(*e));
  }
  return out;
}

Result<std::vector<MapEntry>> ReadProcMaps(const base::RootPath& root, pid_t pid) {
  std::string path = "/proc/" + (pid == 0 ? std::string("self") : std::to_string(pid)) + "/maps";
  PTSNAP_ASSIGN_OR_RETURN(std::string text, base::ReadFile(root.Resolve(path)));
  auto maps = ParseProcMaps(text);
  if (!maps) return std::move(maps).error().AddContext(path);
  return maps;
}

}  // namespace ptsnap::sys
