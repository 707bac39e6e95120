/* ptsnap's C ABI: the same recording, snapshot and decode as the C++ API
 * (ptsnap/recording.h, ptsnap/decoder.h, ptsnap/probe.h) for C, Go (cgo),
 * Rust (FFI) and Python (ctypes). Opaque handles, status codes with a
 * message getter, callbacks with a user pointer. docs/api.md.
 *
 * ABI rules: handles are opaque and only ever passed by pointer; options
 * are strings set by key, so new options never change a signature; enums
 * only grow at the end. No function throws or aborts on bad input: a NULL
 * handle or string where one is required is PTSNAP_ERR_INVALID_ARGUMENT.
 *
 * Threads and signals: as ptsnap::Recording. Every function may be called
 * from any thread; ptsnap_recording_request_stop() is also safe in a signal
 * handler. The library installs no signal handlers. */
#ifndef PTSNAP_PTSNAP_H_
#define PTSNAP_PTSNAP_H_

#include <stddef.h>
#include <stdint.h>

#include "ptsnap/export.h"
#include "ptsnap/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What a call returned. PTSNAP_OK is 0; the rest mirror ptsnap::ErrorKind
 * (ptsnap/result.h) and ptsnap_last_error() has the message. */
typedef enum {
  PTSNAP_OK = 0,
  PTSNAP_ERR_OTHER = 1,
  PTSNAP_ERR_NO_PMU = 2,           /* no intel_pt PMU (VM, old CPU, AMD) */
  PTSNAP_ERR_PRIVILEGE = 3,        /* perf_event_paranoid or capabilities */
  PTSNAP_ERR_BUFFER_MAPPING = 4,   /* mmap of a ring failed (locked-memory limit) */
  PTSNAP_ERR_TRACE_DIR_EXISTS = 5, /* refusing to overwrite a recording */
  PTSNAP_ERR_PROCESS_GONE = 6,     /* the process exited or never existed */
  PTSNAP_ERR_TRIGGER = 7,          /* the trigger could not be resolved */
  PTSNAP_ERR_USAGE = 8,            /* options that cannot work together */
  PTSNAP_ERR_INVALID_ARGUMENT = 9  /* a NULL handle, an unknown option or a bad value */
} ptsnap_status;

/* The library's version, "0.1.0". */
PTSNAP_API const char* ptsnap_version(void);

/* The message of the calling thread's last failed call ("" if none):
 * "outer context: inner: message: strerror". Valid until the thread's next
 * ptsnap call. */
PTSNAP_API const char* ptsnap_last_error(void);

/* Frees what ptsnap returned as `char*` (JSON texts). NULL is fine. */
PTSNAP_API void ptsnap_free(void* p);

/* ---- Probe -------------------------------------------------------------- */

/* `ptsnap probe --json`'s document (docs/probe.md); never fails except for
 * memory (NULL). Free with ptsnap_free(). */
PTSNAP_API char* ptsnap_probe_json(void);
/* 1 if hardware (Intel PT) recording is possible here, else 0. */
PTSNAP_API int ptsnap_probe_pt_available(void);

/* ---- Recording options -------------------------------------------------- */

