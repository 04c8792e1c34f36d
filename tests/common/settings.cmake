collprof_add_test(test_settings ${CMAKE_CURRENT_SOURCE_DIR}/test_settings.c)
collprof_add_test(test_log_clock ${CMAKE_CURRENT_SOURCE_DIR}/test_log_clock.c)
