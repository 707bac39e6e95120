// ptsnap-emulate-check DIR: decodes every stream the plugin left in DIR (its
// raw output, before the driver builds the trace directory) and compares the
// instruction count and address hash with the plugin's. Development aid used
// by tools/bench-emulate; exits 1 on any mismatch or decode error.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <variant>
#include <vector>

#include "emulate/decode_check.h"
#include "emulate/plugin_protocol.h"

using namespace ptsnap::emulate;

namespace {

int Main(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "usage: %s PLUGIN_OUT_DIR [family model stepping]\n", argv[0]);
    return 2;
  }
  std::filesystem::path dir = argv[1];
  DecodeCheckOptions opts;
  if (argc >= 5) {
    opts.cpu_family = std::stoul(argv[2]);
    opts.cpu_model = std::stoul(argv[3], nullptr, 0);
    opts.cpu_stepping = std::stoul(argv[4]);
  }
  int bad = 0;
  // All processes' mappings: a forked child inherits its parent's.
  std::vector<ImageSection> sections;
  std::vector<StreamMessage> streams;
  for (const auto& ent : std::filesystem::directory_iterator(dir)) {
    std::string name = ent.path().filename();
    if (name.rfind("events.", 0) != 0) continue;
    std::ifstream in(ent.path(), std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), {});
    auto messages = ParseMessages(text);
    if (!messages) {
      std::printf("%s: %s\n", name.c_str(), messages.error().ToString().c_str());
      bad = 1;
      continue;
    }
    for (auto& m : *messages) {
      if (const auto* mm = std::get_if<MmapMessage>(&m)) {
        sections.push_back({mm->path, mm->pgoff, mm->len, mm->addr});
      } else if (auto* s = std::get_if<StreamMessage>(&m)) {
        streams.push_back(std::move(*s));
      }
    }
  }
  for (const auto& s : streams) {
    std::ifstream f(dir / s.file, std::ios::binary);
    std::vector<uint8_t> bytes((std::istreambuf_iterator<char>(f)), {});
    auto r = DecodeCheck(bytes, sections, opts);
    if (!r) {
      std::printf("%s: %s\n", s.file.c_str(), r.error().message().c_str());
      bad = 1;
      continue;
    }
    bool ok =
        r->errors == 0 && r->insns == s.insns && (s.hash == kStreamHashSeed || r->hash == s.hash);
    std::printf("%s: %s plugin %llu insns, decoded %llu insns, %llu bytes, errors %llu %s%s\n",
                s.file.c_str(), ok ? "OK" : "MISMATCH", static_cast<unsigned long long>(s.insns),
                static_cast<unsigned long long>(r->insns),
                static_cast<unsigned long long>(bytes.size()),
                static_cast<unsigned long long>(r->errors), r->first_error.c_str(),
                r->hash == s.hash ? " hash-equal" : " hash-differs");
    if (!ok) bad = 1;
  }
  return bad;
}

}  // namespace

int main(int argc, char** argv) {
  try {
    return Main(argc, argv);
  } catch (const std::exception& e) {  // std::stoul on bad arguments, filesystem errors
    std::fprintf(stderr, "%s: %s\n", argv[0], e.what());
    return 2;
  }
}
