; ModuleID = '__compute_module_reduce_add_fusion_kernel_module'
source_filename = "__compute_module_reduce_add_fusion_kernel_module"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

%XLA_CPU_KernelCallFrame = type { ptr, ptr, i64, ptr }
%XLA_CPU_KernelArg = type { ptr, i64 }
%kernel_dim3 = type { i64, i64, i64 }

; Function Attrs: uwtable
define ptr @reduce_add_fusion(ptr %0) #0 {
  %2 = getelementptr inbounds %XLA_CPU_KernelCallFrame, ptr %0, i32 0, i32 3
  %3 = load ptr, ptr %2, align 8, !invariant.load !3
  %4 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 0, i32 0
  %5 = load ptr, ptr %4, align 8, !invariant.load !3, !dereferenceable !4
  %6 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 1, i32 0
  %7 = load ptr, ptr %6, align 8, !invariant.load !3, !dereferenceable !5
  %8 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 2, i32 0
  %9 = load ptr, ptr %8, align 8, !invariant.load !3, !dereferenceable !6
  %10 = getelementptr inbounds %XLA_CPU_KernelCallFrame, ptr %0, i32 0, i32 1
  %11 = load ptr, ptr %10, align 8
  %12 = getelementptr inbounds %kernel_dim3, ptr %11, i32 0, i32 0
  %13 = load i64, ptr %12, align 4, !invariant.load !3
  %14 = getelementptr inbounds %kernel_dim3, ptr %11, i32 0, i32 1
  %15 = load i64, ptr %14, align 4, !invariant.load !3
  %16 = getelementptr inbounds %kernel_dim3, ptr %11, i32 0, i32 2
  %17 = load i64, ptr %16, align 4, !invariant.load !3
  call void @reduce_add_fusion_wrapped(ptr %5, ptr %7, ptr %9, i64 %13, i64 %15, i64 %17)
  ret ptr null
}

; Function Attrs: alwaysinline
define internal void @reduce_add_fusion_wrapped(ptr noalias align 64 dereferenceable(512) %0, ptr noalias align 64 dereferenceable(8) %1, ptr noalias align 64 dereferenceable(4) %2, i64 %3, i64 %4, i64 %5) #1 {
  br label %7

7:                                                ; preds = %11, %6
  %8 = phi i64 [ %15, %11 ], [ 0, %6 ]
  %9 = phi float [ %14, %11 ], [ 0.000000e+00, %6 ]
  %10 = icmp slt i64 %8, 2
  br i1 %10, label %11, label %16

11:                                               ; preds = %7
  %12 = getelementptr inbounds [2 x float], ptr %1, i32 0, i64 %8
  %13 = load float, ptr %12, align 4, !invariant.load !3
  %14 = fadd reassoc float %9, %13
  %15 = add i64 %8, 1
  br label %7

16:                                               ; preds = %7
  br label %17

17:                                               ; preds = %33, %16
  %18 = phi i64 [ %34, %33 ], [ 0, %16 ]
  %19 = phi float [ %25, %33 ], [ 0.000000e+00, %16 ]
  %20 = icmp slt i64 %18, 8
  br i1 %20, label %21, label %35

21:                                               ; preds = %17
  %22 = mul nsw i64 %18, 16
  br label %23

23:                                               ; preds = %27, %21
  %24 = phi i64 [ %32, %27 ], [ 0, %21 ]
  %25 = phi float [ %31, %27 ], [ %19, %21 ]
  %26 = icmp slt i64 %24, 16
  br i1 %26, label %27, label %33

27:                                               ; preds = %23
  %28 = add nsw i64 %22, %24
  %29 = getelementptr inbounds [128 x float], ptr %0, i32 0, i64 %28
  %30 = load float, ptr %29, align 4, !invariant.load !3
  %31 = fadd reassoc float %25, %30
  %32 = add i64 %24, 1
  br label %23

33:                                               ; preds = %23
  %34 = add i64 %18, 1
  br label %17, !llvm.loop !7

35:                                               ; preds = %17
  %36 = fadd float %9, %19
  %37 = getelementptr inbounds [1 x float], ptr %2, i32 0, i32 0
  store float %36, ptr %37, align 4
  ret void
}

attributes #0 = { uwtable "frame-pointer"="all" "prefer-vector-width"="256" }
attributes #1 = { alwaysinline }

!llvm.module.flags = !{!0, !1}
!xla_cpu_memory_region_name = !{!2}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 1}
!2 = !{!"xla_cpu_emitter__loop_fusion_kernel_emitter__hlo_opcode__fusion"}
!3 = !{}
!4 = !{i64 512}
!5 = !{i64 8}
!6 = !{i64 4}
!7 = distinct !{!7, !8}
!8 = !{!"llvm.loop.unroll.disable"}
