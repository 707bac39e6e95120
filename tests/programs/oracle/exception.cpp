// C++ exceptions for the call-stack oracle, at -O2: thrower() throws from thrower.cold (the
// throw is a call of the noreturn __cxa_throw, so GCC moves it out of the hot code); middle()
// holds an object with a destructor, so its landing pad is a cleanup that runs the destructor and
// calls _Unwind_Resume; catcher()'s handler sits in catcher.cold, reached from its landing pad by
// a jump. libgcc's unwinder leaves the frames above each landing pad at once. As in
// tests/programs/timing/exception.cpp, the .eh_frame registry is bypassed (meson.build links
// with --wrap and --eh-frame-hdr), so a throw costs about 14k instructions, not millions.
#include "print_result.h"

#define NOINLINE __attribute__((noinline, noclone))

extern "C" {
void __wrap___register_frame_info(const void*, void*) {}
void* __wrap___deregister_frame_info(const void*) { return nullptr; }
}

static volatile long sink;

NOINLINE void release(long x) { sink = sink + x; }

struct Guard {
  long x;
  ~Guard() { release(x); }
};

NOINLINE long thrower(long i) {
  if (__builtin_expect(i % 3 == 0, 0)) throw i;
  return i * 3 + sink;
}

NOINLINE long middle(long i) {
  Guard guard{i};
  return thrower(i) * 2 + sink;
}

NOINLINE long catcher(long i) {
  try {
    return middle(i) + 1;
  } catch (long thrown) {
    return -thrown + sink;
  }
}

int main() {
  long acc = 0;
  for (long i = 0; i < 5; ++i) acc += catcher(i);
  print_result("exception =", acc);
  return 0;
}