/* Options by key, spelled like `ptsnap run` flags without the dashes (the
 * keys are one table's, src/api/option_table.cpp; its test checks that this
 * list names each):
 *   "emulate"          "1"/"0" (also true/false/yes/no): qemu-user instead of Intel PT
 *   "emulate-waits"    "1"/"0": with "emulate", each syscall's wall time is added to
 *                      its thread's virtual clock (sleeps, I/O, waits show); default 0
 *   "sampling"         "1"/"0": stack samples instead of Intel PT (not with "emulate")
 *   "callgraph-mode"   with sampling: fp | dwarf | lbr | lbr-no-stitch; "" = the default
 *                      (lbr where the CPU has it, else dwarf); checked at create
 *   "trace-dir"        where the recording goes (must not exist)
 *   "trigger"          symbol, "addr:HEX" or "." (ptsnap/stop_indicator.h)
 *   "filter"           address filters, `ptsnap run --filter`'s syntax ("work_a",
 *                      "filter FUNC @ FILE, tracestop FUNC"); checked at create
 *   "only-in"          trace only while this function runs (`--only-in`); checked at create
 *   "slower-than"      with a function "trigger": snapshot when a call of it returns
 *                      after at least this long ("2ms", "500us"; `--slower-than`)
 *   "snapshot-size"    bytes or "4M", "256K"
 *   "timer-resolution" low | normal | high | custom:KEY=VAL,... (sampling: sample:N too)
 *   "full-execution", "multi-snapshot", "multi-thread", "copy-binaries"  booleans
 *   "ptw"              "1"/"0": record PTWRITE for ptsnap_mark() (ptsnap/mark.h);
 *                      hardware with caps/ptwrite only; default 0
 *   "pwr-evt"          "1"/"0": record power events (C-state changes, shown as
 *                      "[C-state Cn]" frames); hardware with
 *                      caps/power_event_trace only; default 0
 *   "duration-ms"      stop after this many milliseconds; 0: no limit
 *   "pid"              attach to this process (appends; repeat for more)
 *   "scope"            user | kernel | both
 *   "all-cpus"         "1"/"0": the whole system, one trace per CPU (`ptsnap attach -a`)
 *   "cpu"              with all-cpus, only these CPUs: a list such as "0-3,7"
 *                      (sets all-cpus, as `-C` implies `-a`)
 *   "stop-signal"      number or name (SIGINT, TERM, ...) sent to the program
 *                      at stop; 0 or "none": nothing (either way it gets SIGTERM
 *                      0.4 s later and SIGKILL 0.5 s after that)
 *   "after"            kill | wait | detach: the program when recording ends
 *                      before it exits (duration, the trigger's snapshot);
 *                      default kill; detach leaves it running, a child of
 *                      the caller to reap
 * ptsnap_options_add_arg() appends to the program's argv (the first is the
 * program, found in PATH). An unknown key or a bad value is
 * PTSNAP_ERR_INVALID_ARGUMENT, the message naming the key and what it
 * accepts; the options are unchanged then. */
typedef struct ptsnap_options ptsnap_options;

PTSNAP_API ptsnap_options* ptsnap_options_new(void);
PTSNAP_API ptsnap_status ptsnap_options_set(ptsnap_options* options, const char* key,
                                            const char* value);
PTSNAP_API ptsnap_status ptsnap_options_add_arg(ptsnap_options* options, const char* arg);
PTSNAP_API void ptsnap_options_free(ptsnap_options* options);

/* ---- Recording ---------------------------------------------------------- */

/* The kinds of event a recording reports (ptsnap::RecordingEvent::Kind). */
enum {
  PTSNAP_EVENT_STARTED = 0,      /* tracing is on */
  PTSNAP_EVENT_INFO = 1,         /* progress */
  PTSNAP_EVENT_WARNING = 2,      /* something to know; recording goes on */
  PTSNAP_EVENT_SNAPSHOT = 3,     /* a snapshot was written; `snapshot` is its number */
  PTSNAP_EVENT_DATA_LOST = 4,    /* PT bytes or sideband records were lost */
  PTSNAP_EVENT_TARGET_EXITED = 5 /* the program, or every traced process, exited */
};

/* Called on the recording's own thread; `message` (one line, NUL-terminated)
 * is valid during the call. Keep it short. */
typedef void (*ptsnap_event_fn)(void* user, int kind, const char* message, uint32_t snapshot);

typedef struct ptsnap_recording ptsnap_recording;

/* Checks everything that can be checked without starting anything (see
 * ptsnap::Recording::Create). `options` is copied; `on_event` may be NULL;
 * `user` must stay valid for the recording's life. */
PTSNAP_API ptsnap_status ptsnap_recording_create(const ptsnap_options* options,
                                                 ptsnap_event_fn on_event, void* user,
                                                 ptsnap_recording** out);
/* Starts the program or attaches; returns once tracing is on. */
PTSNAP_API ptsnap_status ptsnap_recording_start(ptsnap_recording* rec);
/* Takes a snapshot now; `reason` (may be NULL) goes into the manifest.
 * `*seq` (may be NULL) gets its number, for ptsnap_decoder_open(). */
PTSNAP_API ptsnap_status ptsnap_recording_snapshot(ptsnap_recording* rec, const char* reason,
                                                   uint32_t* seq);
/* Asks the recording to end, without waiting. Async-signal-safe. */
PTSNAP_API void ptsnap_recording_request_stop(ptsnap_recording* rec);
/* Ends the recording and waits until the trace directory is complete.
 * `*program_status` (may be NULL): the program's shell-style exit status. */
