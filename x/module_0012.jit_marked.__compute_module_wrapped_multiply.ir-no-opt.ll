; ModuleID = '__compute_module___compute_module_wrapped_multiply'
source_filename = "__compute_module___compute_module_wrapped_multiply"
target datalayout = "e-m:e-p270:32:32-p271:32:32-p272:64:64-i64:64-i128:128-f80:128-n8:16:32:64-S128"
target triple = "x86_64-unknown-linux-gnu"

%XLA_CPU_KernelCallFrame = type { ptr, ptr, i64, ptr }
%XLA_CPU_KernelArg = type { ptr, i64 }
%kernel_dim3 = type { i64, i64, i64 }

define ptr @wrapped_multiply(ptr %0) {
  %2 = getelementptr inbounds %XLA_CPU_KernelCallFrame, ptr %0, i32 0, i32 3
  %3 = load ptr, ptr %2, align 8, !invariant.load !3
  %4 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 0, i32 0
  %5 = load ptr, ptr %4, align 8, !invariant.load !3
  %6 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 1, i32 0
  %7 = load ptr, ptr %6, align 8, !invariant.load !3
  %8 = getelementptr inbounds %XLA_CPU_KernelArg, ptr %3, i32 2, i32 0
  %9 = load ptr, ptr %8, align 8, !invariant.load !3
  %10 = getelementptr inbounds %XLA_CPU_KernelCallFrame, ptr %0, i32 0, i32 1
  %11 = load ptr, ptr %10, align 8
  %12 = getelementptr inbounds %kernel_dim3, ptr %11, i32 0, i32 0
  %13 = load i64, ptr %12, align 4, !invariant.load !3
  %14 = call i64 @llvm.smax.i64(i64 %13, i64 0)
  %15 = mul nuw nsw i64 %14, 32
  %16 = call i64 @llvm.smin.i64(i64 %15, i64 32)
  br label %17

17:                                               ; preds = %20, %1
  %18 = phi i64 [ %21, %20 ], [ %16, %1 ]
  %19 = icmp slt i64 %18, 32
  br i1 %19, label %20, label %22

20:                                               ; preds = %17
  call void @wrapped_multiply_impl(ptr %5, ptr %5, i64 0, i64 8, i64 64, i64 64, i64 1, ptr %7, ptr %7, i64 0, i64 8, i64 64, i64 64, i64 1, ptr %9, ptr %9, i64 0, i64 8, i64 64, i64 64, i64 1, i64 %18)
  %21 = add i64 %18, 1
  br label %17

22:                                               ; preds = %17
  ret ptr null
}

; Function Attrs: alwaysinline
define internal void @wrapped_multiply_impl(ptr %0, ptr %1, i64 %2, i64 %3, i64 %4, i64 %5, i64 %6, ptr %7, ptr %8, i64 %9, i64 %10, i64 %11, i64 %12, i64 %13, ptr %14, ptr %15, i64 %16, i64 %17, i64 %18, i64 %19, i64 %20, i64 %21) #0 {
  %23 = udiv i64 %21, 4
  %24 = urem i64 %21, 4
  %25 = mul nsw i64 %24, 16
  %26 = sub i64 8, %23
  %27 = call i64 @llvm.smin.i64(i64 %26, i64 1)
  %28 = sub i64 64, %25
  %29 = call i64 @llvm.smin.i64(i64 %28, i64 16)
  %30 = icmp eq i64 %27, 1
  %31 = icmp eq i64 %29, 16
  %32 = and i1 %30, %31
  %33 = alloca float, i64 16, align 4
  %34 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } poison, ptr %33, 0
  %35 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %34, ptr %33, 1
  %36 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %35, i64 0, 2
  %37 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %36, i64 1, 3, 0
  %38 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %37, i64 16, 3, 1
  %39 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %38, i64 16, 4, 0
  %40 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %39, i64 1, 4, 1
  %41 = alloca float, i64 16, align 4
  %42 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } poison, ptr %41, 0
  %43 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %42, ptr %41, 1
  %44 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %43, i64 0, 2
  %45 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %44, i64 1, 3, 0
  %46 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %45, i64 16, 3, 1
  %47 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %46, i64 16, 4, 0
  %48 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %47, i64 1, 4, 1
  %49 = select i1 %32, { ptr, ptr, i64, [2 x i64], [2 x i64] } %40, { ptr, ptr, i64, [2 x i64], [2 x i64] } %48
  br i1 %32, label %50, label %54

