/* C parts of the test kernel, compiled like kernel C: -mcmodel=kernel
   -ffreestanding -fno-pic, no red zone, no SSE. Straight-line code: the
   tests walk it instruction by instruction without a script. */
long fault_count;
long bytes_written;

__attribute__((noinline)) long handle_mm_fault(unsigned long address) {
  fault_count += 1;
  return (long)(address & 4095);
}

__attribute__((noinline)) long account_write(long n) {
  bytes_written += n;
  return n;
}
