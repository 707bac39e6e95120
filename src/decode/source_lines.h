// Source file and line of a function's entry address, from DWARF (libdw).
//
// Used lazily by the output writers: only functions that appear in the
// output are looked up, once per (ELF file, entry address). Missing or
// unreadable DWARF means "no location", never an error.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>

namespace ptsnap::decode {

struct SourceLocation {
  std::string file;  // as the line table names it (usually absolute)
  uint32_t line = 0;
};

// One ELF (or separate debug) file opened with libdw.
class DwarfFile {
 public:
  // nullptr when the file cannot be read or has no DWARF.
  static std::unique_ptr<DwarfFile> Open(const std::filesystem::path& path);
  ~DwarfFile();
  DwarfFile(const DwarfFile&) = delete;
  DwarfFile& operator=(const DwarfFile&) = delete;

  // The line-table row for ELF virtual address `vaddr` (the function's entry
  // address), cached; the pointer stays valid as long as this object.
  // nullptr when no compilation unit covers it.
  const SourceLocation* Lookup(uint64_t vaddr);

 private:
  DwarfFile() = default;
  int fd_ = -1;
  void* dwarf_ = nullptr;  // Dwarf*
  std::unordered_map<uint64_t, std::optional<SourceLocation>> cache_;
};

}  // namespace ptsnap::decode
