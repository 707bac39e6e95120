# Marks for the decoder's tests (docs/decoding.md, "Marks"): perf's emulated
# PTWRITE in two shapes, and a PTWRITE instruction. Static, no libc, fixed
# addresses; the tests write its streams by hand (it is never run: PTWRITE
# is an invalid opcode on CPUs without it).
        .text
        .globl  _start
        .type   _start, @function
_start:
        mov     $0x6f6c6c6548, %rdi
        call    ptsnap_emulate_ptwrite
        call    perf_emulate_ptwrite
        mov     %rdi, %rax
        call    hw_mark
        xor     %edi, %edi
        mov     $60, %eax               # exit
        syscall
        .size   _start, .-_start

# The shape ptsnap's mark.h writes: each `jc` jumps over a one-byte `nop`,
# so that taken and not taken reach different instructions.
        .macro  BIT_NOP
        shl     %rax
        jc      1f
        nop
1:
        .endm
        .globl  ptsnap_emulate_ptwrite
        .type   ptsnap_emulate_ptwrite, @function
ptsnap_emulate_ptwrite:
        jmp     1f
        .byte   0x0f, 0x0b
        .ascii  "perf,ptwrite  "
1:      mov     %rdi, %rax
        .rept   64
        BIT_NOP
        .endr
        ret
        .size   ptsnap_emulate_ptwrite, .-ptsnap_emulate_ptwrite

# perf's own (tools/perf/Documentation/perf-intel-pt.txt): each `jc` jumps
# to the next instruction, taken or not.
        .macro  BIT_NEXT
        shl     %rax
        jc      1f
1:
        .endm
        .globl  perf_emulate_ptwrite
        .type   perf_emulate_ptwrite, @function
perf_emulate_ptwrite:
        jmp     1f
        .byte   0x0f, 0x0b
        .ascii  "perf,ptwrite  "
1:      mov     %rdi, %rax
        .rept   64
        BIT_NEXT
        .endr
        ret
        .size   perf_emulate_ptwrite, .-perf_emulate_ptwrite

        .globl  hw_mark
        .type   hw_mark, @function
hw_mark:
        .byte   0xf3, 0x48, 0x0f, 0xae, 0xe0    # ptwrite %rax
        ret
        .size   hw_mark, .-hw_mark

        .section .note.GNU-stack,"",@progbits
