# collprof-sim, run as a job runs it: each test spawns build/bin/collprof-sim with
# LD_LIBRARY_PATH=build/emu (tests/emu/test_emu_sim_util.h) and reads its exit status, its
# count lines and its stderr.
if(NOT TARGET collprof-sim)
  return()
endif()
set(CP_SIM_TEST_DIR ${CMAKE_CURRENT_LIST_DIR})
collprof_add_test(test_emu_sim_cli ${CP_SIM_TEST_DIR}/test_emu_sim_cli.c)
collprof_add_test(test_emu_sim_patterns ${CP_SIM_TEST_DIR}/test_emu_sim_patterns.c)
collprof_add_test(test_emu_sim_faults ${CP_SIM_TEST_DIR}/test_emu_sim_faults.c)
# Against the real libnccl.so.2 of a CUDA toolkit (CUDA_HOME at run time, /usr/local/cuda
# otherwise): skipped when there is none, or when a driver is installed.
collprof_add_test(test_emu_sim_real_nccl ${CP_SIM_TEST_DIR}/test_emu_sim_real_nccl.c)
target_link_libraries(test_emu_sim_real_nccl PRIVATE ${CMAKE_DL_LIBS})
set_tests_properties(test_emu_sim_real_nccl PROPERTIES SKIP_RETURN_CODE 77)
foreach(t test_emu_sim_cli test_emu_sim_patterns test_emu_sim_faults test_emu_sim_real_nccl)
  add_dependencies(${t} collprof-sim)
  set_tests_properties(${t} PROPERTIES TIMEOUT 120 RESOURCE_LOCK emulated_ranks)
endforeach()
