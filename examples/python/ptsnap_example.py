#!/usr/bin/env python3
"""ptsnap from Python through the C ABI (ptsnap/ptsnap.h) and ctypes.

    ptsnap_example.py PROGRAM [ARGS...]

Records PROGRAM under the emulator (PTSNAP_HARDWARE=1: Intel PT) until it
exits, decodes the whole trace with callbacks and prints the slice count
and the functions with the most total time. libptsnap.so.0 is found via
$PTSNAP_LIB, else the loader's search path (LD_LIBRARY_PATH, ldconfig).
"""
import collections
import ctypes
import ctypes.util
import os
import sys
import tempfile

PTSNAP_OK = 0


def load():
    path = os.environ.get("PTSNAP_LIB") or ctypes.util.find_library("ptsnap") or "libptsnap.so.0"
    lib = ctypes.CDLL(path)
    vp = ctypes.c_void_p
    lib.ptsnap_version.restype = ctypes.c_char_p
    lib.ptsnap_last_error.restype = ctypes.c_char_p
    lib.ptsnap_options_new.restype = vp
    lib.ptsnap_options_set.argtypes = [vp, ctypes.c_char_p, ctypes.c_char_p]
    lib.ptsnap_options_add_arg.argtypes = [vp, ctypes.c_char_p]
    lib.ptsnap_options_free.argtypes = [vp]
    lib.ptsnap_recording_create.argtypes = [vp, vp, vp, ctypes.POINTER(vp)]
    lib.ptsnap_recording_start.argtypes = [vp]
    lib.ptsnap_recording_wait.argtypes = [vp, ctypes.POINTER(ctypes.c_int)]
    lib.ptsnap_recording_trace_dir.argtypes = [vp]
    lib.ptsnap_recording_trace_dir.restype = ctypes.c_char_p
    lib.ptsnap_recording_free.argtypes = [vp]
    lib.ptsnap_decoder_open.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(vp)]
    lib.ptsnap_decoder_decode.argtypes = [vp, vp, vp, vp]
    lib.ptsnap_decoder_free.argtypes = [vp]
    return lib


class Slice(ctypes.Structure):
    _fields_ = [
        ("pid", ctypes.c_int32),
        ("tid", ctypes.c_int32),
        ("begin_ns", ctypes.c_uint64),
        ("end_ns", ctypes.c_uint64),
        ("address", ctypes.c_uint64),
        ("name", ctypes.c_char_p),
        ("name_len", ctypes.c_size_t),
        ("dso", ctypes.c_char_p),
        ("dso_len", ctypes.c_size_t),
        ("inferred", ctypes.c_int),
    ]


ON_THREAD = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int32, ctypes.c_int32,
                             ctypes.c_char_p, ctypes.c_size_t)
ON_SLICE = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.POINTER(Slice))


class Callbacks(ctypes.Structure):
    _fields_ = [("on_thread", ON_THREAD), ("on_slice", ON_SLICE)]


def check(lib, status, what):
    if status != PTSNAP_OK:
        sys.exit("ptsnap_example: %s: %s (status %d)" %
                 (what, lib.ptsnap_last_error().decode(errors="replace"), status))


def main(argv):
    if len(argv) < 2:
        sys.exit("usage: ptsnap_example.py PROGRAM [ARGS...]")
    lib = load()
    print("libptsnap", lib.ptsnap_version().decode())

    work = tempfile.mkdtemp(prefix="ptsnap-py-")
    options = lib.ptsnap_options_new()
    emulate = b"0" if os.environ.get("PTSNAP_HARDWARE") == "1" else b"1"
    check(lib, lib.ptsnap_options_set(options, b"emulate", emulate), "emulate")
    check(lib, lib.ptsnap_options_set(options, b"trace-dir",
                                      os.path.join(work, "trace").encode()), "trace-dir")
    for arg in argv[1:]:
        check(lib, lib.ptsnap_options_add_arg(options, arg.encode()), "argument")

    rec = ctypes.c_void_p()
    check(lib, lib.ptsnap_recording_create(options, None, None, ctypes.byref(rec)), "create")
    lib.ptsnap_options_free(options)
    check(lib, lib.ptsnap_recording_start(rec), "start")
    status = ctypes.c_int()
    check(lib, lib.ptsnap_recording_wait(rec, ctypes.byref(status)), "wait")
    trace_dir = lib.ptsnap_recording_trace_dir(rec)
    print("program exited with status %d; trace in %s" % (status.value, trace_dir.decode()))

    decoder = ctypes.c_void_p()
    check(lib, lib.ptsnap_decoder_open(trace_dir, 0, ctypes.byref(decoder)), "open")
    lib.ptsnap_recording_free(rec)

    threads = []
    totals = collections.Counter()
    calls = collections.Counter()

    def on_thread(_user, pid, tid, name, length):
        threads.append((pid, tid, name[:length].decode(errors="replace")))

    def on_slice(_user, s):
        s = s.contents
        name = s.name[:s.name_len].decode(errors="replace")
        totals[name] += s.end_ns - s.begin_ns
        calls[name] += 1

    callbacks = Callbacks(ON_THREAD(on_thread), ON_SLICE(on_slice))
    check(lib, lib.ptsnap_decoder_decode(decoder, ctypes.byref(callbacks), None, None),
          "decode")
    lib.ptsnap_decoder_free(decoder)

    print("%d slices on %d thread(s); hottest functions by total time:" %
          (sum(calls.values()), len(threads)))
    for name, total in totals.most_common(5):
        print("  %-30s %10d calls %14d ns" % (name, calls[name], total))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
