// The C ABI (ptsnap/ptsnap.h) over the C++ API. Every entry point catches
// everything: no exception may cross into C. Failures store their message
// in a thread-local string that ptsnap_last_error() returns.
#include "ptsnap/ptsnap.h"

#include <charconv>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "api/option_table.h"
#include "base/string_util.h"
#include "ptsnap/decoder.h"
#include "ptsnap/probe.h"
#include "ptsnap/recording.h"

struct ptsnap_options {
  ptsnap::RecordingOptions options;
};

struct ptsnap_decoder {
  std::optional<ptsnap::Decoder> decoder;
  ptsnap_mark_callback on_mark = nullptr;
};

namespace ptsnap::capi {

thread_local std::string g_last_error;

ptsnap_status Fail(ptsnap_status status, std::string message) {
  g_last_error = std::move(message);
  return status;
}

ptsnap_status ToStatus(ptsnap::ErrorKind kind) {
  using K = ptsnap::ErrorKind;
  switch (kind) {
    case K::kNoPmu: return PTSNAP_ERR_NO_PMU;
    case K::kPrivilege: return PTSNAP_ERR_PRIVILEGE;
    case K::kBufferMapping: return PTSNAP_ERR_BUFFER_MAPPING;
    case K::kTraceDirExists: return PTSNAP_ERR_TRACE_DIR_EXISTS;
    case K::kProcessGone: return PTSNAP_ERR_PROCESS_GONE;
    case K::kTrigger: return PTSNAP_ERR_TRIGGER;
    case K::kUsage: return PTSNAP_ERR_USAGE;
    case K::kOther: break;
  }
  return PTSNAP_ERR_OTHER;
}

ptsnap_status Fail(const ptsnap::Error& e) { return Fail(ToStatus(e.kind()), e.ToString()); }

ptsnap_status Invalid(std::string message) {
  return Fail(PTSNAP_ERR_INVALID_ARGUMENT, std::move(message));
}

// Runs `body` (returning ptsnap_status), turning any exception into
// PTSNAP_ERR_OTHER.
template <class F>
ptsnap_status Guard(F&& body) noexcept {
  try {
    return body();
  } catch (const std::exception& e) {
    return Fail(PTSNAP_ERR_OTHER, std::string("internal error: ") + e.what());
  } catch (...) {
    return Fail(PTSNAP_ERR_OTHER, "internal error: unknown exception");
  }
}

char* CopyString(const std::string& s) {
  char* p = static_cast<char*>(std::malloc(s.size() + 1));
  if (p != nullptr) std::memcpy(p, s.c_str(), s.size() + 1);
  return p;
}

// The C ABI's keys are the option table's (api/option_table.h).
ptsnap_status SetOption(ptsnap::RecordingOptions& o, std::string_view key, std::string_view value) {
  const ptsnap::api::OptionSpec* spec = ptsnap::api::FindRecordingOption(key);
  if (spec == nullptr)
    return Invalid("unknown option \"" + std::string(key) +
                   "\" (known: " + ptsnap::api::RecordingOptionKeys() + ")");
  if (auto set = spec->set(o, value); !set)
    return Invalid("option \"" + std::string(key) + "\": " + set.error().message());
  return PTSNAP_OK;
}

class EventForwarder final : public ptsnap::RecordingListener {
 public:
  EventForwarder(ptsnap_event_fn fn, void* user) : fn_(fn), user_(user) {}
  void OnEvent(const ptsnap::RecordingEvent& e) override {
    if (fn_ == nullptr) return;
    try {
      message_.assign(e.message);
    } catch (...) {
      message_.clear();
    }
    fn_(user_, static_cast<int>(e.kind), message_.c_str(), e.snapshot);
  }

