// The C ABI (ptsnap/ptsnap.h) over the C++ API.
#include "ptsnap/ptsnap.h"

#include "ptsnap/probe.h"

extern "C" {

const char* ptsnap_version(void) { return ptsnap::Version(); }

}  // extern "C"
