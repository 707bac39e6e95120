/* The user half of the kernel tests: a real static program (no libc) that
   enters the kernel in every way the tests need. Run for real it prints
   "hello\n" twice and exits 0:
     - say_hello: write(1, "hello\n", 6) through `syscall`;
     - touch_page: the first store to a .bss page (a genuine page fault);
     - compute: a short loop, where the tests deliver a timer interrupt;
     - finish: a last call, after which _start calls exit(0). */
	.text
	.globl _start
	.type _start, @function
_start:
	xorl %ebp, %ebp
	call main
	movl $60, %eax          /* exit(0) */
	xorl %edi, %edi
	syscall
	hlt
	.size _start, . - _start

	.globl main
	.type main, @function
main:
	pushq %rbp
	movq %rsp, %rbp
	call say_hello
	call touch_page
	call compute
	call say_hello
	call finish
	popq %rbp
	ret
	.size main, . - main

	.globl say_hello
	.type say_hello, @function
say_hello:
	movl $1, %eax           /* write */
	movl $1, %edi
	leaq msg(%rip), %rsi
	movl $6, %edx
	syscall
	call check_result
	ret
	.size say_hello, . - say_hello

	.globl check_result
	.type check_result, @function
check_result:
	testq %rax, %rax
	js 1f                   /* an error: not taken when write succeeds */
	ret
1:	negq %rax
	ret
	.size check_result, . - check_result

	.globl touch_page
	.type touch_page, @function
touch_page:
	leaq page(%rip), %rax
	movl $1, (%rax)         /* first touch of a .bss page: page fault */
	movl (%rax), %eax
	ret
	.size touch_page, . - touch_page

	.globl compute
	.type compute, @function
compute:
	xorl %eax, %eax
	movl $3, %ecx
1:	addl %ecx, %eax
	decl %ecx
	jnz 1b
	ret
	.size compute, . - compute

	.globl finish
	.type finish, @function
finish:
	movl $0, %eax
	ret
	.size finish, . - finish

	.section .rodata
msg:	.ascii "hello\n"

	.bss
	.balign 4096
page:	.skip 4096

	.section .note.GNU-stack, "", @progbits
