/* Marks on the timeline: handles 10,000 "requests" and marks each request's
 * id with ptsnap_mark() before handling it; every 1,000th request (ids 999,
 * 1999, ...) is deliberately slow. In the trace, the mark in front of a long
 * handle_request() names the request that was slow.
 *
 *   cc -std=c99 -O1 requests.c $(pkg-config --cflags ptsnap) -o requests
 *   ptsnap run --emulate -- ./requests        # any machine (qemu-user)
 *   ptsnap run -- ./requests                  # Intel PT: the emulated encoding
 *   ptsnap run --ptw -- ./requests            # Intel PT with PTWRITE
 *
 * ptsnap/mark.h is header-only: nothing to link. Prints the sum of the
 * work's results, so the work cannot be optimised away. */
#include <ptsnap/mark.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define REQUESTS 10000

/* Some work whose size the request decides. */
__attribute__((noinline)) static uint64_t handle_request(uint64_t id, long units) {
  uint64_t h = id;
  long i;
  for (i = 0; i < units; ++i) h = h * 6364136223846793005u + 1442695040888963407u;
  return h;
}

int main(int argc, char** argv) {
  const long requests = argc > 1 ? atol(argv[1]) : REQUESTS;
  uint64_t sum = 0;
  long id;
  for (id = 0; id < requests; ++id) {
    const long units = id % 1000 == 999 ? 200000 : 200; /* a few slow ones */
    ptsnap_mark((uint64_t)id);
    sum += handle_request((uint64_t)id, units);
  }
  ptsnap_mark_str("done");
  printf("%ld requests, checksum %016llx\n", requests, (unsigned long long)sum);
  return 0;
}
