; ModuleID = '__compute_module_multiply_add_fusion_kernel_module'
source_filename = "__compute_module_multiply_add_fusion_kernel_module"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

%XLA_CPU_KernelCallFrame = type { ptr, ptr, i64, ptr }
%XLA_CPU_KernelArg = type { ptr, i64 }
%kernel_dim3 = type { i64, i64, i64 }

; Function Attrs: uwtable
define ptr @multiply_add_fusion(ptr %0) #0 {
  %2 = getelementptr inbounds %XLA_CPU_KernelCallFrame, ptr %0, i32 0, i32 3
  %3 = load ptr, ptr %2, align 8, !invariant.load !3
  %4 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 0, i32 0
  %5 = load ptr, ptr %4, align 8, !invariant.load !3, !dereferenceable !4
  %6 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 1, i32 0
  %7 = load ptr, ptr %6, align 8, !invariant.load !3, !dereferenceable !4
  %8 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 2, i32 0
  %9 = load ptr, ptr %8, align 8, !invariant.load !3, !dereferenceable !4
  %10 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 3, i32 0
  %11 = load ptr, ptr %10, align 8, !invariant.load !3, !dereferenceable !4
  %12 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 4, i32 0
  %13 = load ptr, ptr %12, align 8, !invariant.load !3, !dereferenceable !4
  %14 = getelementptr inbounds %XLA_CPU_KernelCallFrame, ptr %0, i32 0, i32 1
  %15 = load ptr, ptr %14, align 8
  %16 = getelementptr inbounds %kernel_dim3, ptr %15, i32 0, i32 0
  %17 = load i64, ptr %16, align 4, !invariant.load !3
  %18 = getelementptr inbounds %kernel_dim3, ptr %15, i32 0, i32 1
  %19 = load i64, ptr %18, align 4, !invariant.load !3
  %20 = getelementptr inbounds %kernel_dim3, ptr %15, i32 0, i32 2
  %21 = load i64, ptr %20, align 4, !invariant.load !3
  call void @multiply_add_fusion_wrapped(ptr %5, ptr %7, ptr %9, ptr %11, ptr %13, i64 %17, i64 %19, i64 %21)
  ret ptr null
}

; Function Attrs: alwaysinline
define internal void @multiply_add_fusion_wrapped(ptr noalias align 64 dereferenceable(2048) %0, ptr noalias align 64 dereferenceable(2048) %1, ptr noalias align 64 dereferenceable(2048) %2, ptr noalias align 64 dereferenceable(2048) %3, ptr noalias align 64 dereferenceable(2048) %4, i64 %5, i64 %6, i64 %7) #1 {
  br label %9

9:                                                ; preds = %34, %8
  %10 = phi i64 [ %35, %34 ], [ 0, %8 ]
  %11 = icmp slt i64 %10, 8
  br i1 %11, label %12, label %36

12:                                               ; preds = %9
  %13 = mul nsw i64 %10, 64
  br label %14

14:                                               ; preds = %17, %12
  %15 = phi i64 [ %33, %17 ], [ 0, %12 ]
  %16 = icmp slt i64 %15, 64
  br i1 %16, label %17, label %34

17:                                               ; preds = %14
  %18 = add nsw i64 %13, %15
  %19 = getelementptr inbounds [512 x float], ptr %2, i32 0, i64 %18
  %20 = load float, ptr %19, align 4, !invariant.load !3
  %21 = getelementptr inbounds [512 x float], ptr %3, i32 0, i64 %18
  %22 = load float, ptr %21, align 4, !invariant.load !3
  %23 = fadd float %20, %22
  %24 = getelementptr inbounds [512 x float], ptr %1, i32 0, i64 %18
  %25 = load float, ptr %24, align 4
  %26 = fadd float %23, %25
  %27 = getelementptr inbounds [512 x float], ptr %0, i32 0, i64 %18
  %28 = load float, ptr %27, align 4, !invariant.load !3
  %29 = fsub float 1.000000e+00, %28
  %30 = fmul float %26, %29
  %31 = fmul float %30, %28
  %32 = fadd float %30, %31
  store float %32, ptr %24, align 4
  %33 = add i64 %15, 1
  br label %14

34:                                               ; preds = %14
  %35 = add i64 %10, 1
  br label %9, !llvm.loop !5

36:                                               ; preds = %9
  ret void
}

attributes #0 = { uwtable "frame-pointer"="all" "prefer-vector-width"="256" }
attributes #1 = { alwaysinline }

!llvm.module.flags = !{!0, !1}
!xla_cpu_memory_region_name = !{!2}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 0}
!2 = !{!"xla_cpu_emitter__loop_fusion_kernel_emitter__hlo_opcode__fusion"}
!3 = !{}
!4 = !{i64 2048}
!5 = distinct !{!5, !6}
!6 = !{!"llvm.loop.unroll.disable"}
