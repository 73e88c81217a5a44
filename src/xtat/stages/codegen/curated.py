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

# Listed for GPU; not yet run on hardware from this project (see README).
GPU: tuple[CuratedOption, ...] = (
    CuratedOption("xla_gpu_autotune_level", (0, 1, 2, 3, 4), why="GEMM/conv autotuning depth"),
    CuratedOption("xla_gpu_enable_triton_gemm", (False, True)),
    CuratedOption("xla_gpu_triton_gemm_any", (False, True)),
    CuratedOption("xla_gpu_enable_cublaslt", (False, True)),
    CuratedOption("xla_gpu_enable_latency_hiding_scheduler", (False, True)),
    CuratedOption("xla_gpu_enable_while_loop_double_buffering", (False, True)),
    CuratedOption("xla_gpu_exhaustive_tiling_search", (False, True)),
    CuratedOption("xla_gpu_enable_reduction_epilogue_fusion", (False, True)),
    CuratedOption("xla_gpu_enable_fast_min_max", (False, True), relaxes_numerics=True),
)

BY_PLATFORM: dict[str, tuple[CuratedOption, ...]] = {"cpu": CPU, "gpu": GPU, "cuda": GPU, "rocm": GPU}
