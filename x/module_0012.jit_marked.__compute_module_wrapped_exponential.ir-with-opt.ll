; ModuleID = '__compute_module___compute_module_wrapped_exponential'
source_filename = "__compute_module___compute_module_wrapped_exponential"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

; Function Attrs: nofree norecurse nosync nounwind
define noalias noundef ptr @wrapped_exponential(ptr nofree readonly captures(none) %0) local_unnamed_addr #0 {
  %2 = getelementptr inbounds nuw i8, ptr %0, i64 24
  %3 = load ptr, ptr %2, align 8, !invariant.load !3
  %4 = load ptr, ptr %3, align 8, !invariant.load !3
  %5 = getelementptr inbounds nuw i8, ptr %3, i64 16
  %6 = load ptr, ptr %5, align 8, !invariant.load !3
  %7 = getelementptr inbounds nuw i8, ptr %0, i64 8
  %8 = load ptr, ptr %7, align 8
  %9 = load i64, ptr %8, align 4, !invariant.load !3
  %.not.not = icmp slt i64 %9, 1
  br i1 %.not.not, label %.lr.ph, label %._crit_edge

.lr.ph:                                           ; preds = %1, %.lr.ph
  %10 = phi i64 [ %50, %.lr.ph ], [ 0, %1 ]
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
  %17 = fcmp uge <8 x float> %.sroa.0.0.copyload, splat (float -8.780000e+01)
  %18 = select <8 x i1> %17, <8 x float> %.sroa.0.0.copyload, <8 x float> splat (float -8.780000e+01)
  %19 = fcmp ule <8 x float> %18, splat (float 8.880000e+01)
  %20 = select <8 x i1> %19, <8 x float> %18, <8 x float> splat (float 8.880000e+01)
  %exp_f32.i = fmul <8 x float> %20, splat (float f0x3FB8AA3B)
  %exp_f321.i = fadd <8 x float> splat (float 5.000000e-01), %exp_f32.i
  %21 = call <8 x float> @llvm.floor.v8f32(<8 x float> %exp_f321.i)
  %22 = fcmp uge <8 x float> %21, splat (float -1.270000e+02)
  %23 = select <8 x i1> %22, <8 x float> %21, <8 x float> splat (float -1.270000e+02)
  %24 = fcmp ule <8 x float> %23, splat (float 1.270000e+02)
  %25 = select <8 x i1> %24, <8 x float> %23, <8 x float> splat (float 1.270000e+02)
  %exp_f322.i = fmul <8 x float> splat (float f0x3F318000), %25
  %26 = fsub <8 x float> %20, %exp_f322.i
  %exp_f323.i = fmul <8 x float> splat (float f0xB95E8083), %25
  %27 = fsub <8 x float> %26, %exp_f323.i
  %exp_f324.i = fmul <8 x float> %27, splat (float f0x39506967)
  %exp_f325.i = fadd <8 x float> splat (float f0x3AB743CE), %exp_f324.i
  %exp_f326.i = fmul <8 x float> %exp_f325.i, %27
  %exp_f327.i = fadd <8 x float> splat (float f0x3C088908), %exp_f326.i
  %exp_f328.i = fmul <8 x float> %exp_f327.i, %27
  %exp_f329.i = fadd <8 x float> splat (float f0x3D2AA9C1), %exp_f328.i
  %exp_f3210.i = fmul <8 x float> %exp_f329.i, %27
  %exp_f3211.i = fadd <8 x float> splat (float f0x3E2AAAAA), %exp_f3210.i
  %exp_f3212.i = fmul <8 x float> %exp_f3211.i, %27
  %exp_f3213.i = fadd <8 x float> splat (float 5.000000e-01), %exp_f3212.i
  %exp_f3214.i = fmul <8 x float> %27, %27
  %exp_f3215.i = fmul <8 x float> %exp_f3213.i, %exp_f3214.i
  %exp_f3216.i = fadd <8 x float> %27, %exp_f3215.i
  %exp_f3217.i = fadd <8 x float> splat (float 1.000000e+00), %exp_f3216.i
  %28 = fptosi <8 x float> %25 to <8 x i32>
  %29 = add <8 x i32> %28, splat (i32 127)
  %30 = shl <8 x i32> %29, splat (i32 23)
  %31 = bitcast <8 x i32> %30 to <8 x float>
  %exp_f3218.i = fmul <8 x float> %exp_f3217.i, %31
  store <8 x float> %exp_f3218.i, ptr %16, align 64
  %32 = fcmp uge <8 x float> %.sroa.4.0.copyload, splat (float -8.780000e+01)
  %33 = select <8 x i1> %32, <8 x float> %.sroa.4.0.copyload, <8 x float> splat (float -8.780000e+01)
  %34 = fcmp ule <8 x float> %33, splat (float 8.880000e+01)
  %35 = select <8 x i1> %34, <8 x float> %33, <8 x float> splat (float 8.880000e+01)
  %exp_f32.i11 = fmul <8 x float> %35, splat (float f0x3FB8AA3B)
  %exp_f321.i12 = fadd <8 x float> splat (float 5.000000e-01), %exp_f32.i11
  %36 = call <8 x float> @llvm.floor.v8f32(<8 x float> %exp_f321.i12)
  %37 = fcmp uge <8 x float> %36, splat (float -1.270000e+02)
  %38 = select <8 x i1> %37, <8 x float> %36, <8 x float> splat (float -1.270000e+02)
  %39 = fcmp ule <8 x float> %38, splat (float 1.270000e+02)
  %40 = select <8 x i1> %39, <8 x float> %38, <8 x float> splat (float 1.270000e+02)
  %exp_f322.i13 = fmul <8 x float> splat (float f0x3F318000), %40
  %41 = fsub <8 x float> %35, %exp_f322.i13
  %exp_f323.i14 = fmul <8 x float> splat (float f0xB95E8083), %40
  %42 = fsub <8 x float> %41, %exp_f323.i14
  %exp_f324.i15 = fmul <8 x float> %42, splat (float f0x39506967)
  %exp_f325.i16 = fadd <8 x float> splat (float f0x3AB743CE), %exp_f324.i15
  %exp_f326.i17 = fmul <8 x float> %exp_f325.i16, %42
  %exp_f327.i18 = fadd <8 x float> splat (float f0x3C088908), %exp_f326.i17
  %exp_f328.i19 = fmul <8 x float> %exp_f327.i18, %42
  %exp_f329.i20 = fadd <8 x float> splat (float f0x3D2AA9C1), %exp_f328.i19
  %exp_f3210.i21 = fmul <8 x float> %exp_f329.i20, %42
  %exp_f3211.i22 = fadd <8 x float> splat (float f0x3E2AAAAA), %exp_f3210.i21
  %exp_f3212.i23 = fmul <8 x float> %exp_f3211.i22, %42
  %exp_f3213.i24 = fadd <8 x float> splat (float 5.000000e-01), %exp_f3212.i23
  %exp_f3214.i25 = fmul <8 x float> %42, %42
  %exp_f3215.i26 = fmul <8 x float> %exp_f3213.i24, %exp_f3214.i25
  %exp_f3216.i27 = fadd <8 x float> %42, %exp_f3215.i26
  %exp_f3217.i28 = fadd <8 x float> splat (float 1.000000e+00), %exp_f3216.i27
  %43 = fptosi <8 x float> %40 to <8 x i32>
  %44 = add <8 x i32> %43, splat (i32 127)
  %45 = shl <8 x i32> %44, splat (i32 23)
  %46 = bitcast <8 x i32> %45 to <8 x float>
  %exp_f3218.i29 = fmul <8 x float> %exp_f3217.i28, %46
  %47 = getelementptr inbounds nuw i8, ptr %16, i64 32
  store <8 x float> %exp_f3218.i29, ptr %47, align 32
  %48 = getelementptr i8, ptr %6, i64 %.idx3
  %49 = getelementptr [4 x i8], ptr %48, i64 %12
  call void @llvm.memcpy.p0.p0.i64(ptr noundef nonnull align 1 dereferenceable(64) %49, ptr noundef nonnull align 64 dereferenceable(64) %16, i64 64, i1 false)
  call void @llvm.stackrestore.p0(ptr %savedstack)
  %50 = add nuw nsw i64 %10, 1
  %exitcond.not = icmp eq i64 %50, 32
  br i1 %exitcond.not, label %._crit_edge, label %.lr.ph

._crit_edge:                                      ; preds = %.lr.ph, %1
  ret ptr null
}

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn memory(argmem: readwrite)
declare void @llvm.memcpy.p0.p0.i64(ptr noalias writeonly captures(none), ptr noalias readonly captures(none), i64, i1 immarg) #1

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn
declare ptr @llvm.stacksave.p0() #2

; Function Attrs: mustprogress nocallback nofree nosync nounwind willreturn
declare void @llvm.stackrestore.p0(ptr) #2

; Function Attrs: nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none)
declare <8 x float> @llvm.floor.v8f32(<8 x float>) #3

attributes #0 = { nofree norecurse nosync nounwind }
attributes #1 = { mustprogress nocallback nofree nosync nounwind willreturn memory(argmem: readwrite) }
attributes #2 = { mustprogress nocallback nofree nosync nounwind willreturn }
attributes #3 = { nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none) }

!llvm.module.flags = !{!0, !1}
!xla_cpu_memory_region_name = !{!2}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 3}
!2 = !{!"xla_cpu_emitter__tiled_emitter__hlo_opcode__fusion"}
!3 = !{}
