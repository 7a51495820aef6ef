#include "textflag.h"

// func adagradAVX(w, norm, grad *float32, n int, lr, wd float32)
//
// The reference's Avx256AdagradOptimize (avx_utils.h) for n values, n a multiple of 8, with the
// same instructions: per block of 8, g = wd*w + grad (fused), norm = g*g + norm (fused),
// w = -(lr/sqrt(norm))*grad + w (fused).
TEXT ·adagradAVX(SB), NOSPLIT, $0-40
	MOVQ         w+0(FP), DI
	MOVQ         norm+8(FP), SI
	MOVQ         grad+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS lr+32(FP), Y0
	VBROADCASTSS wd+36(FP), Y1

loop:
	CMPQ         CX, $8
	JLT          done
	VMOVUPS      (DI), Y2           // w
	VMOVUPS      (SI), Y3           // norm
	VMOVUPS      (DX), Y4           // grad
	VMOVAPS      Y4, Y5
	VFMADD231PS  Y2, Y1, Y5         // g = wd*w + grad
	VFMADD231PS  Y5, Y5, Y3         // norm = g*g + norm
	VMOVUPS      Y3, (SI)
	VSQRTPS      Y3, Y6
	VDIVPS       Y6, Y0, Y7         // lr / sqrt(norm)
	VFNMADD231PS Y4, Y7, Y2         // w = -(eff*grad) + w
	VMOVUPS      Y2, (DI)
	ADDQ         $32, DI
	ADDQ         $32, SI
	ADDQ         $32, DX
	SUBQ         $8, CX
	JMP          loop

done:
	VZEROUPPER
	RET

// func cpuid(eaxArg, ecxArg uint32) (eax, ebx, ecx, edx uint32)
TEXT ·cpuid(SB), NOSPLIT, $0-24
	MOVL eaxArg+0(FP), AX
	MOVL ecxArg+4(FP), CX
	CPUID
	MOVL AX, eax+8(FP)
	MOVL BX, ebx+12(FP)
	MOVL CX, ecx+16(FP)
	MOVL DX, edx+20(FP)
	RET

// func xgetbv() (eax, edx uint32)
TEXT ·xgetbv(SB), NOSPLIT, $0-8
	MOVL $0, CX
	XGETBV
	MOVL AX, eax+0(FP)
	MOVL DX, edx+4(FP)
	RET
