# The trace writer and reader against plain memcpy+write(2) and read(2).
collprof_add_bench(bench_trace ${CMAKE_CURRENT_SOURCE_DIR}/bench_trace.c)
