// A C++ exception crossing three frames: main -> outer -> middle -> inner,
// inner throws, main catches. Decoding must close inner, middle and outer
// (and the unwinder's frames) when the landing pad in main is reached.
#include <cstdio>
#include <stdexcept>

__attribute__((noinline)) int inner(int i) {
  if (i % 2 == 0) throw std::runtime_error("boom");
  return i;
}
__attribute__((noinline)) int middle(int i) { return inner(i) + 1; }
__attribute__((noinline)) int outer(int i) { return middle(i) + 1; }

int main() {
  int caught = 0, sum = 0;
  for (int i = 0; i < 4; ++i) {
    try {
      sum += outer(i);
    } catch (const std::exception&) {
      ++caught;
    }
  }
  std::printf("%d %d\n", caught, sum);
  return 0;
}
