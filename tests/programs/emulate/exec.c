// execve: one attempt that fails (no such file), then /bin/true replaces the
// program; ptsnap's plugin follows it (docs/emulation.md, "exec").
#include <stdio.h>
#include <unistd.h>

__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(void) {
  char* argv[] = {"true", NULL};
  long r = fib(12);
  execv("/nonexistent/ptsnap-no-such-program", argv);
  r += fib(11);
  execv("/bin/true", argv);
  return (int)r;
}
