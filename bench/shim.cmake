# The shim's cost per call: bare, COLLPROF_ENABLE=0 and enabled, against the stub NCCL.
collprof_add_bench(bench_shim ${CMAKE_CURRENT_SOURCE_DIR}/bench_shim.c)
if(TARGET stub_nccl)
  target_link_libraries(bench_shim PRIVATE stub_nccl)
  set_target_properties(bench_shim PROPERTIES BUILD_RPATH ${CMAKE_BINARY_DIR}/stub_nccl)
  add_dependencies(bench_shim collprof_shim)
endif()
target_link_libraries(bench_shim PRIVATE ${CMAKE_DL_LIBS})
# shim.events_ns_per_call runs on the emulated libcuda.so.1 when it is built.
if(TARGET emu_cuda)
  add_dependencies(bench_shim emu_cuda)
endif()
