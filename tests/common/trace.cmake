# The trace format: writer, reader and their hostile-input tests (tests/common/test_trace_*).
collprof_add_test(test_trace_roundtrip ${CMAKE_CURRENT_SOURCE_DIR}/test_trace_roundtrip.c)
collprof_add_test(test_trace_damage ${CMAKE_CURRENT_SOURCE_DIR}/test_trace_damage.c)
collprof_add_test(test_trace_hostile ${CMAKE_CURRENT_SOURCE_DIR}/test_trace_hostile.c)
collprof_add_test(test_trace_writer ${CMAKE_CURRENT_SOURCE_DIR}/test_trace_writer.c)
collprof_add_test(test_trace_records ${CMAKE_CURRENT_SOURCE_DIR}/test_trace_records.c)
collprof_add_test(test_trace_fuzz_replay ${CMAKE_CURRENT_SOURCE_DIR}/test_trace_fuzz_replay.c
                  ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_trace_reader.c)

# The libFuzzer target (`make fuzz`). The reader's sources are compiled into it rather than
# linked from collprof_common, so the whole reader carries the fuzzer's coverage and the
# sanitizers' checks.
if(COLLPROF_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "COLLPROF_FUZZ needs clang (libFuzzer): configure with CC=clang")
  endif()
  add_executable(fuzz_trace_reader
    ${CMAKE_CURRENT_SOURCE_DIR}/fuzz_trace_reader.c
    ${CMAKE_SOURCE_DIR}/common/trace_reader.c
    ${CMAKE_SOURCE_DIR}/common/trace_records.c)
  # FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION (libFuzzer's convention): the reader then does
  # not enforce its hashes, so mutations reach the record checks (see trace_reader.c).
  target_compile_definitions(fuzz_trace_reader PRIVATE FUZZING_BUILD_MODE_UNSAFE_FOR_PRODUCTION)
  target_compile_options(fuzz_trace_reader PRIVATE
    -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  target_link_options(fuzz_trace_reader PRIVATE -fsanitize=fuzzer,address,undefined)
  set_target_properties(fuzz_trace_reader PROPERTIES
    RUNTIME_OUTPUT_DIRECTORY ${CMAKE_BINARY_DIR}/bin)
endif()