PTSNAP_API ptsnap_status ptsnap_recording_stop(ptsnap_recording* rec, int* program_status);
/* Waits until the recording ends by itself (the program exits, ...). */
PTSNAP_API ptsnap_status ptsnap_recording_wait(ptsnap_recording* rec, int* program_status);
/* The trace directory; valid as long as `rec`. */
PTSNAP_API const char* ptsnap_recording_trace_dir(const ptsnap_recording* rec);
/* Stops a recording still running, waits for it and frees it. NULL is fine. */
PTSNAP_API void ptsnap_recording_free(ptsnap_recording* rec);

/* ---- Decoding ----------------------------------------------------------- */

/* One call of a function on one thread (ptsnap::DecodedSlice). `name` and
 * `dso` are NUL-terminated and valid only during the callback; `*_len`
 * excludes the NUL. `inferred`: its start was not seen. */
typedef struct {
  int32_t pid, tid;
  uint64_t begin_ns, end_ns;
  uint64_t address; /* the function's entry; 0 for pseudo frames ("[syscall]") */
  const char* name;
  size_t name_len;
  const char* dso; /* "" when unknown */
  size_t dso_len;
  int inferred;
} ptsnap_slice;

/* Any callback may be NULL. Strings as in ptsnap_slice. Calls come per
 * thread in order of the slices' ends; a thread is named before its first
 * slice. */
typedef struct {
  void (*on_thread)(void* user, int32_t pid, int32_t tid, const char* name, size_t name_len);
  void (*on_slice)(void* user, const ptsnap_slice* slice);
} ptsnap_decode_callbacks;

typedef struct ptsnap_decoder ptsnap_decoder;

/* A mark (docs/decoding.md, "Marks"): a value the traced program wrote with
 * ptsnap_mark() (ptsnap/mark.h) or PTWRITE, on thread `tid` at `ts_ns`. */
typedef void (*ptsnap_mark_callback)(void* user, int32_t pid, int32_t tid, uint64_t ts_ns,
                                     uint64_t value);

/* Opens a trace directory; `snapshot` 0 decodes all of it, N only snapshot
 * N. Errors: not a trace directory, a corrupt manifest, no such snapshot. */
PTSNAP_API ptsnap_status ptsnap_decoder_open(const char* trace_dir, uint32_t snapshot,
                                             ptsnap_decoder** out);
/* Sets a decode option by its `ptsnap decode` flag name, without the
 * leading dashes: "decoder" ("ours" or "libipt"), "max-depth" (N frames, "0":
 * no limit), "min-duration" (a duration such as "1us"; "0": none) (both
 * thin what ptsnap_decoder_write writes), "no-inline" ("true" or "false":
 * no frames for inlined calls), "debug-dir" (a folder of separate debug
 * files, searched before /usr/lib/debug; each call adds one). Errors
 * (PTSNAP_ERR_INVALID_ARGUMENT): an unknown key or value. */
PTSNAP_API ptsnap_status ptsnap_decoder_set(ptsnap_decoder* decoder, const char* key,
                                            const char* value);
/* Decodes, calling `callbacks` (may be NULL) on this thread. With
 * `summary_json` non-NULL, `*summary_json` gets the summary (counts, hottest
 * functions: DecodeSummary::ToJson()); free it with ptsnap_free(). */
PTSNAP_API ptsnap_status ptsnap_decoder_decode(ptsnap_decoder* decoder,
                                               const ptsnap_decode_callbacks* callbacks, void* user,
                                               char** summary_json);
/* Writes the decoded trace to `output`; `format` "fxt", "json", "events" or
 * NULL/"" to pick it from the suffix. `summary_json` as above. */
PTSNAP_API ptsnap_status ptsnap_decoder_write(ptsnap_decoder* decoder, const char* output,
                                              const char* format, char** summary_json);
PTSNAP_API void ptsnap_decoder_free(ptsnap_decoder* decoder);
/* Calls `on_mark` (NULL: none) with the user pointer of each later
 * ptsnap_decoder_decode for every mark, in the order of the slices around it. */
PTSNAP_API ptsnap_status ptsnap_decoder_set_mark_callback(ptsnap_decoder* decoder,
                                                          ptsnap_mark_callback on_mark);

#ifdef __cplusplus
}
#endif

#endif /* PTSNAP_PTSNAP_H_ */
