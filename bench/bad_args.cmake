# cmake -DBENCH=<bench_cpu> -P bench/bad_args.cmake: bad flags give one "error: ..." line and exit 2
# like mamba-cli (not CLI11's own codes, e.g. 105 for a value out of range), before any measuring.
foreach(args "--prompt-lens;16,,32" "--batches;1,8," "--prompt-lens;0" "--threads;5000" "--threads;0x2" "--bw-gib;0x1p-1" "--decode-steps;" "--decode-steps;x" "--bogus" "--precision;fp8" "--precision;1")
  execute_process(COMMAND ${BENCH} ${args} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  string(REPLACE ";" " " a "${args}")
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "bench_cpu ${a}: expected exit 2, got ${rc}\n${out}${err}")
  endif()
  if(NOT err MATCHES "^error: ")
    message(FATAL_ERROR "bench_cpu ${a}: stderr should start with 'error: ':\n${err}")
  endif()
  if(out MATCHES "read bandwidth|== ceilings")
    message(FATAL_ERROR "bench_cpu ${a}: measured before rejecting the flags:\n${out}")
  endif()
endforeach()
# No model given: $MAMBA_MODEL, and one that does not resolve is named as such (as mamba-cli),
# not as a path the user never typed.
execute_process(COMMAND ${CMAKE_COMMAND} -E env MAMBA_MODEL=/no/such/model-env ${BENCH} --bw-gib 0.05
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "^error: MAMBA_MODEL=/no/such/model-env \\(the model used when none is given\\) does not resolve")
  message(FATAL_ERROR "MAMBA_MODEL=/no/such/model-env bench_cpu: exit ${rc}\n${out}${err}")
endif()
# bench_load (-DLOAD=<bench_load>): one model; --model and the positional together are an error
# (it kept one of them silently).
if(DEFINED LOAD AND DEFINED MODEL)
  execute_process(COMMAND ${LOAD} --model ${MODEL} ${MODEL} --reps 1 RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "^error: give the model once, as the argument or with --model" OR out MATCHES "model:")
    message(FATAL_ERROR "bench_load --model M M: expected exit 2 naming both, before measuring; got ${rc}\n${out}${err}")
  endif()
endif()
