; ModuleID = '__compute_module_multiply_add_fusion_kernel_module'
source_filename = "__compute_module_multiply_add_fusion_kernel_module"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; Function Attrs: nofree norecurse nosync nounwind memory(readwrite, target_mem: none) uwtable
define noalias noundef ptr @multiply_add_fusion(ptr nofree readonly captures(none) %0) local_unnamed_addr #0 {
  %2 = getelementptr inbounds nuw i8, ptr %0, i64 24
  %3 = load ptr, ptr %2, align 8, !invariant.load !3
  %4 = load ptr, ptr %3, align 8, !invariant.load !3, !dereferenceable !4
  %5 = getelementptr inbounds nuw i8, ptr %3, i64 16
  %6 = load ptr, ptr %5, align 8, !invariant.load !3, !dereferenceable !4
  %7 = getelementptr inbounds nuw i8, ptr %3, i64 32
  %8 = load ptr, ptr %7, align 8, !invariant.load !3, !dereferenceable !4
  %9 = getelementptr inbounds nuw i8, ptr %3, i64 48
  %10 = load ptr, ptr %9, align 8, !invariant.load !3, !dereferenceable !4
  tail call void @llvm.experimental.noalias.scope.decl(metadata !5)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !8)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !10)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !12)
  br label %vector.ph

