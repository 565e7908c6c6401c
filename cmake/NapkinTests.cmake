# napkin_add_test_group(NAME <exe> LABEL <label> SOURCES ...): one Catch2 executable per group,
# every TEST_CASE registered as its own CTest test carrying the label. `--warn NoTests` makes a
# registered name that matches no test case fail instead of passing with "No tests ran" (CMake
# splits discovered names at ';', so a TEST_CASE name must not contain one).
include(Catch)
function(napkin_add_test_group)
  cmake_parse_arguments(ARG "" "NAME;LABEL" "SOURCES;LIBS" ${ARGN})
  add_executable(${ARG_NAME} ${ARG_SOURCES})
  target_link_libraries(${ARG_NAME} PRIVATE napkin_test_main ${ARG_LIBS})
  napkin_set_warnings(${ARG_NAME})
  # A test that prints "napkin-test-skipped:" (napkin::test::skip_test) shows as skipped in CTest.
  catch_discover_tests(${ARG_NAME} TEST_PREFIX "${ARG_LABEL}." EXTRA_ARGS --warn NoTests PROPERTIES LABELS ${ARG_LABEL}
                       SKIP_REGULAR_EXPRESSION "napkin-test-skipped:")
endfunction()
