; ModuleID = '__compute_module___compute_module_wrapped_multiply'
source_filename = "__compute_module___compute_module_wrapped_multiply"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; Function Attrs: nofree norecurse nosync nounwind
define noalias noundef ptr @wrapped_multiply(ptr nofree readonly captures(none) %0) local_unnamed_addr #0 {
  %2 = getelementptr inbounds nuw i8, ptr %0, i64 24
  %3 = load ptr, ptr %2, align 8, !invariant.load !3
  %4 = load ptr, ptr %3, align 8, !invariant.load !3
  %5 = getelementptr inbounds nuw i8, ptr %3, i64 16
  %6 = load ptr, ptr %5, align 8, !invariant.load !3
  %7 = getelementptr inbounds nuw i8, ptr %3, i64 32
  %8 = load ptr, ptr %7, align 8, !invariant.load !3
  %9 = getelementptr inbounds nuw i8, ptr %0, i64 8
  %10 = load ptr, ptr %9, align 8
  %11 = load i64, ptr %10, align 4, !invariant.load !3
  %.not.not = icmp slt i64 %11, 1
  br i1 %.not.not, label %.lr.ph, label %._crit_edge

.lr.ph:                                           ; preds = %1, %.lr.ph
  %12 = phi i64 [ %48, %.lr.ph ], [ 0, %1 ]
  %savedstack = tail call ptr @llvm.stacksave.p0()
  %13 = shl nuw nsw i64 %12, 4
  %14 = and i64 %13, 32
  %15 = shl nuw nsw i64 %12, 6
  %.idx3 = and i64 %15, 1792
  %16 = getelementptr i8, ptr %4, i64 %.idx3
  %17 = getelementptr [4 x i8], ptr %16, i64 %14
  %.sroa.0.0.copyload = load <8 x float>, ptr %17, align 1
  %.sroa.4.0..sroa_idx = getelementptr inbounds nuw i8, ptr %17, i64 32
  %.sroa.4.0.copyload = load <8 x float>, ptr %.sroa.4.0..sroa_idx, align 1
  %18 = alloca [16 x float], align 4
  %19 = getelementptr i8, ptr %6, i64 %.idx3
  %20 = getelementptr [4 x i8], ptr %19, i64 %14
  call void @llvm.memcpy.p0.p0.i64(ptr noundef nonnull align 4 dereferenceable(64) %18, ptr noundef nonnull align 1 dereferenceable(64) %20, i64 64, i1 false)
  %21 = alloca [16 x float], align 64
  %22 = load <8 x float>, ptr %18, align 4
  %23 = fmul <8 x float> %.sroa.0.0.copyload, %22
  store <8 x float> %23, ptr %21, align 64
  %24 = getelementptr inbounds nuw i8, ptr %18, i64 32
  %25 = load <8 x float>, ptr %24, align 4
  %26 = fmul <8 x float> %.sroa.4.0.copyload, %25
  %27 = getelementptr inbounds nuw i8, ptr %21, i64 32
  store <8 x float> %26, ptr %27, align 32
  %28 = getelementptr i8, ptr %8, i64 %.idx3
  %29 = getelementptr [4 x i8], ptr %28, i64 %14
  call void @llvm.memcpy.p0.p0.i64(ptr noundef nonnull align 1 dereferenceable(64) %29, ptr noundef nonnull align 64 dereferenceable(64) %21, i64 64, i1 false)
  call void @llvm.stackrestore.p0(ptr %savedstack)
  %savedstack.1 = tail call ptr @llvm.stacksave.p0()
  %30 = shl i64 %12, 4
  %31 = and i64 %30, 32
  %32 = or disjoint i64 %31, 16
  %33 = shl nuw nsw i64 %12, 6
  %.idx3.1 = and i64 %33, 1792
  %34 = getelementptr i8, ptr %4, i64 %.idx3.1
  %35 = getelementptr [4 x i8], ptr %34, i64 %32
  %.sroa.0.0.copyload.1 = load <8 x float>, ptr %35, align 1
  %.sroa.4.0..sroa_idx.1 = getelementptr inbounds nuw i8, ptr %35, i64 32
  %.sroa.4.0.copyload.1 = load <8 x float>, ptr %.sroa.4.0..sroa_idx.1, align 1
  %36 = alloca [16 x float], align 4
  %37 = getelementptr i8, ptr %6, i64 %.idx3.1
  %38 = getelementptr [4 x i8], ptr %37, i64 %32
  call void @llvm.memcpy.p0.p0.i64(ptr noundef nonnull align 4 dereferenceable(64) %36, ptr noundef nonnull align 1 dereferenceable(64) %38, i64 64, i1 false)
  %39 = alloca [16 x float], align 64
  %40 = load <8 x float>, ptr %36, align 4
  %41 = fmul <8 x float> %.sroa.0.0.copyload.1, %40
  store <8 x float> %41, ptr %39, align 64
  %42 = getelementptr inbounds nuw i8, ptr %36, i64 32
  %43 = load <8 x float>, ptr %42, align 4
  %44 = fmul <8 x float> %.sroa.4.0.copyload.1, %43
  %45 = getelementptr inbounds nuw i8, ptr %39, i64 32
  store <8 x float> %44, ptr %45, align 32
  %46 = getelementptr i8, ptr %8, i64 %.idx3.1
  %47 = getelementptr [4 x i8], ptr %46, i64 %32
  call void @llvm.memcpy.p0.p0.i64(ptr noundef nonnull align 1 dereferenceable(64) %47, ptr noundef nonnull align 64 dereferenceable(64) %39, i64 64, i1 false)
  call void @llvm.stackrestore.p0(ptr %savedstack.1)
  %48 = add nuw nsw i64 %12, 2
  %exitcond.not.1 = icmp eq i64 %48, 32
  br i1 %exitcond.not.1, label %._crit_edge, label %.lr.ph

._crit_edge:                                      ; preds = %.lr.ph, %1
  ret ptr null
}

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(argmem: readwrite)
declare void @llvm.memcpy.p0.p0.i64(ptr noalias writeonly captures(none), ptr noalias readonly captures(none), i64, i1 immarg) #1

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn
declare ptr @llvm.stacksave.p0() #2

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn
declare void @llvm.stackrestore.p0(ptr) #2

attributes #0 = { nofree norecurse nosync nounwind }
attributes #1 = { mustprogress nocallback nofree nosync nounwind willreturn memory(argmem: readwrite) }
attributes #2 = { mustprogress nocallback nofree nosync nounwind willreturn }

!llvm.module.flags = !{!0, !1}
!xla_cpu_memory_region_name = !{!2}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 4}
!2 = !{!"xla_cpu_emitter__tiled_emitter__hlo_opcode__fusion"}
!3 = !{}
