; ModuleID = '__compute_module___compute_module_wrapped_tanh'
source_filename = "__compute_module___compute_module_wrapped_tanh"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

define noalias noundef ptr @wrapped_tanh(ptr nofree readonly captures(none) %0) local_unnamed_addr {
  %2 = getelementptr inbounds nuw i8, ptr %0, i64 24
  %3 = load ptr, ptr %2, align 8, !invariant.load !8
  %4 = load ptr, ptr %3, align 8, !invariant.load !8
  %5 = getelementptr inbounds nuw i8, ptr %3, i64 16
  %6 = load ptr, ptr %5, align 8, !invariant.load !8
  %7 = getelementptr inbounds nuw i8, ptr %0, i64 8
  %8 = load ptr, ptr %7, align 8
  %9 = load i64, ptr %8, align 4, !invariant.load !8
  %.not.not = icmp slt i64 %9, 1
  br i1 %.not.not, label %.lr.ph, label %._crit_edge

.lr.ph:                                           ; preds = %1, %.lr.ph
  %10 = phi i64 [ %78, %.lr.ph ], [ 0, %1 ]
  %savedstack = tail call ptr @llvm.stacksave.p0()
  %11 = shl nuw nsw i64 %10, 4
  %12 = and i64 %11, 48
  %13 = shl nuw nsw i64 %10, 6
  %.idx3 = and i64 %13, 1792
  %14 = getelementptr i8, ptr %4, i64 %.idx3
  %15 = getelementptr [4 x i8], ptr %14, i64 %12
  %.sroa.0.0.copyload = load <8 x float>, ptr %15, align 1
  %.sroa.4.0..sroa_idx = getelementptr inbounds nuw i8, ptr %15, i64 32
  %.sroa.4.0.copyload = load <8 x float>, ptr %.sroa.4.0..sroa_idx, align 1
  %16 = alloca [16 x float], align 64
  %17 = call <8 x float> @llvm.fabs.v8f32(<8 x float> %.sroa.0.0.copyload)
  %18 = fcmp olt <8 x float> %17, splat (float 4.000000e-04)
  %.inv = fcmp olt <8 x float> %.sroa.0.0.copyload, splat (float f0xC0FFF644)
  %19 = select <8 x i1> %.inv, <8 x float> splat (float f0xC0FFF644), <8 x float> %.sroa.0.0.copyload
  %.inv11 = fcmp ogt <8 x float> %19, splat (float f0x40FFF644)
  %20 = select <8 x i1> %.inv11, <8 x float> splat (float f0x40FFF644), <8 x float> %19
  %21 = fmul <8 x float> %20, %20
  %22 = fmul <8 x float> %21, splat (float f0xA59F25C0)
  %23 = fadd <8 x float> %22, splat (float f0x2A61337E)
  %24 = fmul <8 x float> %21, %23
  %25 = fadd <8 x float> %24, splat (float f0xAEBD37FF)
  %26 = fmul <8 x float> %21, %25
  %27 = fadd <8 x float> %26, splat (float f0x335C0041)
  %28 = fmul <8 x float> %21, %27
  %29 = fadd <8 x float> %28, splat (float f0x3779434A)
  %30 = fmul <8 x float> %21, %29
  %31 = fadd <8 x float> %30, splat (float f0x3A270DED)
  %32 = fmul <8 x float> %21, %31
  %33 = fadd <8 x float> %32, splat (float f0x3BA059DC)
  %34 = fmul <8 x float> %20, %33
  %35 = fmul <8 x float> %21, splat (float f0x35A0D3D8)
  %36 = fadd <8 x float> %35, splat (float f0x38F895D6)
  %37 = fmul <8 x float> %21, %36
  %38 = fadd <8 x float> %37, splat (float f0x3B14AA05)
  %39 = fmul <8 x float> %21, %38
  %40 = fadd <8 x float> %39, splat (float f0x3BA059DD)
  %41 = fdiv <8 x float> %34, %40
  %42 = select <8 x i1> %18, <8 x float> %.sroa.0.0.copyload, <8 x float> %41
  %43 = fcmp oge <8 x float> %17, splat (float 2.000000e+01)
  %44 = call <8 x float> @llvm.copysign.v8f32(<8 x float> splat (float 1.000000e+00), <8 x float> %.sroa.0.0.copyload)
  %45 = select <8 x i1> %43, <8 x float> %44, <8 x float> %42
  store <8 x float> %45, ptr %16, align 64
  %46 = call <8 x float> @llvm.fabs.v8f32(<8 x float> %.sroa.4.0.copyload)
  %47 = fcmp olt <8 x float> %46, splat (float 4.000000e-04)
  %.inv12 = fcmp olt <8 x float> %.sroa.4.0.copyload, splat (float f0xC0FFF644)
  %48 = select <8 x i1> %.inv12, <8 x float> splat (float f0xC0FFF644), <8 x float> %.sroa.4.0.copyload
  %.inv13 = fcmp ogt <8 x float> %48, splat (float f0x40FFF644)
  %49 = select <8 x i1> %.inv13, <8 x float> splat (float f0x40FFF644), <8 x float> %48
  %50 = fmul <8 x float> %49, %49
  %51 = fmul <8 x float> %50, splat (float f0xA59F25C0)
  %52 = fadd <8 x float> %51, splat (float f0x2A61337E)
  %53 = fmul <8 x float> %50, %52
  %54 = fadd <8 x float> %53, splat (float f0xAEBD37FF)
  %55 = fmul <8 x float> %50, %54
  %56 = fadd <8 x float> %55, splat (float f0x335C0041)
  %57 = fmul <8 x float> %50, %56
  %58 = fadd <8 x float> %57, splat (float f0x3779434A)
  %59 = fmul <8 x float> %50, %58
  %60 = fadd <8 x float> %59, splat (float f0x3A270DED)
  %61 = fmul <8 x float> %50, %60
  %62 = fadd <8 x float> %61, splat (float f0x3BA059DC)
  %63 = fmul <8 x float> %49, %62
  %64 = fmul <8 x float> %50, splat (float f0x35A0D3D8)
  %65 = fadd <8 x float> %64, splat (float f0x38F895D6)
  %66 = fmul <8 x float> %50, %65
  %67 = fadd <8 x float> %66, splat (float f0x3B14AA05)
  %68 = fmul <8 x float> %50, %67
  %69 = fadd <8 x float> %68, splat (float f0x3BA059DD)
  %70 = fdiv <8 x float> %63, %69
  %71 = select <8 x i1> %47, <8 x float> %.sroa.4.0.copyload, <8 x float> %70
  %72 = fcmp oge <8 x float> %46, splat (float 2.000000e+01)
  %73 = call <8 x float> @llvm.copysign.v8f32(<8 x float> splat (float 1.000000e+00), <8 x float> %.sroa.4.0.copyload)
  %74 = select <8 x i1> %72, <8 x float> %73, <8 x float> %71
  %75 = getelementptr inbounds nuw i8, ptr %16, i64 32
  store <8 x float> %74, ptr %75, align 32
  %76 = getelementptr i8, ptr %6, i64 %.idx3
  %77 = getelementptr [4 x i8], ptr %76, i64 %12
  call void @llvm.memcpy.p0.p0.i64(ptr noundef nonnull align 1 dereferenceable(64) %77, ptr noundef nonnull align 64 dereferenceable(64) %16, i64 64, i1 false)
  call void @llvm.stackrestore.p0(ptr %savedstack)
  %78 = add nuw nsw i64 %10, 1
  %exitcond.not = icmp eq i64 %78, 32
  br i1 %exitcond.not, label %._crit_edge, label %.lr.ph

._crit_edge:                                      ; preds = %.lr.ph, %1
  ret ptr null
}

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(argmem: readwrite)
declare void @llvm.memcpy.p0.p0.i64(ptr noalias writeonly captures(none), ptr noalias readonly captures(none), i64, i1 immarg) #0

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn
declare ptr @llvm.stacksave.p0() #1

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn
declare void @llvm.stackrestore.p0(ptr) #1

; Function Attrs: nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none)
declare <8 x float> @llvm.fabs.v8f32(<8 x float>) #2

; Function Attrs: nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none)
declare <8 x float> @llvm.copysign.v8f32(<8 x float>, <8 x float>) #2

attributes #0 = { mustprogress nocallback nofree nosync nounwind willreturn memory(argmem: readwrite) }
attributes #1 = { mustprogress nocallback nofree nosync nounwind willreturn }
attributes #2 = { nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none) }

!llvm.module.flags = !{!0, !1, !2, !3, !4, !5}
!xla_cpu_memory_region_name = !{!6}
!llvm.ident = !{!7}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 6}
!2 = !{i32 1, !"wchar_size", i32 4}
!3 = !{i32 8, !"PIC Level", i32 0}
!4 = !{i32 7, !"uwtable", i32 2}
!5 = !{i32 7, !"frame-pointer", i32 2}
!6 = !{!"xla_cpu_emitter__tiled_emitter__hlo_opcode__fusion"}
!7 = !{!"clang version 18.1.8"}
!8 = !{}
