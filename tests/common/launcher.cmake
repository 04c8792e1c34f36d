# common/launcher.h: launcher variables and the ncclUniqueId exchange, in one process and its
# forked ranks over loopback TCP.
collprof_add_test(test_launcher ${CMAKE_CURRENT_SOURCE_DIR}/test_launcher.c)
target_link_libraries(test_launcher PRIVATE collprof_launcher)
set_tests_properties(test_launcher PROPERTIES TIMEOUT 60)
