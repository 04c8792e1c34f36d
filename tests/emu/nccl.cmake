# Tests of the emulated libnccl.so.2 (emu/nccl). Ranks are processes forked by the test (or
# threads, for ncclCommInitAll), each calling the emulated NCCL and driver like a real rank.
find_package(Threads REQUIRED)
# The conversions and reduction kernels on their own: compiled in, no library needed.
collprof_add_test(test_emu_nccl_kernels ${CMAKE_CURRENT_LIST_DIR}/test_emu_nccl_kernels.c
  ${CMAKE_SOURCE_DIR}/emu/nccl/convert.c ${CMAKE_SOURCE_DIR}/emu/nccl/reduce_kernels.c)
target_link_libraries(test_emu_nccl_kernels PRIVATE m)

foreach(t matrix api comms time log)
  collprof_add_test(test_emu_nccl_${t} ${CMAKE_CURRENT_LIST_DIR}/test_emu_nccl_${t}.c)
  target_link_libraries(test_emu_nccl_${t} PRIVATE emu_nccl emu_cuda m Threads::Threads)
endforeach()
# The matrix writes and reads elements of every type with the codec test_emu_nccl_kernels
# checks; the time tests compare with the model itself (emu_common's cpemu_model_ns).
target_sources(test_emu_nccl_matrix PRIVATE ${CMAKE_SOURCE_DIR}/emu/nccl/convert.c)
target_link_libraries(test_emu_nccl_time PRIVATE emu_common)
# Jobs whose timings are judged against the model, and the log test whose killed job's
# segment must survive until its own next job: another emulated job running beside them
# makes ranks late for real, and its ncclGetUniqueId sweeps dead segments away.
set_tests_properties(test_emu_nccl_time test_emu_nccl_log PROPERTIES RESOURCE_LOCK emulated_ranks)
# The profiler plugin support: a probe plugin (profiler_plugin_probe.c) built four ways into
# tests/emu/prof/ as libnccl-profiler-<variant>.so: probe (v5), probev4 (v4 only), probefail
# (a v5 whose init fails), nosym (no ncclProfiler_v* symbol).
foreach(v probe probev4 probefail nosym)
  add_library(nccl_profiler_${v} MODULE ${CMAKE_CURRENT_LIST_DIR}/profiler_plugin_probe.c)
  set_target_properties(nccl_profiler_${v} PROPERTIES PREFIX "lib" OUTPUT_NAME nccl-profiler-${v}
    LIBRARY_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/tests/emu/prof)
  target_include_directories(nccl_profiler_${v} PRIVATE ${CMAKE_SOURCE_DIR})
endforeach()
target_compile_definitions(nccl_profiler_probe PRIVATE PROBE_V5)
target_compile_definitions(nccl_profiler_probev4 PRIVATE PROBE_V4)
target_compile_definitions(nccl_profiler_probefail PRIVATE PROBE_FAIL)
collprof_add_test(test_emu_nccl_profiler ${CMAKE_CURRENT_LIST_DIR}/test_emu_nccl_profiler.c)
target_link_libraries(test_emu_nccl_profiler PRIVATE emu_nccl emu_cuda m Threads::Threads)
add_dependencies(test_emu_nccl_profiler nccl_profiler_probe nccl_profiler_probev4
  nccl_profiler_probefail nccl_profiler_nosym)
# judges kernel start times across ranks (COLLPROF_EMU_DELAY)
set_tests_properties(test_emu_nccl_profiler PROPERTIES RESOURCE_LOCK emulated_ranks)
