/* The spin kernel in PTX, for GPU tests and experiments that need a kernel
 * of their own without nvcc: spin(flag, done) waits until the 32-bit word
 * at flag is non-zero, then writes 1 at done. Load it with
 * cuModuleLoadData(&mod, uroce_spin_ptx), function "spin". */
#ifndef UROCE_SPIN_PTX_H
#define UROCE_SPIN_PTX_H

/* spin(flag, done): while (*(volatile unsigned *)flag == 0); *done = 1;
 * (nvcc -ptx -arch=compute_80 of those two lines) */
static const char uroce_spin_ptx[] =
	".version 7.0\n"
	".target sm_80\n"
	".address_size 64\n"
	"	// .globl	spin\n"
	".visible .entry spin(\n"
	"	.param .u64 spin_param_0,\n"
	"	.param .u64 spin_param_1\n"
	")\n"
	"{\n"
	"	.reg .pred 	%p<2>;\n"
	"	.reg .b32 	%r<3>;\n"
	"	.reg .b64 	%rd<5>;\n"
	"	ld.param.u64 	%rd3, [spin_param_0];\n"
	"	ld.param.u64 	%rd4, [spin_param_1];\n"
	"	cvta.to.global.u64 	%rd1, %rd4;\n"
	"	cvta.to.global.u64 	%rd2, %rd3;\n"
	"$L__BB0_1:\n"
	"	ld.volatile.global.u32 	%r1, [%rd2];\n"
	"	setp.eq.s32 	%p1, %r1, 0;\n"
	"	@%p1 bra 	$L__BB0_1;\n"
	"	mov.u32 	%r2, 1;\n"
	"	st.global.u32 	[%rd1], %r2;\n"
	"	ret;\n"
	"}\n";

#endif
