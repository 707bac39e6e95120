// bpf_load SECONDS: load the smallest BPF program (a socket filter returning 0),
// keep it loaded for SECONDS, print its fd. With the JIT on (Debian's default),
// loading it makes the kernel emit PERF_RECORD_KSYMBOL for its code.
#define _GNU_SOURCE
#include <linux/bpf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

int main(int argc, char** argv) {
  int seconds = argc > 1 ? atoi(argv[1]) : 1;
  struct bpf_insn insns[2] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
      {.code = BPF_JMP | BPF_EXIT},
  };
  union bpf_attr attr;
  memset(&attr, 0, sizeof attr);
  attr.prog_type = BPF_PROG_TYPE_SOCKET_FILTER;
  attr.insns = (unsigned long)insns;
  attr.insn_cnt = 2;
  attr.license = (unsigned long)"GPL";
  strcpy(attr.prog_name, "ptsnap_vm");
  int fd = syscall(SYS_bpf, BPF_PROG_LOAD, &attr, sizeof attr);
  if (fd < 0) {
    perror("bpf(BPF_PROG_LOAD)");
    return 1;
  }
  printf("loaded bpf program fd %d\n", fd);
  fflush(stdout);
  sleep(seconds);
  return 0;
}
