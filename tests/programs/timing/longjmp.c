// longjmp for the timing tests: catcher() calls setjmp, then middle(), which calls jumper(); for
// odd arguments jumper() longjmps back into catcher(), two frames up, ending jumper's and
// middle's frames at once. after_jump() runs after either path.
#include <setjmp.h>
#include <stdio.h>

static jmp_buf env;

__attribute__((noinline)) void jumper(int i) {
  if (i % 2 != 0) longjmp(env, i);
}

__attribute__((noinline)) int middle(int i) {
  jumper(i);
  return i * 3;
}

__attribute__((noinline)) int after_jump(int value) { return value * 5 + 2; }

__attribute__((noinline)) int catcher(int i) {
  volatile int value;
  int jumped = setjmp(env);
  if (jumped == 0) {
    value = middle(i);
  } else {
    value = -jumped;
  }
  return after_jump(value);
}

int main(void) {
  int sum = 0;
  for (int i = 0; i < 6; ++i) sum += catcher(i);
  printf("longjmp = %d\n", sum);
  return 0;
}
