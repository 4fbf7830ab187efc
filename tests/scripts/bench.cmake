# Smoke tests of bench_cpu and bench_forward (builds with bench/ only): a tiny run on the embedded model exits 0 and
# prints its tables (bench/smoke.cmake). Speed goals live in the bench's own output, not in tests.
if(TARGET bench_cpu)
  add_test(NAME bench_cpu_smoke
           COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:bench_cpu>
                   -DMODEL=${PROJECT_SOURCE_DIR}/models/${MAMBA_DEFAULT_MODEL_NAME} -P ${PROJECT_SOURCE_DIR}/bench/smoke.cmake)
  set_tests_properties(bench_cpu_smoke PROPERTIES LABELS bench TIMEOUT 300 ENVIRONMENT "OMP_WAIT_POLICY=passive")
  # A bad model among good ones fails before anything is measured (bench/bad_model.cmake).
  add_test(NAME bench_cpu_bad_model
           COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:bench_cpu> -DWORK=${PROJECT_BINARY_DIR}/bench-test-work/bad_model
                   -DMODEL=${PROJECT_SOURCE_DIR}/models/${MAMBA_DEFAULT_MODEL_NAME} -P ${PROJECT_SOURCE_DIR}/bench/bad_model.cmake)
  set_tests_properties(bench_cpu_bad_model PROPERTIES LABELS bench TIMEOUT 60)
  # Bad flags: one "error: ..." line, exit 2 (bench/bad_args.cmake).
  set(load_arg "")
  if(TARGET bench_load)
    set(load_arg -DLOAD=$<TARGET_FILE:bench_load> -DMODEL=${PROJECT_SOURCE_DIR}/models/${MAMBA_DEFAULT_MODEL_NAME})
  endif()
  add_test(NAME bench_cpu_bad_args COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:bench_cpu> ${load_arg}
           -P ${PROJECT_SOURCE_DIR}/bench/bad_args.cmake)
  set_tests_properties(bench_cpu_bad_args PROPERTIES LABELS bench TIMEOUT 60)
endif()
if(TARGET bench_forward)
  # A tiny bench_forward run, and its --precision (bench/forward_smoke.cmake).
  add_test(NAME bench_forward_smoke
           COMMAND ${CMAKE_COMMAND} -DBENCH=$<TARGET_FILE:bench_forward>
                   -DMODEL=${PROJECT_SOURCE_DIR}/models/${MAMBA_DEFAULT_MODEL_NAME} -P ${PROJECT_SOURCE_DIR}/bench/forward_smoke.cmake)
  set_tests_properties(bench_forward_smoke PROPERTIES LABELS bench TIMEOUT 120 ENVIRONMENT "OMP_WAIT_POLICY=passive")
endif()
