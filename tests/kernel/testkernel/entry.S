/* The test kernel's entry code: the syscall entry, the dispatcher, the write
   path (with a static-key style jump site), the page-fault path and a timer
   interrupt, each leaving the kernel with sysret or iret as Linux's
   arch/x86/entry/entry_64.S does. Built with -mcmodel=kernel and linked at
   0xffffffff81000000 by kernel.ld; never executed, only decoded. */
	.text

	.globl entry_SYSCALL_64
	.type entry_SYSCALL_64, @function
entry_SYSCALL_64:
	swapgs
	pushq %rcx              /* user RIP */
	pushq %r11              /* user RFLAGS */
	movq %rax, %rdi         /* syscall number */
	movq %rsp, %rsi
	call do_syscall_64
	popq %r11
	popq %rcx
	swapgs
	sysretq
	.size entry_SYSCALL_64, . - entry_SYSCALL_64

	.globl do_syscall_64
	.type do_syscall_64, @function
do_syscall_64:
	pushq %rbp
	movq %rsp, %rbp
	cmpq $NR_SYSCALLS, %rdi
	jae 1f                          /* out of range: -ENOSYS */
	movq sys_call_table(,%rdi,8), %rax
	call *%rax                      /* indirect: a TIP in the trace */
	popq %rbp
	ret
1:	movq $-38, %rax
	popq %rbp
	ret
	.size do_syscall_64, . - do_syscall_64

	.globl sys_ni_syscall
	.type sys_ni_syscall, @function
sys_ni_syscall:
	movq $-38, %rax
	ret
	.size sys_ni_syscall, . - sys_ni_syscall

	.globl ksys_write
	.type ksys_write, @function
ksys_write:
	pushq %rbp
	movq %rsp, %rbp
	call fdget_pos
	call vfs_write
	popq %rbp
	ret
	.size ksys_write, . - ksys_write

	.globl fdget_pos
	.type fdget_pos, @function
fdget_pos:
	movq %rdi, %rax
	ret
	.size fdget_pos, . - fdget_pos

	.globl vfs_write
	.type vfs_write, @function
vfs_write:
	pushq %rbp
	movq %rsp, %rbp
	/* A static key (jump label): a 5-byte jmp while the key is on, which
	   the kernel rewrites into a 5-byte nop (text_poke) when it is turned
	   off. The tests patch it and record a TEXT_POKE for it. */
	.globl __jump_site_vfs_write
__jump_site_vfs_write:
	.byte 0xe9
	.long .Ltrace_write - (. + 4)
.Lwrite_body:
	movq kmod_write_op, %rax
	call *%rax                      /* into the module (file_operations->write) */
	movq %rax, %rdi
	call account_write              /* C, compiled with -mcmodel=kernel */
	popq %rbp
	ret
.Ltrace_write:
	testq %rdi, %rdi
	jz .Lwrite_body                 /* a conditional: the tracepoint path */
	call trace_vfs_write
	jmp .Lwrite_body
	.size vfs_write, . - vfs_write

	.globl trace_vfs_write
	.type trace_vfs_write, @function
trace_vfs_write:
	movq %rdi, %rax
	ret
	.size trace_vfs_write, . - trace_vfs_write

	.globl asm_exc_page_fault
	.type asm_exc_page_fault, @function
asm_exc_page_fault:
	pushq %rdi
	pushq %rsi
	movq %cr2, %rdi
	movq %rsp, %rsi
	call exc_page_fault
	popq %rsi
	popq %rdi
	addq $8, %rsp           /* the error code */
	iretq
	.size asm_exc_page_fault, . - asm_exc_page_fault

	.globl exc_page_fault
	.type exc_page_fault, @function
exc_page_fault:
	pushq %rbp
	movq %rsp, %rbp
	call handle_mm_fault
	popq %rbp
	ret
	.size exc_page_fault, . - exc_page_fault

	.globl asm_sysvec_apic_timer_interrupt
	.type asm_sysvec_apic_timer_interrupt, @function
asm_sysvec_apic_timer_interrupt:
	pushq %rax
	pushq %rdi
	call sysvec_apic_timer_interrupt
	popq %rdi
	popq %rax
	iretq
	.size asm_sysvec_apic_timer_interrupt, . - asm_sysvec_apic_timer_interrupt

	.globl sysvec_apic_timer_interrupt
	.type sysvec_apic_timer_interrupt, @function
sysvec_apic_timer_interrupt:
	pushq %rbp
	movq %rsp, %rbp
	movq kmod_tick_op, %rax
	call *%rax                      /* the module's timer hook */
	popq %rbp
	ret
	.size sysvec_apic_timer_interrupt, . - sysvec_apic_timer_interrupt

	.section .rodata
	.set NR_SYSCALLS, 2
	.globl sys_call_table
	.type sys_call_table, @object
sys_call_table:
	.quad sys_ni_syscall    /* 0: read (not implemented here) */
	.quad ksys_write        /* 1: write */
	.size sys_call_table, . - sys_call_table

	.data
	.globl kmod_write_op, kmod_tick_op
kmod_write_op:
	.quad kmod_write
kmod_tick_op:
	.quad kmod_timer_tick

	.section .note.GNU-stack, "", @progbits
