# One refresh of `collprof top` (scan of 64 synthetic stats blocks, lateness, snapshot)
# against a plain pread of the same blocks.
collprof_add_bench(bench_top ${CMAKE_CURRENT_SOURCE_DIR}/bench_top.c)
target_link_libraries(bench_top PRIVATE collprof_tui_live)