vector.ph:                                        ; preds = %1, %vector.ph
  %11 = phi i64 [ 0, %1 ], [ %94, %vector.ph ]
  %12 = shl nuw nsw i64 %11, 6
  %13 = getelementptr inbounds nuw [4 x i8], ptr %8, i64 %12
  %14 = getelementptr inbounds nuw i8, ptr %13, i64 32
  %15 = getelementptr inbounds nuw i8, ptr %13, i64 64
  %16 = getelementptr inbounds nuw i8, ptr %13, i64 96
  %wide.load = load <8 x float>, ptr %13, align 4, !invariant.load !3, !alias.scope !10, !noalias !14
  %wide.load3 = load <8 x float>, ptr %14, align 4, !invariant.load !3, !alias.scope !10, !noalias !14
  %wide.load4 = load <8 x float>, ptr %15, align 4, !invariant.load !3, !alias.scope !10, !noalias !14
  %wide.load5 = load <8 x float>, ptr %16, align 4, !invariant.load !3, !alias.scope !10, !noalias !14
  %17 = getelementptr inbounds nuw [4 x i8], ptr %10, i64 %12
  %18 = getelementptr inbounds nuw i8, ptr %17, i64 32
  %19 = getelementptr inbounds nuw i8, ptr %17, i64 64
  %20 = getelementptr inbounds nuw i8, ptr %17, i64 96
  %wide.load6 = load <8 x float>, ptr %17, align 4, !invariant.load !3, !alias.scope !12, !noalias !15
  %wide.load7 = load <8 x float>, ptr %18, align 4, !invariant.load !3, !alias.scope !12, !noalias !15
  %wide.load8 = load <8 x float>, ptr %19, align 4, !invariant.load !3, !alias.scope !12, !noalias !15
  %wide.load9 = load <8 x float>, ptr %20, align 4, !invariant.load !3, !alias.scope !12, !noalias !15
  %21 = fadd <8 x float> %wide.load, %wide.load6
  %22 = fadd <8 x float> %wide.load3, %wide.load7
  %23 = fadd <8 x float> %wide.load4, %wide.load8
  %24 = fadd <8 x float> %wide.load5, %wide.load9
  %25 = getelementptr inbounds nuw [4 x i8], ptr %6, i64 %12
  %26 = getelementptr inbounds nuw i8, ptr %25, i64 32
  %27 = getelementptr inbounds nuw i8, ptr %25, i64 64
  %28 = getelementptr inbounds nuw i8, ptr %25, i64 96
  %wide.load10 = load <8 x float>, ptr %25, align 4, !alias.scope !8, !noalias !16
  %wide.load11 = load <8 x float>, ptr %26, align 4, !alias.scope !8, !noalias !16
  %wide.load12 = load <8 x float>, ptr %27, align 4, !alias.scope !8, !noalias !16
  %wide.load13 = load <8 x float>, ptr %28, align 4, !alias.scope !8, !noalias !16
  %29 = fadd <8 x float> %21, %wide.load10
  %30 = fadd <8 x float> %22, %wide.load11
  %31 = fadd <8 x float> %23, %wide.load12
  %32 = fadd <8 x float> %24, %wide.load13
  %33 = getelementptr inbounds nuw [4 x i8], ptr %4, i64 %12
  %34 = getelementptr inbounds nuw i8, ptr %33, i64 32
  %35 = getelementptr inbounds nuw i8, ptr %33, i64 64
  %36 = getelementptr inbounds nuw i8, ptr %33, i64 96
  %wide.load14 = load <8 x float>, ptr %33, align 4, !invariant.load !3, !alias.scope !5, !noalias !17
  %wide.load15 = load <8 x float>, ptr %34, align 4, !invariant.load !3, !alias.scope !5, !noalias !17
  %wide.load16 = load <8 x float>, ptr %35, align 4, !invariant.load !3, !alias.scope !5, !noalias !17
  %wide.load17 = load <8 x float>, ptr %36, align 4, !invariant.load !3, !alias.scope !5, !noalias !17
  %37 = fsub <8 x float> splat (float 1.000000e+00), %wide.load14
  %38 = fsub <8 x float> splat (float 1.000000e+00), %wide.load15
  %39 = fsub <8 x float> splat (float 1.000000e+00), %wide.load16
  %40 = fsub <8 x float> splat (float 1.000000e+00), %wide.load17
  %41 = fmul <8 x float> %29, %37
  %42 = fmul <8 x float> %30, %38
  %43 = fmul <8 x float> %31, %39
  %44 = fmul <8 x float> %32, %40
  %45 = fmul <8 x float> %wide.load14, %41
  %46 = fmul <8 x float> %wide.load15, %42
  %47 = fmul <8 x float> %wide.load16, %43
  %48 = fmul <8 x float> %wide.load17, %44
  %49 = fadd <8 x float> %41, %45
  %50 = fadd <8 x float> %42, %46
  %51 = fadd <8 x float> %43, %47
  %52 = fadd <8 x float> %44, %48
  store <8 x float> %49, ptr %25, align 4, !alias.scope !8, !noalias !16
  store <8 x float> %50, ptr %26, align 4, !alias.scope !8, !noalias !16
  store <8 x float> %51, ptr %27, align 4, !alias.scope !8, !noalias !16
  store <8 x float> %52, ptr %28, align 4, !alias.scope !8, !noalias !16
  %53 = or disjoint i64 %12, 32
  %54 = getelementptr inbounds nuw [4 x i8], ptr %8, i64 %53
  %55 = getelementptr inbounds nuw i8, ptr %54, i64 32
  %56 = getelementptr inbounds nuw i8, ptr %54, i64 64
  %57 = getelementptr inbounds nuw i8, ptr %54, i64 96
  %wide.load.1 = load <8 x float>, ptr %54, align 4, !invariant.load !3, !alias.scope !10, !noalias !14
  %wide.load3.1 = load <8 x float>, ptr %55, align 4, !invariant.load !3, !alias.scope !10, !noalias !14
  %wide.load4.1 = load <8 x float>, ptr %56, align 4, !invariant.load !3, !alias.scope !10, !noalias !14
  %wide.load5.1 = load <8 x float>, ptr %57, align 4, !invariant.load !3, !alias.scope !10, !noalias !14
  %58 = getelementptr inbounds nuw [4 x i8], ptr %10, i64 %53
  %59 = getelementptr inbounds nuw i8, ptr %58, i64 32
  %60 = getelementptr inbounds nuw i8, ptr %58, i64 64
  %61 = getelementptr inbounds nuw i8, ptr %58, i64 96
  %wide.load6.1 = load <8 x float>, ptr %58, align 4, !invariant.load !3, !alias.scope !12, !noalias !15
  %wide.load7.1 = load <8 x float>, ptr %59, align 4, !invariant.load !3, !alias.scope !12, !noalias !15
  %wide.load8.1 = load <8 x float>, ptr %60, align 4, !invariant.load !3, !alias.scope !12, !noalias !15
  %wide.load9.1 = load <8 x float>, ptr %61, align 4, !invariant.load !3, !alias.scope !12, !noalias !15
  %62 = fadd <8 x float> %wide.load.1, %wide.load6.1
  %63 = fadd <8 x float> %wide.load3.1, %wide.load7.1
  %64 = fadd <8 x float> %wide.load4.1, %wide.load8.1
  %65 = fadd <8 x float> %wide.load5.1, %wide.load9.1
  %66 = getelementptr inbounds nuw [4 x i8], ptr %6, i64 %53
  %67 = getelementptr inbounds nuw i8, ptr %66, i64 32
  %68 = getelementptr inbounds nuw i8, ptr %66, i64 64
  %69 = getelementptr inbounds nuw i8, ptr %66, i64 96
  %wide.load10.1 = load <8 x float>, ptr %66, align 4, !alias.scope !8, !noalias !16
  %wide.load11.1 = load <8 x float>, ptr %67, align 4, !alias.scope !8, !noalias !16
  %wide.load12.1 = load <8 x float>, ptr %68, align 4, !alias.scope !8, !noalias !16
  %wide.load13.1 = load <8 x float>, ptr %69, align 4, !alias.scope !8, !noalias !16
  %70 = fadd <8 x float> %62, %wide.load10.1
  %71 = fadd <8 x float> %63, %wide.load11.1
  %72 = fadd <8 x float> %64, %wide.load12.1
  %73 = fadd <8 x float> %65, %wide.load13.1
  %74 = getelementptr inbounds nuw [4 x i8], ptr %4, i64 %53
  %75 = getelementptr inbounds nuw i8, ptr %74, i64 32
  %76 = getelementptr inbounds nuw i8, ptr %74, i64 64
  %77 = getelementptr inbounds nuw i8, ptr %74, i64 96
  %wide.load14.1 = load <8 x float>, ptr %74, align 4, !invariant.load !3, !alias.scope !5, !noalias !17
  %wide.load15.1 = load <8 x float>, ptr %75, align 4, !invariant.load !3, !alias.scope !5, !noalias !17
  %wide.load16.1 = load <8 x float>, ptr %76, align 4, !invariant.load !3, !alias.scope !5, !noalias !17
  %wide.load17.1 = load <8 x float>, ptr %77, align 4, !invariant.load !3, !alias.scope !5, !noalias !17
  %78 = fsub <8 x float> splat (float 1.000000e+00), %wide.load14.1
  %79 = fsub <8 x float> splat (float 1.000000e+00), %wide.load15.1
  %80 = fsub <8 x float> splat (float 1.000000e+00), %wide.load16.1
  %81 = fsub <8 x float> splat (float 1.000000e+00), %wide.load17.1
  %82 = fmul <8 x float> %70, %78
  %83 = fmul <8 x float> %71, %79
  %84 = fmul <8 x float> %72, %80
  %85 = fmul <8 x float> %73, %81
  %86 = fmul <8 x float> %wide.load14.1, %82
  %87 = fmul <8 x float> %wide.load15.1, %83
  %88 = fmul <8 x float> %wide.load16.1, %84
  %89 = fmul <8 x float> %wide.load17.1, %85
  %90 = fadd <8 x float> %82, %86
  %91 = fadd <8 x float> %83, %87
  %92 = fadd <8 x float> %84, %88
  %93 = fadd <8 x float> %85, %89
  store <8 x float> %90, ptr %66, align 4, !alias.scope !8, !noalias !16
  store <8 x float> %91, ptr %67, align 4, !alias.scope !8, !noalias !16
  store <8 x float> %92, ptr %68, align 4, !alias.scope !8, !noalias !16
  store <8 x float> %93, ptr %69, align 4, !alias.scope !8, !noalias !16
  %94 = add nuw nsw i64 %11, 1
  %exitcond2.not = icmp eq i64 %94, 8
  br i1 %exitcond2.not, label %multiply_add_fusion_wrapped.exit, label %vector.ph, !llvm.loop !18

