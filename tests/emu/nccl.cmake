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
