# ABI tests: collprof's own NCCL and CUDA driver declarations (common/nccl_abi.h,
# common/cuda_abi.h and the two API lists) against a real CUDA toolkit when one is installed.
# The toolkit is only read here, never used to build collprof. CUDA_HOME (environment) names
# it; /usr/local/cuda otherwise. A test whose toolkit file is missing is still registered and
# reports "skipped" with the reason.
if(DEFINED ENV{CUDA_HOME} AND NOT "$ENV{CUDA_HOME}" STREQUAL "")
  set(CP_ABI_CUDA_HOME "$ENV{CUDA_HOME}")
else()
  set(CP_ABI_CUDA_HOME /usr/local/cuda)
endif()
set(CP_ABI_DIR ${CMAKE_CURRENT_SOURCE_DIR})

add_executable(test_abi_skip ${CP_ABI_DIR}/test_abi_skip.c)
function(cp_abi_skipped_test name reason)
  add_test(NAME ${name} COMMAND test_abi_skip "${reason}")
  set_tests_properties(${name} PROPERTIES SKIP_RETURN_CODE 77)
endfunction()

# The only sources that see a real CUDA header. -isystem keeps the toolkit's own warnings
# out of -Werror without relaxing any warning for our code in the same file.
function(cp_abi_real_header_source src)
  set_source_files_properties(${CP_ABI_DIR}/${src} PROPERTIES
    COMPILE_OPTIONS "-isystem;${CP_ABI_CUDA_HOME}/include")
endfunction()

collprof_add_test(test_abi_config ${CP_ABI_DIR}/test_abi_config.c)

set(CP_ABI_NCCL_H ${CP_ABI_CUDA_HOME}/include/nccl.h)
if(EXISTS ${CP_ABI_NCCL_H} AND EXISTS ${CP_ABI_CUDA_HOME}/include/cuda_runtime.h)
  collprof_add_test(test_abi_nccl_real
    ${CP_ABI_DIR}/test_abi_nccl_real.c
    ${CP_ABI_DIR}/test_abi_nccl_real_side.c
    ${CP_ABI_DIR}/test_abi_nccl_ours_side.c
    ${CP_ABI_DIR}/test_abi_util.c)
  cp_abi_real_header_source(test_abi_nccl_real_side.c)
  target_compile_definitions(test_abi_nccl_real PRIVATE
    CP_TEST_NCCL_H="${CP_ABI_NCCL_H}"
    CP_TEST_NCCL_ABI_H="${CMAKE_SOURCE_DIR}/common/nccl_abi.h")
else()
  cp_abi_skipped_test(test_abi_nccl_real
    "no ${CP_ABI_NCCL_H} (set CUDA_HOME to a CUDA toolkit with NCCL)")
endif()

set(CP_ABI_CUDA_H ${CP_ABI_CUDA_HOME}/include/cuda.h)
if(EXISTS ${CP_ABI_CUDA_H} AND EXISTS ${CP_ABI_CUDA_HOME}/include/cudaTypedefs.h)
  collprof_add_test(test_abi_cuda_real
    ${CP_ABI_DIR}/test_abi_cuda_real.c
    ${CP_ABI_DIR}/test_abi_cuda_real_side.c
    ${CP_ABI_DIR}/test_abi_cuda_ours_side.c
    ${CP_ABI_DIR}/test_abi_util.c)
  cp_abi_real_header_source(test_abi_cuda_real_side.c)
  target_compile_definitions(test_abi_cuda_real PRIVATE
    CP_TEST_CUDA_ABI_H="${CMAKE_SOURCE_DIR}/common/cuda_abi.h"
    CP_TEST_LIBCUDA_STUB="${CP_ABI_CUDA_HOME}/lib64/stubs/libcuda.so")
  target_link_libraries(test_abi_cuda_real PRIVATE ${CMAKE_DL_LIBS})
else()
  cp_abi_skipped_test(test_abi_cuda_real "no ${CP_ABI_CUDA_H} (set CUDA_HOME to a CUDA toolkit)")
endif()

set(CP_ABI_CUPTI_H ${CP_ABI_CUDA_HOME}/include/cupti_activity.h)
if(EXISTS ${CP_ABI_CUPTI_H})
  collprof_add_test(test_abi_cupti_real
    ${CP_ABI_DIR}/test_abi_cupti_real.c
    ${CP_ABI_DIR}/test_abi_cupti_real_side.c
    ${CP_ABI_DIR}/test_abi_cupti_ours_side.c
    ${CP_ABI_DIR}/test_abi_util.c)
  cp_abi_real_header_source(test_abi_cupti_real_side.c)
  # the toolkit keeps libcupti in lib64/ (or lib/); older ones in extras/CUPTI/lib64
  set(CP_ABI_LIBCUPTI ${CP_ABI_CUDA_HOME}/lib64/libcupti.so)
  foreach(cand ${CP_ABI_CUDA_HOME}/lib/libcupti.so ${CP_ABI_CUDA_HOME}/extras/CUPTI/lib64/libcupti.so)
    if(NOT EXISTS ${CP_ABI_LIBCUPTI} AND EXISTS ${cand})
      set(CP_ABI_LIBCUPTI ${cand})
    endif()
  endforeach()
  target_compile_definitions(test_abi_cupti_real PRIVATE
    CP_TEST_CUPTI_ABI_H="${CMAKE_SOURCE_DIR}/common/cupti_abi.h"
    CP_TEST_LIBCUPTI="${CP_ABI_LIBCUPTI}")
else()
  cp_abi_skipped_test(test_abi_cupti_real
    "no ${CP_ABI_CUPTI_H} (set CUDA_HOME to a CUDA toolkit with CUPTI)")
endif()

set(CP_ABI_LIBNCCL ${CP_ABI_CUDA_HOME}/lib64/libnccl.so.2)
if(EXISTS ${CP_ABI_LIBNCCL})
  collprof_add_test(test_abi_nccl_symbols
    ${CP_ABI_DIR}/test_abi_nccl_symbols.c
    ${CP_ABI_DIR}/test_abi_util.c)
  target_compile_definitions(test_abi_nccl_symbols PRIVATE CP_TEST_LIBNCCL="${CP_ABI_LIBNCCL}")
  target_link_libraries(test_abi_nccl_symbols PRIVATE ${CMAKE_DL_LIBS})
  # Also skipped, not failed, if the library goes away after configuring.
  set_tests_properties(test_abi_nccl_symbols PROPERTIES SKIP_RETURN_CODE 77)
else()
  cp_abi_skipped_test(test_abi_nccl_symbols
    "no ${CP_ABI_LIBNCCL} (set CUDA_HOME to a CUDA toolkit with NCCL)")
endif()