50:                                               ; preds = %22
  %51 = mul nsw i64 %23, 64
  %52 = add nsw i64 %51, %25
  %53 = getelementptr float, ptr %1, i64 %52
  call void @llvm.memcpy.p0.p0.i64(ptr %33, ptr %53, i64 64, i1 false)
  br label %77

54:                                               ; preds = %22
  %55 = mul nsw i64 %23, 64
  %56 = add nsw i64 %55, %25
  br label %57

57:                                               ; preds = %74, %54
  %58 = phi i64 [ %75, %74 ], [ 0, %54 ]
  %59 = icmp slt i64 %58, %27
  br i1 %59, label %60, label %76

60:                                               ; preds = %57
  br label %61

61:                                               ; preds = %64, %60
  %62 = phi i64 [ %73, %64 ], [ 0, %60 ]
  %63 = icmp slt i64 %62, %29
  br i1 %63, label %64, label %74

64:                                               ; preds = %61
  %65 = getelementptr float, ptr %1, i64 %56
  %66 = mul nuw nsw i64 %58, 64
  %67 = add nuw nsw i64 %66, %62
  %68 = getelementptr inbounds nuw float, ptr %65, i64 %67
  %69 = load float, ptr %68, align 4
  %70 = mul nuw nsw i64 %58, 16
  %71 = add nuw nsw i64 %70, %62
  %72 = getelementptr inbounds nuw float, ptr %41, i64 %71
  store float %69, ptr %72, align 4
  %73 = add i64 %62, 1
  br label %61

74:                                               ; preds = %61
  %75 = add i64 %58, 1
  br label %57

76:                                               ; preds = %57
  br label %77

77:                                               ; preds = %50, %76
  %78 = alloca float, i64 16, align 4
  %79 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } poison, ptr %78, 0
  %80 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %79, ptr %78, 1
  %81 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %80, i64 0, 2
  %82 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %81, i64 1, 3, 0
  %83 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %82, i64 16, 3, 1
  %84 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %83, i64 16, 4, 0
  %85 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %84, i64 1, 4, 1
  %86 = alloca float, i64 16, align 4
  %87 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } poison, ptr %86, 0
  %88 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %87, ptr %86, 1
  %89 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %88, i64 0, 2
  %90 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %89, i64 1, 3, 0
  %91 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %90, i64 16, 3, 1
  %92 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %91, i64 16, 4, 0
  %93 = insertvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %92, i64 1, 4, 1
  %94 = select i1 %32, { ptr, ptr, i64, [2 x i64], [2 x i64] } %85, { ptr, ptr, i64, [2 x i64], [2 x i64] } %93
  br i1 %32, label %95, label %99

95:                                               ; preds = %77
  %96 = mul nsw i64 %23, 64
  %97 = add nsw i64 %96, %25
  %98 = getelementptr float, ptr %8, i64 %97
  call void @llvm.memcpy.p0.p0.i64(ptr %78, ptr %98, i64 64, i1 false)
  br label %122

99:                                               ; preds = %77
  %100 = mul nsw i64 %23, 64
  %101 = add nsw i64 %100, %25
  br label %102

102:                                              ; preds = %119, %99
  %103 = phi i64 [ %120, %119 ], [ 0, %99 ]
  %104 = icmp slt i64 %103, %27
  br i1 %104, label %105, label %121

105:                                              ; preds = %102
  br label %106

106:                                              ; preds = %109, %105
  %107 = phi i64 [ %118, %109 ], [ 0, %105 ]
  %108 = icmp slt i64 %107, %29
  br i1 %108, label %109, label %119

109:                                              ; preds = %106
  %110 = getelementptr float, ptr %8, i64 %101
  %111 = mul nuw nsw i64 %103, 64
  %112 = add nuw nsw i64 %111, %107
  %113 = getelementptr inbounds nuw float, ptr %110, i64 %112
  %114 = load float, ptr %113, align 4
  %115 = mul nuw nsw i64 %103, 16
  %116 = add nuw nsw i64 %115, %107
  %117 = getelementptr inbounds nuw float, ptr %86, i64 %116
  store float %114, ptr %117, align 4
  %118 = add i64 %107, 1
  br label %106

