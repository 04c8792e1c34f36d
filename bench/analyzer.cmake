# The analyzer on a 1024-rank x 10 000-collective synthetic job against plain read(2), and
# the Perfetto export of its analysis when exporters/ is built.
collprof_add_bench(bench_analyzer ${CMAKE_CURRENT_SOURCE_DIR}/bench_analyzer.c)
find_package(Threads REQUIRED)
target_link_libraries(bench_analyzer PRIVATE collprof_analyzer Threads::Threads m)
if(TARGET collprof_exporters)
  target_link_libraries(bench_analyzer PRIVATE collprof_exporters)
  target_compile_definitions(bench_analyzer PRIVATE COLLPROF_BENCH_PERFETTO=1)
endif()
