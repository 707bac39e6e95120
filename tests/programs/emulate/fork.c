// fork: parent and child both compute, the parent waits.
#include <stdio.h>
#include <sys/wait.h>
#include <unistd.h>

__attribute__((noinline)) long fib(long n) { return n < 2 ? n : fib(n - 1) + fib(n - 2); }

int main(void) {
  pid_t pid = fork();
  long r = fib(pid == 0 ? 12 : 13);
  if (pid == 0) _exit((int)(r & 0x7f));
  int st = 0;
  waitpid(pid, &st, 0);
  printf("%ld %d\n", r, WEXITSTATUS(st));
  return 0;
}
