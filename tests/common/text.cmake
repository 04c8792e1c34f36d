collprof_add_test(test_text ${CMAKE_CURRENT_SOURCE_DIR}/test_text.c)
