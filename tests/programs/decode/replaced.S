# A second program for the decoder's tests, linked at the same address as
# calls.S (static, no PIE: text at 0x401000) with different code there, so
# that a test can tell which image decoded which stretch: an exec or an mmap
# that replaces calls.S's text, or another process on the same CPU.
# It also runs: ./decode_replaced exits with status 0.
        .text
        .globl  _start
        .type   _start, @function
_start:
        call    alpha                   # _start -> alpha -> beta, beta
        xor     %edi, %edi
        mov     $60, %eax               # exit
        syscall
        .size   _start, .-_start

        .globl  alpha
        .type   alpha, @function
alpha:
        call    beta
        call    beta
        ret
        .size   alpha, .-alpha

        .globl  beta
        .type   beta, @function
beta:
        ret
        .size   beta, .-beta

        .section .note.GNU-stack,"",@progbits
