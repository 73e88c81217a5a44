"""The XLA options worth searching, per backend, with their search domains.

Names, types and defaults come from the installed XLA (`catalog`); this table
only says which options matter for speed and which values to try. Options in
`relaxes_numerics` may change results beyond rounding (fast math and kin) and
are searched only when the user opts in with a tolerance.

Repeated-enum options take comma-separated enum names; "" means the empty set.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CuratedOption:
    name: str
    values: tuple  # candidate values; the installed default is added if absent
    relaxes_numerics: bool = False
    why: str = ""
    # Changes what XLA:GPU's autotuner would choose: a candidate that sets it autotunes afresh
    # instead of loading the run's pinned autotune results (stages.tiles).
    replaces_autotuning: bool = False


_FUSION = "LIBRARY_FUSION_TYPE_"

CPU: tuple[CuratedOption, ...] = (
    CuratedOption("xla_cpu_opt_preset", ("CPU_OPT_PRESET_DEFAULT", "CPU_OPT_PRESET_FAST_RUNTIME"),
                  why="bundle of CPU pipeline choices"),
    CuratedOption("xla_backend_optimization_level", (1, 2, 3), why="LLVM optimisation level"),
    CuratedOption("xla_llvm_disable_expensive_passes", (False, True), why="skips costly LLVM passes"),
    CuratedOption("xla_cpu_use_fusion_emitters", (False, True), why="MLIR fusion emitters vs legacy IR emitters"),
    CuratedOption("xla_cpu_use_xnnpack", (False, True), why="XNNPACK library kernels"),
    CuratedOption("xla_cpu_experimental_xnn_graph_fusion_mode",
                  ("XNN_GRAPH_FUSION_MODE_DISABLED", "XNN_GRAPH_FUSION_MODE_GREEDY",
                   "XNN_GRAPH_FUSION_MODE_GREEDY_SLINKY"), why="XNNPACK graph fusion"),
    CuratedOption("xla_cpu_experimental_xnn_fusion_type",
                  ("", f"{_FUSION}DOT", f"{_FUSION}DOT,{_FUSION}ELTWISE"), why="ops fused into XNNPACK"),
    CuratedOption("xla_cpu_experimental_ynn_fusion_type",
                  ("", f"{_FUSION}INDIVIDUAL_DOT",
                   f"{_FUSION}INDIVIDUAL_DOT,{_FUSION}INDIVIDUAL_CONVOLUTION,{_FUSION}REDUCE",
                   f"{_FUSION}DOT,{_FUSION}ELTWISE,{_FUSION}REDUCE"), why="ops handed to YNNPACK"),
    CuratedOption("xla_cpu_max_isa", ("", "SSE4_2", "AVX", "AVX2", "AVX512"), why="widest instruction set used"),
    CuratedOption("xla_cpu_prefer_vector_width", (128, 256, 512), why="LLVM preferred vector width"),
    CuratedOption("xla_cpu_scheduler_type",
                  ("CPU_SCHEDULER_TYPE_DEFAULT", "CPU_SCHEDULER_TYPE_MEMORY_OPTIMIZED",
                   "CPU_SCHEDULER_TYPE_CONCURRENCY_OPTIMIZED"), why="HLO instruction scheduler"),
    CuratedOption("xla_cpu_enable_concurrency_optimized_scheduler", (False, True)),
    CuratedOption("xla_cpu_multi_thread_eigen", (False, True), why="Eigen thread pool for dots/convs"),
    CuratedOption("xla_cpu_copy_insertion_use_region_analysis", (False, True)),
    CuratedOption("xla_cpu_experimental_enable_tiling_propagation", (False, True)),
    # Numerics-relaxing: only with --allow-numerics-change and a tolerance.
    CuratedOption("xla_cpu_enable_fast_math", (False, True), relaxes_numerics=True),
    CuratedOption("xla_cpu_fast_math_honor_nans", (False, True), relaxes_numerics=True),
    CuratedOption("xla_cpu_fast_math_honor_infs", (False, True), relaxes_numerics=True),
    CuratedOption("xla_cpu_fast_math_honor_division", (False, True), relaxes_numerics=True),
    CuratedOption("xla_cpu_fast_math_honor_functions", (False, True), relaxes_numerics=True),
    CuratedOption("xla_cpu_enable_fast_min_max", (False, True), relaxes_numerics=True,
                  why="min/max without NaN propagation"),
)

# XLA:GPU. Not yet run on GPU hardware from this project (see docs/gpu.md); names and types are checked
# against the installed XLA's catalog in the default test run. `optimization_level` and
# `memory_fitting_level` are build options (jax passes them on ExecutableBuildOptions; values are
# jax's EffortLevel O0..O3). This XLA has no TF32 switch: jax's default matmul precision already
# lets XLA use TF32; the bf16 dot algorithm is the numerics-relaxing matmul option it has.
_EFFORT = (9, 19, 29, 39)
_COMMAND = "FUSION,CUBLAS,CUBLASLT,CUSTOM_CALL,CONDITIONAL"
GPU: tuple[CuratedOption, ...] = (
    CuratedOption("xla_gpu_autotune_level", (0, 1, 2, 3, 4), why="GEMM/conv autotuning depth",
                  replaces_autotuning=True),
    CuratedOption("xla_gpu_exhaustive_tiling_search", (False, True), why="every tile config, not the per-arch list",
                  replaces_autotuning=True),
    CuratedOption("xla_gpu_cublas_fallback", (False, True), why="cuBLAS among the autotuner's GEMM candidates",
                  replaces_autotuning=True),
    CuratedOption("xla_gpu_enable_triton_gemm", (False, True), why="GEMM fusions emitted by Triton"),
    CuratedOption("xla_gpu_triton_gemm_any", (False, True), why="Triton for any GEMM it supports"),
    CuratedOption("xla_gpu_enable_cublaslt", (False, True), why="cuBLASLt for library GEMMs"),
    CuratedOption("xla_gpu_cudnn_gemm_fusion_level", (0, 1, 2, 3), why="GEMM fusions handed to cuDNN"),
    CuratedOption("xla_gpu_enable_command_buffer", ("", "FUSION", _COMMAND), why="CUDA graphs for these commands"),
    CuratedOption("xla_gpu_graph_min_graph_size", (1, 2, 5, 10, 20), why="smallest CUDA graph worth building"),
    CuratedOption("xla_gpu_enable_latency_hiding_scheduler", (False, True)),
    CuratedOption("xla_gpu_enable_while_loop_double_buffering", (False, True)),
    CuratedOption("xla_gpu_enable_while_loop_unrolling",
                  ("WHILE_LOOP_UNROLLING_NO_UNROLL", "WHILE_LOOP_UNROLLING_DOUBLE_BUFFER",
                   "WHILE_LOOP_UNROLLING_AUTO_UNROLL"), why="while-loop unrolling"),
    CuratedOption("xla_gpu_experimental_enable_fusion_block_level_rewriter", (False, True),
                  why="Triton emitter for non-GEMM fusions"),
    CuratedOption("xla_gpu_experimental_enable_triton_heroless_priority_fusion", (False, True),
                  why="fusion emitter choice for fusions without a hero"),
    CuratedOption("optimization_level", _EFFORT, why="XLA's compile effort (build option)"),
    CuratedOption("memory_fitting_level", _EFFORT, why="effort to fit in device memory (build option)"),
    # Numerics-relaxing: only with --allow-numerics-change and a tolerance.
    CuratedOption("xla_gpu_enable_fast_min_max", (False, True), relaxes_numerics=True),
    CuratedOption("xla_gpu_default_to_alg_dot_bf16_bf16_f32", (False, True), relaxes_numerics=True,
                  why="f32 dots computed with bf16 inputs"),
)
REPLACES_AUTOTUNING = frozenset(c.name for c in GPU if c.replaces_autotuning)

BY_PLATFORM: dict[str, tuple[CuratedOption, ...]] = {"cpu": CPU, "gpu": GPU, "cuda": GPU, "rocm": GPU}
