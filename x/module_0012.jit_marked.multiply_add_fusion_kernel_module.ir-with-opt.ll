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
  tail call void @llvm.experimental.noalias.scope.decl(metadata !5)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !8)
  tail call void @llvm.experimental.noalias.scope.decl(metadata !10)
  br label %vector.ph

vector.ph:                                        ; preds = %1, %vector.ph
  %9 = phi i64 [ 0, %1 ], [ %94, %vector.ph ]
  %10 = shl nuw nsw i64 %9, 6
  %11 = getelementptr inbounds nuw [4 x i8], ptr %8, i64 %10
  %12 = getelementptr inbounds nuw i8, ptr %11, i64 32
  %wide.load = load <8 x float>, ptr %11, align 4, !alias.scope !10, !noalias !12
  %wide.load3 = load <8 x float>, ptr %12, align 4, !alias.scope !10, !noalias !12
  %13 = getelementptr inbounds nuw [4 x i8], ptr %6, i64 %10
  %14 = getelementptr inbounds nuw i8, ptr %13, i64 32
  %wide.load4 = load <8 x float>, ptr %13, align 4, !invariant.load !3, !alias.scope !8, !noalias !13
  %wide.load5 = load <8 x float>, ptr %14, align 4, !invariant.load !3, !alias.scope !8, !noalias !13
  %15 = getelementptr inbounds nuw [4 x i8], ptr %4, i64 %10
  %16 = getelementptr inbounds nuw i8, ptr %15, i64 32
  %wide.load6 = load <8 x float>, ptr %15, align 4, !invariant.load !3, !alias.scope !5, !noalias !14
  %wide.load7 = load <8 x float>, ptr %16, align 4, !invariant.load !3, !alias.scope !5, !noalias !14
  %17 = fadd <8 x float> %wide.load, %wide.load4
  %18 = fadd <8 x float> %wide.load3, %wide.load5
  %19 = fmul <8 x float> %wide.load4, %wide.load6
  %20 = fmul <8 x float> %wide.load5, %wide.load7
  %21 = fadd <8 x float> %17, %19
  %22 = fadd <8 x float> %18, %20
  %23 = fsub <8 x float> splat (float 1.000000e+00), %wide.load6
  %24 = fsub <8 x float> splat (float 1.000000e+00), %wide.load7
  %25 = fmul <8 x float> %23, %21
  %26 = fmul <8 x float> %24, %22
  %27 = fmul <8 x float> %wide.load6, %25
  %28 = fmul <8 x float> %wide.load7, %26
  %29 = fadd <8 x float> %25, %27
  %30 = fadd <8 x float> %26, %28
  store <8 x float> %29, ptr %11, align 4, !alias.scope !10, !noalias !12
  store <8 x float> %30, ptr %12, align 4, !alias.scope !10, !noalias !12
  %31 = or disjoint i64 %10, 16
  %32 = getelementptr inbounds nuw [4 x i8], ptr %8, i64 %31
  %33 = getelementptr inbounds nuw i8, ptr %32, i64 32
  %wide.load.1 = load <8 x float>, ptr %32, align 4, !alias.scope !10, !noalias !12
  %wide.load3.1 = load <8 x float>, ptr %33, align 4, !alias.scope !10, !noalias !12
  %34 = getelementptr inbounds nuw [4 x i8], ptr %6, i64 %31
  %35 = getelementptr inbounds nuw i8, ptr %34, i64 32
  %wide.load4.1 = load <8 x float>, ptr %34, align 4, !invariant.load !3, !alias.scope !8, !noalias !13
  %wide.load5.1 = load <8 x float>, ptr %35, align 4, !invariant.load !3, !alias.scope !8, !noalias !13
  %36 = getelementptr inbounds nuw [4 x i8], ptr %4, i64 %31
  %37 = getelementptr inbounds nuw i8, ptr %36, i64 32
  %wide.load6.1 = load <8 x float>, ptr %36, align 4, !invariant.load !3, !alias.scope !5, !noalias !14
  %wide.load7.1 = load <8 x float>, ptr %37, align 4, !invariant.load !3, !alias.scope !5, !noalias !14
  %38 = fadd <8 x float> %wide.load.1, %wide.load4.1
  %39 = fadd <8 x float> %wide.load3.1, %wide.load5.1
  %40 = fmul <8 x float> %wide.load4.1, %wide.load6.1
  %41 = fmul <8 x float> %wide.load5.1, %wide.load7.1
  %42 = fadd <8 x float> %38, %40
  %43 = fadd <8 x float> %39, %41
  %44 = fsub <8 x float> splat (float 1.000000e+00), %wide.load6.1
  %45 = fsub <8 x float> splat (float 1.000000e+00), %wide.load7.1
  %46 = fmul <8 x float> %44, %42
  %47 = fmul <8 x float> %45, %43
  %48 = fmul <8 x float> %wide.load6.1, %46
  %49 = fmul <8 x float> %wide.load7.1, %47
  %50 = fadd <8 x float> %46, %48
  %51 = fadd <8 x float> %47, %49
  store <8 x float> %50, ptr %32, align 4, !alias.scope !10, !noalias !12
  store <8 x float> %51, ptr %33, align 4, !alias.scope !10, !noalias !12
  %52 = or disjoint i64 %10, 32
  %53 = getelementptr inbounds nuw [4 x i8], ptr %8, i64 %52
  %54 = getelementptr inbounds nuw i8, ptr %53, i64 32
  %wide.load.2 = load <8 x float>, ptr %53, align 4, !alias.scope !10, !noalias !12
  %wide.load3.2 = load <8 x float>, ptr %54, align 4, !alias.scope !10, !noalias !12
  %55 = getelementptr inbounds nuw [4 x i8], ptr %6, i64 %52
  %56 = getelementptr inbounds nuw i8, ptr %55, i64 32
  %wide.load4.2 = load <8 x float>, ptr %55, align 4, !invariant.load !3, !alias.scope !8, !noalias !13
  %wide.load5.2 = load <8 x float>, ptr %56, align 4, !invariant.load !3, !alias.scope !8, !noalias !13
  %57 = getelementptr inbounds nuw [4 x i8], ptr %4, i64 %52
  %58 = getelementptr inbounds nuw i8, ptr %57, i64 32
  %wide.load6.2 = load <8 x float>, ptr %57, align 4, !invariant.load !3, !alias.scope !5, !noalias !14
  %wide.load7.2 = load <8 x float>, ptr %58, align 4, !invariant.load !3, !alias.scope !5, !noalias !14
  %59 = fadd <8 x float> %wide.load.2, %wide.load4.2
  %60 = fadd <8 x float> %wide.load3.2, %wide.load5.2
  %61 = fmul <8 x float> %wide.load4.2, %wide.load6.2
  %62 = fmul <8 x float> %wide.load5.2, %wide.load7.2
  %63 = fadd <8 x float> %59, %61
  %64 = fadd <8 x float> %60, %62
  %65 = fsub <8 x float> splat (float 1.000000e+00), %wide.load6.2
  %66 = fsub <8 x float> splat (float 1.000000e+00), %wide.load7.2
  %67 = fmul <8 x float> %65, %63
  %68 = fmul <8 x float> %66, %64
  %69 = fmul <8 x float> %wide.load6.2, %67
  %70 = fmul <8 x float> %wide.load7.2, %68
  %71 = fadd <8 x float> %67, %69
  %72 = fadd <8 x float> %68, %70
  store <8 x float> %71, ptr %53, align 4, !alias.scope !10, !noalias !12
  store <8 x float> %72, ptr %54, align 4, !alias.scope !10, !noalias !12
  %73 = or disjoint i64 %10, 48
  %74 = getelementptr inbounds nuw [4 x i8], ptr %8, i64 %73
  %75 = getelementptr inbounds nuw i8, ptr %74, i64 32
  %wide.load.3 = load <8 x float>, ptr %74, align 4, !alias.scope !10, !noalias !12
  %wide.load3.3 = load <8 x float>, ptr %75, align 4, !alias.scope !10, !noalias !12
  %76 = getelementptr inbounds nuw [4 x i8], ptr %6, i64 %73
  %77 = getelementptr inbounds nuw i8, ptr %76, i64 32
  %wide.load4.3 = load <8 x float>, ptr %76, align 4, !invariant.load !3, !alias.scope !8, !noalias !13
  %wide.load5.3 = load <8 x float>, ptr %77, align 4, !invariant.load !3, !alias.scope !8, !noalias !13
  %78 = getelementptr inbounds nuw [4 x i8], ptr %4, i64 %73
  %79 = getelementptr inbounds nuw i8, ptr %78, i64 32
  %wide.load6.3 = load <8 x float>, ptr %78, align 4, !invariant.load !3, !alias.scope !5, !noalias !14
  %wide.load7.3 = load <8 x float>, ptr %79, align 4, !invariant.load !3, !alias.scope !5, !noalias !14
  %80 = fadd <8 x float> %wide.load.3, %wide.load4.3
  %81 = fadd <8 x float> %wide.load3.3, %wide.load5.3
  %82 = fmul <8 x float> %wide.load4.3, %wide.load6.3
  %83 = fmul <8 x float> %wide.load5.3, %wide.load7.3
  %84 = fadd <8 x float> %80, %82
  %85 = fadd <8 x float> %81, %83
  %86 = fsub <8 x float> splat (float 1.000000e+00), %wide.load6.3
  %87 = fsub <8 x float> splat (float 1.000000e+00), %wide.load7.3
  %88 = fmul <8 x float> %86, %84
  %89 = fmul <8 x float> %87, %85
  %90 = fmul <8 x float> %wide.load6.3, %88
  %91 = fmul <8 x float> %wide.load7.3, %89
  %92 = fadd <8 x float> %88, %90
  %93 = fadd <8 x float> %89, %91
  store <8 x float> %92, ptr %74, align 4, !alias.scope !10, !noalias !12
  store <8 x float> %93, ptr %75, align 4, !alias.scope !10, !noalias !12
  %94 = add nuw nsw i64 %9, 1
  %exitcond2.not = icmp eq i64 %94, 8
  br i1 %exitcond2.not, label %multiply_add_fusion_wrapped.exit, label %vector.ph, !llvm.loop !15

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
!12 = !{!6, !9}
!13 = !{!6, !11}
!14 = !{!9, !11}
!15 = distinct !{!15, !16}
!16 = !{!"llvm.loop.unroll.disable"}
