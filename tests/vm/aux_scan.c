// aux_scan FILE: what an Intel PT stream file holds, by libipt's packet
// decoder (the oracle, no ptsnap code): PSBs, PTW payloads (the ptpmu module's
// sequence numbers), and whether they run without a gap or a repeat.
// Prints one line:
//   bytes B psb P ptw N first F last L gaps G repeats R errors E
// Exits 0 when libipt read the stream without error, 1 otherwise.
#include <intel-pt.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: aux_scan FILE\n");
    return 2;
  }
  FILE* f = fopen(argv[1], "rb");
  if (!f) {
    perror(argv[1]);
    return 2;
  }
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  fseek(f, 0, SEEK_SET);
  uint8_t* buf = malloc(size > 0 ? size : 1);
  if (size > 0 && fread(buf, 1, size, f) != (size_t)size) {
    perror("read");
    return 2;
  }
  fclose(f);
  struct pt_config cfg;
  pt_config_init(&cfg);
  cfg.begin = buf;
  cfg.end = buf + size;
  struct pt_packet_decoder* d = pt_pkt_alloc_decoder(&cfg);
  unsigned long long psb = 0, ptw = 0, first = 0, last = 0, gaps = 0, repeats = 0, errors = 0;
  int status = d && size > 0 ? pt_pkt_sync_forward(d) : -pte_eos;
  while (status >= 0) {
    struct pt_packet p;
    status = pt_pkt_next(d, &p, sizeof p);
    if (status == -pte_eos) break;
    if (status < 0) {
      errors++;
      status = pt_pkt_sync_forward(d);
      continue;
    }
    if (p.type == ppt_psb) psb++;
    if (p.type == ppt_ptw) {
      uint64_t v = p.payload.ptw.payload;
      if (ptw == 0) {
        first = v;
      } else if (v == last) {
        repeats++;
      } else if (v != last + 1) {
        gaps++;
      }
      last = v;
      ptw++;
    }
  }
  printf("bytes %ld psb %llu ptw %llu first %llu last %llu gaps %llu repeats %llu errors %llu\n",
         size, psb, ptw, first, last, gaps, repeats, errors);
  pt_pkt_free_decoder(d);
  free(buf);
  return errors ? 1 : 0;
}
