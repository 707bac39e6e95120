# A test program with a known call structure for the decoder's tests.
# Written in assembly so that every branch is known and the tests can encode
# the exact Intel PT packets the CPU would write (tests/programs/decode/README.md).
# It also runs: ./decode_calls exits with status 0.
        .text
        .globl  _start
        .type   _start, @function
_start:
        call    main
        mov     %eax, %edi
        mov     $60, %eax               # exit
        syscall
        .size   _start, .-_start

        .globl  main
        .type   main, @function
main:
        call    mid                     # main -> mid -> leaf
        call    tail_caller             # tail_caller jmp leaf
        lea     leaf(%rip), %rax
        call    *%rax                   # indirect call: TIP
        mov     $39, %eax               # getpid: a syscall in user-only trace
        syscall
        .globl  main_after_syscall
main_after_syscall:
        mov     $6, %edi
        call    fib                     # fib(6): 25 calls
        lea     main_landing(%rip), %rcx
        call    lj1                     # lj1 -> lj2 -> jmp *%rcx (longjmp)
        .globl  main_landing
main_landing:
        xor     %eax, %eax
        ret
        .size   main, .-main

        .globl  mid
        .type   mid, @function
mid:
        call    leaf
        ret
        .size   mid, .-mid

        .globl  leaf
        .type   leaf, @function
leaf:
        ret
        .size   leaf, .-leaf

        .globl  tail_caller
        .type   tail_caller, @function
tail_caller:
        jmp     leaf
        .size   tail_caller, .-tail_caller

# int fib(int n) { return n < 2 ? n : fib(n-1) + fib(n-2); }
        .globl  fib
        .type   fib, @function
fib:
        cmp     $2, %edi
        jl      1f                      # TNT: taken for n < 2
        push    %rbx
        push    %rbp
        mov     %edi, %ebx
        lea     -1(%rbx), %edi
        call    fib
        mov     %eax, %ebp
        lea     -2(%rbx), %edi
        call    fib
        add     %ebp, %eax
        pop     %rbp
        pop     %rbx
        ret
1:      mov     %edi, %eax
        ret
        .size   fib, .-fib

        .globl  lj1
        .type   lj1, @function
lj1:
        call    lj2
        ret
        .size   lj1, .-lj1

        .globl  lj2
        .type   lj2, @function
lj2:
        jmp     *%rcx                   # like longjmp: lands mid-function in main
        .size   lj2, .-lj2

        .section .note.GNU-stack,"",@progbits