119:                                              ; preds = %106
  %120 = add i64 %103, 1
  br label %102

121:                                              ; preds = %102
  br label %122

122:                                              ; preds = %95, %121
  %123 = alloca float, i64 16, align 64
  %124 = extractvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %49, 1
  %125 = extractvalue { ptr, ptr, i64, [2 x i64], [2 x i64] } %94, 1
  br label %126

126:                                              ; preds = %129, %122
  %127 = phi i64 [ %137, %129 ], [ 0, %122 ]
  %128 = icmp slt i64 %127, 16
  br i1 %128, label %129, label %138

129:                                              ; preds = %126
  %130 = add i64 0, %127
  %131 = getelementptr float, ptr %124, i64 %130
  %132 = load <8 x float>, ptr %131, align 4
  %133 = getelementptr float, ptr %125, i64 %130
  %134 = load <8 x float>, ptr %133, align 4
  %135 = fmul <8 x float> %132, %134
  %136 = getelementptr float, ptr %123, i64 %130
  store <8 x float> %135, ptr %136, align 4
  %137 = add i64 %127, 8
  br label %126

138:                                              ; preds = %126
  br i1 %32, label %139, label %143

139:                                              ; preds = %138
  %140 = mul nsw i64 %23, 64
  %141 = add nsw i64 %140, %25
  %142 = getelementptr float, ptr %15, i64 %141
  call void @llvm.memcpy.p0.p0.i64(ptr %142, ptr %123, i64 64, i1 false)
  br label %166

143:                                              ; preds = %138
  %144 = mul nsw i64 %23, 64
  %145 = add nsw i64 %144, %25
  br label %146

146:                                              ; preds = %163, %143
  %147 = phi i64 [ %164, %163 ], [ 0, %143 ]
  %148 = icmp slt i64 %147, %27
  br i1 %148, label %149, label %165

149:                                              ; preds = %146
  br label %150

150:                                              ; preds = %153, %149
  %151 = phi i64 [ %162, %153 ], [ 0, %149 ]
  %152 = icmp slt i64 %151, %29
  br i1 %152, label %153, label %163

153:                                              ; preds = %150
  %154 = mul nuw nsw i64 %147, 16
  %155 = add nuw nsw i64 %154, %151
  %156 = getelementptr inbounds nuw float, ptr %123, i64 %155
  %157 = load float, ptr %156, align 4
  %158 = getelementptr float, ptr %15, i64 %145
  %159 = mul nuw nsw i64 %147, 64
  %160 = add nuw nsw i64 %159, %151
  %161 = getelementptr inbounds nuw float, ptr %158, i64 %160
  store float %157, ptr %161, align 4
  %162 = add i64 %151, 1
  br label %150

163:                                              ; preds = %150
  %164 = add i64 %147, 1
  br label %146

165:                                              ; preds = %146
  br label %166

166:                                              ; preds = %139, %165
  ret void
}

; Function Attrs: nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none)
declare i64 @llvm.smax.i64(i64, i64) #1

; Function Attrs: nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none)
declare i64 @llvm.smin.i64(i64, i64) #1

; Function Attrs: nocallback nofree nosync nounwind willreturn memory(argmem: readwrite)
declare void @llvm.memcpy.p0.p0.i64(ptr noalias writeonly captures(none), ptr noalias readonly captures(none), i64, i1 immarg) #2

attributes #0 = { alwaysinline }
attributes #1 = { nocallback nocreateundeforpoison nofree nosync nounwind speculatable willreturn memory(none) }
attributes #2 = { nocallback nofree nosync nounwind willreturn memory(argmem: readwrite) }

!llvm.module.flags = !{!0, !1}
!xla_cpu_memory_region_name = !{!2}

!0 = !{i32 2, !"Debug Info Version", i32 3}
!1 = !{i32 1, !"xla_dylib_index", i64 4}
!2 = !{!"xla_cpu_emitter__tiled_emitter__hlo_opcode__fusion"}
!3 = !{}
