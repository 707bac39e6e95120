/* A "module" (ptsnap_kmod): text that the linker script places in the
   module area at 0xffffffffc0000000, reached from the kernel only through
   function pointers, as real module code is. */
	.section .kmod.text, "ax", @progbits

	.globl kmod_write
	.type kmod_write, @function
kmod_write:
	pushq %rbp
	movq %rsp, %rbp
	call kmod_copy_from_user
	popq %rbp
	ret
	.size kmod_write, . - kmod_write

	.globl kmod_copy_from_user
	.type kmod_copy_from_user, @function
kmod_copy_from_user:
	movq %rdx, %rax
	ret
	.size kmod_copy_from_user, . - kmod_copy_from_user

	.globl kmod_timer_tick
	.type kmod_timer_tick, @function
kmod_timer_tick:
	xorl %eax, %eax
	ret
	.size kmod_timer_tick, . - kmod_timer_tick

	.section .note.GNU-stack, "", @progbits