 private:
  ptsnap_event_fn fn_;
  void* user_;
  std::string message_;  // NUL-terminated copy, reused
};

static_assert(static_cast<int>(ptsnap::RecordingEvent::Kind::kStarted) == PTSNAP_EVENT_STARTED);
static_assert(static_cast<int>(ptsnap::RecordingEvent::Kind::kInfo) == PTSNAP_EVENT_INFO);
static_assert(static_cast<int>(ptsnap::RecordingEvent::Kind::kWarning) == PTSNAP_EVENT_WARNING);
static_assert(static_cast<int>(ptsnap::RecordingEvent::Kind::kSnapshot) == PTSNAP_EVENT_SNAPSHOT);
static_assert(static_cast<int>(ptsnap::RecordingEvent::Kind::kDataLost) == PTSNAP_EVENT_DATA_LOST);
static_assert(static_cast<int>(ptsnap::RecordingEvent::Kind::kTargetExited) ==
              PTSNAP_EVENT_TARGET_EXITED);

class CallbackListener final : public ptsnap::DecodeListener {
 public:
  CallbackListener(const ptsnap_decode_callbacks* cb, ptsnap_mark_callback on_mark, void* user)
      : cb_(cb), on_mark_(on_mark), user_(user) {}
  void OnMark(const ptsnap::DecodedMark& m) override {
    if (on_mark_ != nullptr) on_mark_(user_, m.pid, m.tid, m.ts_ns, m.value);
  }
  void OnThread(int32_t pid, int32_t tid, std::string_view name) override {
    if (cb_ == nullptr || cb_->on_thread == nullptr) return;
    name_.assign(name);
    cb_->on_thread(user_, pid, tid, name_.c_str(), name_.size());
  }
  void OnSlice(const ptsnap::DecodedSlice& s) override {
    if (cb_ == nullptr || cb_->on_slice == nullptr) return;
    name_.assign(s.name);
    dso_.assign(s.dso);
    ptsnap_slice c{};
    c.pid = s.pid;
    c.tid = s.tid;
    c.begin_ns = s.begin_ns;
    c.end_ns = s.end_ns;
    c.address = s.address;
    c.name = name_.c_str();
    c.name_len = name_.size();
    c.dso = dso_.c_str();
    c.dso_len = dso_.size();
    c.inferred = s.inferred ? 1 : 0;
    cb_->on_slice(user_, &c);
  }

 private:
  const ptsnap_decode_callbacks* cb_;
  ptsnap_mark_callback on_mark_;
  void* user_;
  std::string name_, dso_;  // NUL-terminated copies, reused
};

ptsnap_status Summary(const ptsnap::DecodeSummary& s, char** summary_json) {
  if (summary_json == nullptr) return PTSNAP_OK;
  *summary_json = CopyString(s.ToJson());
  if (*summary_json == nullptr) return Fail(PTSNAP_ERR_OTHER, "out of memory");
  return PTSNAP_OK;
}

ptsnap_status Finish(const ptsnap::Result<ptsnap::RecordingResult>& r, int* program_status) {
  if (!r) return Fail(r.error());
  if (program_status != nullptr) *program_status = r->program_status;
  return PTSNAP_OK;
}

}  // namespace ptsnap::capi

using namespace ptsnap::capi;  // NOLINT(build/namespaces): this file's helpers

// Owns the listener the C++ Recording points to; declared before the
// recording, so it is destroyed after it.
struct ptsnap_recording {
  std::unique_ptr<ptsnap::capi::EventForwarder> forwarder;
  std::optional<ptsnap::Recording> recording;
  std::string trace_dir;
};

