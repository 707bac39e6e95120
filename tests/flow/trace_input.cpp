#include "tests/flow/trace_input.h"

#include "decode/libipt.h"
#include "decode/pt_decoder.h"
#include "trace/trace_dir.h"

namespace ptsnap::flow::testing {

Result<TraceInput> LoadTrace(const std::filesystem::path& dir) {
  PTSNAP_ASSIGN_OR_RETURN(auto reader, trace::TraceReader::Open(dir));
  TraceInput in;
  in.manifest = reader.manifest();
  std::vector<trace::Record> records;
  if (auto sb = reader.ReadSideband(); sb) records = sb->records;
  PTSNAP_ASSIGN_OR_RETURN(auto dec, decode::PtDecoder::Create(dir, in.manifest, records));
  for (const auto& st : in.manifest.streams) {
    auto bytes = reader.ReadStream(st);
    if (!bytes) continue;
    TraceStream s;
    s.pid = st.pid;
    s.bytes = std::move(*bytes);
    s.code = std::make_unique<CodeImage>();
    for (const auto& m : dec->CodeMappings(dec->LastSpace(st.pid))) {
      auto path = m.file.is_absolute() ? m.file : dir / m.file;
      (void)s.code->AddFile(path.string(), m.pgoff, m.end - m.start, m.start);
    }
    s.config = decode::MakePtConfig(in.manifest);
    in.streams.push_back(std::move(s));
  }
  for (auto& s : in.streams) {
    s.config.begin = reinterpret_cast<uint8_t*>(s.bytes.data());
    s.config.end = s.config.begin + s.bytes.size();
  }
  return in;
}

}  // namespace ptsnap::flow::testing
