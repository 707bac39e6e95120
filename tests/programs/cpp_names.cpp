// Test program with C++ names, for names typed as users see them
// (elf/symbol_match.h): `--trigger risky`, `ptsnap report DIR risky`.
//
//   cpp_names
//
// Calls risky(int) 3 times, risky(double) twice and
// names::Parser::parse_line(char const*) once, then exits 0.
#include <cstdio>

__attribute__((noinline)) int risky(int x) {
  __asm__ __volatile__("" : : "r"(x) : "memory");
  return x + 1;
}

__attribute__((noinline)) int risky(double x) {
  __asm__ __volatile__("" : : "r"(x) : "memory");
  return static_cast<int>(x) + 2;
}

namespace names {
struct Parser {
  __attribute__((noinline)) static int parse_line(const char* line) {
    int n = 0;
    for (const char* p = line; *p != '\0'; ++p) n += *p == ' ';
    return n;
  }
};
}  // namespace names

int main() {
  int sum = 0;
  for (int i = 0; i < 3; ++i) sum += risky(i);
  for (int i = 0; i < 2; ++i) sum += risky(i * 0.5);
  sum += names::Parser::parse_line("a b c");
  std::printf("%d\n", sum);
  return 0;
}
