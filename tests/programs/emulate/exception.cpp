// C++ throw/catch through libstdc++ and libgcc_s's unwinder.
#include <cstdio>
#include <stdexcept>

__attribute__((noinline)) int thrower(int i) {
  if (i % 3 == 0) throw std::runtime_error("boom");
  return i;
}

int main() {
  int caught = 0, sum = 0;
  for (int i = 0; i < 30; ++i) {
    try {
      sum += thrower(i);
    } catch (const std::exception&) {
      ++caught;
    }
  }
  std::printf("%d %d\n", caught, sum);
  return 0;
}
