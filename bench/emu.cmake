# The emulation's speed: an 8-rank ddp job of collprof-sim, wall time against the model's.
if(TARGET collprof-sim)
  collprof_add_bench(bench_emu ${CMAKE_CURRENT_SOURCE_DIR}/bench_emu.c)
  add_dependencies(bench_emu collprof-sim)
endif()
