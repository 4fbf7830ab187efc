# cmake -DBENCH=<bench_cpu> -DMODEL=<dir> -DWORK=<scratch> -P bench/bad_model.cmake: bench_cpu checks
# every model before measuring anything: a good model followed by a missing one, or by a directory
# whose config.json does not parse, must fail at once (exit 2) naming the bad one, with no
# ceilings measured.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/broken)
file(WRITE ${WORK}/broken/config.json "{ not json")
foreach(bad /no/such/model ${WORK}/broken)
  execute_process(COMMAND ${BENCH} ${MODEL} ${bad} --bw-gib 0.05 --prompt-lens 16 --decode-steps 2 --gemm-seconds 0.01
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 2)
    message(FATAL_ERROR "bench_cpu ${MODEL} ${bad}: expected exit 2 (as a bad argument), got ${rc}\n${out}")
  endif()
  if(NOT err MATCHES "error: [^\n]*${bad}.*nothing measured")
    message(FATAL_ERROR "bench_cpu ${MODEL} ${bad}: stderr should name the bad model:\n${err}")
  endif()
  if(out MATCHES "read bandwidth|== ceilings" OR err MATCHES "terminate called|Segmentation|Aborted")
    message(FATAL_ERROR "bench_cpu ${MODEL} ${bad}: measured (or crashed) before rejecting the model:\n${out}${err}")
  endif()
endforeach()
