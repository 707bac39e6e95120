// C++ exceptions for the timing tests: catcher() calls middle(), which calls thrower(); for even
// arguments thrower() throws and the exception is caught in catcher(), two frames up, through
// libgcc's unwinder (statically linked). after_catch() runs once the exception is handled. The
// functions are extern "C" so that their symbols are their plain names.
//
// In a static program crtbeginT.o registers .eh_frame with __register_frame_info, and the first
// throw then sorts every FDE of the program: 2.8 million instructions, half a minute under
// ptsnap-stepcount. meson.build links this program with --wrap for the two registry functions,
// so the calls land in the no-ops below, and with --eh-frame-hdr, so the unwinder finds FDEs
// through dl_iterate_phdr and .eh_frame_hdr's binary search table, as in a dynamic program. A
// throw then costs about 14k instructions (the first one a little more than the later ones).
#include <cstdio>

extern "C" {

void __wrap___register_frame_info(const void*, void*) {}
void* __wrap___deregister_frame_info(const void*) { return nullptr; }

__attribute__((noinline)) int thrower(int i) {
  if (i % 2 == 0) throw i;
  return i * 3;
}

__attribute__((noinline)) int middle(int i) { return thrower(i) + 1; }

__attribute__((noinline)) int after_catch(int value) { return value * 5 + 2; }

__attribute__((noinline)) int catcher(int i) {
  int value;
  try {
    value = middle(i);
  } catch (int thrown) {
    value = -thrown;
  }
  return after_catch(value);
}

}  // extern "C"

int main() {
  int sum = 0;
  for (int i = 0; i < 6; ++i) sum += catcher(i);
  std::printf("exception = %d\n", sum);
  return 0;
}
