/* ptsnap's C ABI: the same recording, snapshot and decode as the C++ API
 * (ptsnap/recording.h, ptsnap/decoder.h, ptsnap/probe.h) for C, Go (cgo),
 * Rust (FFI) and Python (ctypes). Opaque handles, status codes with a
 * message getter, callbacks with a user pointer. docs/api.md. */
#ifndef PTSNAP_PTSNAP_H_
#define PTSNAP_PTSNAP_H_

#include "ptsnap/export.h"
#include "ptsnap/version.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The library's version, "0.1.0". */
PTSNAP_API const char* ptsnap_version(void);

#ifdef __cplusplus
}
#endif

#endif /* PTSNAP_PTSNAP_H_ */