extern "C" {

const char* ptsnap_version(void) { return ptsnap::Version(); }

const char* ptsnap_last_error(void) { return g_last_error.c_str(); }

void ptsnap_free(void* p) { std::free(p); }

char* ptsnap_probe_json(void) {
  try {
    return CopyString(ptsnap::Probe().json);
  } catch (...) {
    return nullptr;
  }
}

int ptsnap_probe_pt_available(void) {
  try {
    return ptsnap::Probe().pt_available ? 1 : 0;
  } catch (...) {
    return 0;
  }
}

ptsnap_options* ptsnap_options_new(void) {
  try {
    return new ptsnap_options();
  } catch (...) {
    return nullptr;
  }
}

ptsnap_status ptsnap_options_set(ptsnap_options* options, const char* key, const char* value) {
  return Guard([&] {
    if (options == nullptr || key == nullptr || value == nullptr)
      return Invalid("ptsnap_options_set: options, key and value must not be NULL");
    return SetOption(options->options, key, value);
  });
}

ptsnap_status ptsnap_options_add_arg(ptsnap_options* options, const char* arg) {
  return Guard([&] {
    if (options == nullptr || arg == nullptr)
      return Invalid("ptsnap_options_add_arg: options and arg must not be NULL");
    options->options.command.emplace_back(arg);
    return PTSNAP_OK;
  });
}

void ptsnap_options_free(ptsnap_options* options) { delete options; }

ptsnap_status ptsnap_recording_create(const ptsnap_options* options, ptsnap_event_fn on_event,
                                      void* user, ptsnap_recording** out) {
  return Guard([&] {
    if (options == nullptr || out == nullptr)
      return Invalid("ptsnap_recording_create: options and out must not be NULL");
    *out = nullptr;
    auto handle = std::make_unique<ptsnap_recording>();
    handle->forwarder = std::make_unique<EventForwarder>(on_event, user);
    auto rec = ptsnap::Recording::Create(options->options, handle->forwarder.get());
    if (!rec) return Fail(rec.error());
    handle->trace_dir = rec->trace_dir().string();
    handle->recording.emplace(std::move(*rec));
    *out = handle.release();
    return PTSNAP_OK;
  });
}

ptsnap_status ptsnap_recording_start(ptsnap_recording* rec) {
  return Guard([&] {
    if (rec == nullptr) return Invalid("ptsnap_recording_start: rec must not be NULL");
    auto r = rec->recording->Start();
    return r ? PTSNAP_OK : Fail(r.error());
  });
}

ptsnap_status ptsnap_recording_snapshot(ptsnap_recording* rec, const char* reason, uint32_t* seq) {
  return Guard([&] {
    if (rec == nullptr) return Invalid("ptsnap_recording_snapshot: rec must not be NULL");
    auto r = rec->recording->Snapshot(reason != nullptr ? reason : "");
    if (!r) return Fail(r.error());
    if (seq != nullptr) *seq = r->seq;
    return PTSNAP_OK;
  });
}

void ptsnap_recording_request_stop(ptsnap_recording* rec) {
  if (rec != nullptr) rec->recording->RequestStop();
}

ptsnap_status ptsnap_recording_stop(ptsnap_recording* rec, int* program_status) {
  return Guard([&] {
    if (rec == nullptr) return Invalid("ptsnap_recording_stop: rec must not be NULL");
    return Finish(rec->recording->Stop(), program_status);
  });
}

ptsnap_status ptsnap_recording_wait(ptsnap_recording* rec, int* program_status) {
  return Guard([&] {
    if (rec == nullptr) return Invalid("ptsnap_recording_wait: rec must not be NULL");
    return Finish(rec->recording->Wait(), program_status);
  });
}

const char* ptsnap_recording_trace_dir(const ptsnap_recording* rec) {
  return rec != nullptr ? rec->trace_dir.c_str() : "";
}

void ptsnap_recording_free(ptsnap_recording* rec) {
  try {
    delete rec;
  } catch (...) {
  }
}

ptsnap_status ptsnap_decoder_open(const char* trace_dir, uint32_t snapshot, ptsnap_decoder** out) {
  return Guard([&] {
    if (trace_dir == nullptr || out == nullptr)
      return Invalid("ptsnap_decoder_open: trace_dir and out must not be NULL");
    *out = nullptr;
    ptsnap::DecodeOptions o;
    o.snapshot = snapshot;
    auto d = ptsnap::Decoder::Open(trace_dir, o);
    if (!d) return Fail(d.error());
    auto handle = std::make_unique<ptsnap_decoder>();
    handle->decoder.emplace(std::move(*d));
    *out = handle.release();
    return PTSNAP_OK;
  });
}

ptsnap_status ptsnap_decoder_set(ptsnap_decoder* decoder, const char* key, const char* value) {
  return Guard([&] {
    if (decoder == nullptr || key == nullptr || value == nullptr)
      return Invalid("ptsnap_decoder_set: decoder, key and value must not be NULL");
    const std::string_view k(key), v(value);
    const ptsnap::api::DecodeOptionSpec* spec = ptsnap::api::FindDecodeOption(k);
    if (spec == nullptr)
      return Invalid("unknown decode option \"" + std::string(k) +
                     "\" (known: " + ptsnap::api::DecodeOptionKeys() + ")");
    ptsnap::DecodeOptions o = decoder->decoder->options();
    if (auto set = spec->set(o, v); !set)
      return Invalid("option \"" + std::string(k) + "\": " + set.error().message());
    decoder->decoder->set_options(std::move(o));
    return PTSNAP_OK;
  });
}

ptsnap_status ptsnap_decoder_set_mark_callback(ptsnap_decoder* decoder,
                                               ptsnap_mark_callback on_mark) {
  if (decoder == nullptr)
    return ptsnap::capi::Invalid("ptsnap_decoder_set_mark_callback: decoder must not be NULL");
  decoder->on_mark = on_mark;
  return PTSNAP_OK;
}

ptsnap_status ptsnap_decoder_decode(ptsnap_decoder* decoder,
                                    const ptsnap_decode_callbacks* callbacks, void* user,
                                    char** summary_json) {
  return Guard([&] {
    if (summary_json != nullptr) *summary_json = nullptr;
    if (decoder == nullptr) return Invalid("ptsnap_decoder_decode: decoder must not be NULL");
    CallbackListener listener(callbacks, decoder->on_mark, user);
    auto r = decoder->decoder->Decode(listener);
    if (!r) return Fail(r.error());
    return Summary(*r, summary_json);
  });
}

ptsnap_status ptsnap_decoder_write(ptsnap_decoder* decoder, const char* output, const char* format,
                                   char** summary_json) {
  return Guard([&] {
    if (summary_json != nullptr) *summary_json = nullptr;
    if (decoder == nullptr || output == nullptr)
      return Invalid("ptsnap_decoder_write: decoder and output must not be NULL");
    auto r = decoder->decoder->WriteFile(output, format != nullptr ? format : "");
    if (!r) return Fail(r.error());
    return Summary(*r, summary_json);
  });
}

void ptsnap_decoder_free(ptsnap_decoder* decoder) {
  try {
    delete decoder;
  } catch (...) {
  }
}

}  // extern "C"
