// kcore_peek FILE segments        print each PT_LOAD: vaddr size offset
// kcore_peek FILE read ADDR LEN   print LEN bytes at virtual address ADDR as hex
// kcore_peek FILE raw ADDR LEN    write them as they are, to stdout
// An independent reader of /proc/kcore and of kcore copies (ptsnap's kcore/kcore,
// perf's kcore_dir/kcore): the VM suite compares what ptsnap copied with the
// live bytes through it. It shares no code with ptsnap.
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: kcore_peek FILE segments | read ADDR LEN\n");
    return 2;
  }
  int fd = open(argv[1], O_RDONLY);
  if (fd < 0) {
    perror(argv[1]);
    return 1;
  }
  Elf64_Ehdr eh;
  if (pread(fd, &eh, sizeof eh, 0) != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0) {
    fprintf(stderr, "%s: not an ELF file\n", argv[1]);
    return 1;
  }
  Elf64_Phdr* ph = calloc(eh.e_phnum, sizeof *ph);
  if (pread(fd, ph, eh.e_phnum * sizeof *ph, eh.e_phoff) != (ssize_t)(eh.e_phnum * sizeof *ph)) {
    fprintf(stderr, "%s: short program headers\n", argv[1]);
    return 1;
  }
  if (strcmp(argv[2], "segments") == 0) {
    for (int i = 0; i < eh.e_phnum; i++)
      if (ph[i].p_type == PT_LOAD)
        printf("0x%llx 0x%llx 0x%llx\n", (unsigned long long)ph[i].p_vaddr,
               (unsigned long long)ph[i].p_filesz, (unsigned long long)ph[i].p_offset);
    return 0;
  }
  int raw = strcmp(argv[2], "raw") == 0;
  if ((raw || strcmp(argv[2], "read") == 0) && argc == 5) {
    unsigned long long addr = strtoull(argv[3], NULL, 0), len = strtoull(argv[4], NULL, 0);
    for (int i = 0; i < eh.e_phnum; i++) {
      if (ph[i].p_type != PT_LOAD) continue;
      if (addr < ph[i].p_vaddr || addr + len > ph[i].p_vaddr + ph[i].p_filesz) continue;
      unsigned char* buf = malloc(len);
      ssize_t got = pread(fd, buf, len, ph[i].p_offset + (addr - ph[i].p_vaddr));
      if (got != (ssize_t)len) {
        fprintf(stderr, "short read at 0x%llx\n", addr);
        return 1;
      }
      if (raw) return fwrite(buf, 1, len, stdout) == len ? 0 : 1;
      for (unsigned long long j = 0; j < len; j++) printf("%02x", buf[j]);
      printf("\n");
      return 0;
    }
    fprintf(stderr, "0x%llx+%llu is in no PT_LOAD of %s\n", addr, len, argv[1]);
    return 3;
  }
  fprintf(stderr, "usage: kcore_peek FILE segments | read|raw ADDR LEN\n");
  return 2;
}
