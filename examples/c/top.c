/* The agent example in C over ptsnap.h: records PROGRAM (emulated unless
 * AGENT_HARDWARE=1), snapshots when a line arrives on stdin, stops, decodes
 * the snapshot with callbacks and prints the functions with the most total
 * time.
 *
 *   cc -std=c99 top.c $(pkg-config --cflags --libs ptsnap) -o top
 *   ./top PROGRAM [ARGS...] */
#include <ptsnap/ptsnap.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_FUNCS 4096

struct func {
  char* name;
  uint64_t calls, total_ns;
};

struct counts {
  struct func funcs[MAX_FUNCS];
  size_t n;
  uint64_t slices;
};

static void on_slice(void* user, const ptsnap_slice* s) {
  struct counts* c = user;
  size_t i;
  c->slices++;
  for (i = 0; i < c->n; i++)
    if (strcmp(c->funcs[i].name, s->name) == 0) break;
  if (i == c->n) {
    if (c->n == MAX_FUNCS) return;
    c->funcs[i].name = malloc(s->name_len + 1);
    if (c->funcs[i].name == NULL) return;
    memcpy(c->funcs[i].name, s->name, s->name_len + 1); /* name is NUL-terminated */
    c->n++;
  }
  c->funcs[i].calls++;
  c->funcs[i].total_ns += s->end_ns - s->begin_ns;
}

static void on_event(void* user, int kind, const char* message, uint32_t snapshot) {
  (void)user;
  (void)snapshot;
  if (kind == PTSNAP_EVENT_WARNING || kind == PTSNAP_EVENT_DATA_LOST)
    fprintf(stderr, "top: warning: %s\n", message);
}

static int by_total(const void* a, const void* b) {
  const struct func* x = a;
  const struct func* y = b;
  return x->total_ns < y->total_ns ? 1 : x->total_ns > y->total_ns ? -1 : 0;
}

static int fail(const char* what) {
  fprintf(stderr, "top: %s: %s\n", what, ptsnap_last_error());
  return 1;
}

int main(int argc, char** argv) {
  static struct counts counts;
  ptsnap_options* options;
  ptsnap_recording* rec = NULL;
  ptsnap_decoder* decoder = NULL;
  ptsnap_decode_callbacks callbacks = {NULL, on_slice};
  const char* hw = getenv("AGENT_HARDWARE");
  const char* dir = getenv("AGENT_TRACE_DIR");
  char line[256];
  uint32_t seq = 0;
  int status = 0, i;
  size_t k;

  if (argc < 2) {
    fprintf(stderr, "usage: top PROGRAM [ARGS...]\n");
    return 2;
  }
  options = ptsnap_options_new();
  if (options == NULL) return 1;
  if (ptsnap_options_set(options, "emulate", hw != NULL && strcmp(hw, "1") == 0 ? "0" : "1") !=
      PTSNAP_OK)
    return fail("options");
  if (dir != NULL && ptsnap_options_set(options, "trace-dir", dir) != PTSNAP_OK)
    return fail("options");
  for (i = 1; i < argc; i++)
    if (ptsnap_options_add_arg(options, argv[i]) != PTSNAP_OK) return fail("options");

  if (ptsnap_recording_create(options, on_event, NULL, &rec) != PTSNAP_OK)
    return fail("cannot record");
  ptsnap_options_free(options);
  if (ptsnap_recording_start(rec) != PTSNAP_OK) return fail("start");
  printf("recording %s into %s; send a line to snapshot\n", argv[1],
         ptsnap_recording_trace_dir(rec));
  fflush(stdout);

  if (fgets(line, sizeof line, stdin) == NULL) line[0] = '\0'; /* "snap" or end of input */
  if (ptsnap_recording_snapshot(rec, "stdin", &seq) != PTSNAP_OK) return fail("snapshot");
  if (ptsnap_recording_stop(rec, &status) != PTSNAP_OK) return fail("stop");
  printf("snapshot %u taken; program exited with status %d\n", (unsigned)seq, status);

  if (ptsnap_decoder_open(ptsnap_recording_trace_dir(rec), seq, &decoder) != PTSNAP_OK)
    return fail("open");
  if (ptsnap_decoder_decode(decoder, &callbacks, &counts, NULL) != PTSNAP_OK) return fail("decode");
  ptsnap_decoder_free(decoder);
  ptsnap_recording_free(rec);

  qsort(counts.funcs, counts.n, sizeof counts.funcs[0], by_total);
  printf("%llu slices in snapshot %u; hottest functions by total time:\n",
         (unsigned long long)counts.slices, (unsigned)seq);
  for (k = 0; k < counts.n && k < 5; k++)
    printf("  %-30s %10llu calls %14llu ns\n", counts.funcs[k].name,
           (unsigned long long)counts.funcs[k].calls, (unsigned long long)counts.funcs[k].total_ns);
  for (k = 0; k < counts.n; k++) free(counts.funcs[k].name);
  return 0;
}