multiply_add_fusion_wrapped.exit:                 ; preds = %vector.ph
  ret ptr null
}

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(inaccessiblemem: readwrite)
declare void @llvm.experimental.noalias.scope.decl(metadata) #1

attributes #0 = { nofree norecurse nosync nounwind memory(readwrite, target_mem: none) uwtable "frame-pointer"="all" "prefer-vector-width"="256" }
attributes #1 = { mustprogress nocallback nofree nosync nounwind willreturn memory(inaccessiblemem: readwrite) }

!llvm.module.flags = !{!0, !1}
!xla_cpu_memory_region_name = !{!2}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 0}
!2 = !{!"xla_cpu_emitter__loop_fusion_kernel_emitter__hlo_opcode__fusion"}
!3 = !{}
!4 = !{i64 2048}
!5 = !{!6}
!6 = distinct !{!6, !7, !"multiply_add_fusion_wrapped: argument 0"}
!7 = distinct !{!7, !"multiply_add_fusion_wrapped"}
!8 = !{!9}
!9 = distinct !{!9, !7, !"multiply_add_fusion_wrapped: argument 1"}
!10 = !{!11}
!11 = distinct !{!11, !7, !"multiply_add_fusion_wrapped: argument 2"}
!12 = !{!13}
!13 = distinct !{!13, !7, !"multiply_add_fusion_wrapped: argument 3"}
!14 = !{!6, !9, !13}
!15 = !{!6, !9, !11}
!16 = !{!6, !11, !13}
!17 = !{!9, !11, !13}
!18 = distinct !{!18, !19}
!19 = !{!"llvm.loop.unroll.disable"}
