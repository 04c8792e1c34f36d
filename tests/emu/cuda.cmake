# Tests of the emulated driver, NVML, host preload and topology (emu/cuda, emu/nvml,
# emu/host, emu/common). Each links the library under test directly; the host test runs a
# child under LD_PRELOAD as the launcher does.
find_package(Threads REQUIRED)
collprof_add_test(test_emu_cuda_streams ${CMAKE_CURRENT_LIST_DIR}/test_emu_cuda_streams.c)
target_link_libraries(test_emu_cuda_streams PRIVATE emu_cuda Threads::Threads)
collprof_add_test(test_emu_cuda_api ${CMAKE_CURRENT_LIST_DIR}/test_emu_cuda_api.c)
target_link_libraries(test_emu_cuda_api PRIVATE emu_cuda ${CMAKE_DL_LIBS})
collprof_add_test(test_emu_topo ${CMAKE_CURRENT_LIST_DIR}/test_emu_topo.c)
target_link_libraries(test_emu_topo PRIVATE emu_common)
collprof_add_test(test_emu_nvml ${CMAKE_CURRENT_LIST_DIR}/test_emu_nvml.c)
target_link_libraries(test_emu_nvml PRIVATE emu_nvml emu_cuda)
collprof_add_test(test_emu_host ${CMAKE_CURRENT_LIST_DIR}/test_emu_host.c)
target_link_libraries(test_emu_host PRIVATE emu_common)
add_dependencies(test_emu_host emu_host)
