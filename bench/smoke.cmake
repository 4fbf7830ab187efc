# cmake -DBENCH=<bench_cpu> -DMODEL=<dir> -P bench/smoke.cmake: a tiny bench_cpu run must exit 0 and
# print every table (ceilings, projection GEMMs, decode, prefill, scaling, goals). Timings unchecked.
# The model comes after the list options: they take one comma-separated argument, not the model too.
execute_process(COMMAND ${BENCH} --bw-gib 0.05 --decode-steps 2 --gemm-seconds 0.01 --batches 1 --prompt-lens 16 ${MODEL}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench_cpu exited with ${rc}")
endif()
foreach(re "read bandwidth .*GB/s" "proj +M +K +N" "in_proj +16 +256 " "b +tok/s +MB/step +ceiling"
           "read bandwidth just before: [0-9.]+ GB/s" "L +tok/s +linear +conv +scan +norm" "scaling: prefill 16 tok/s" "== goals")
  if(NOT out MATCHES "${re}")
    message(FATAL_ERROR "bench_cpu output lacks /${re}/")
  endif()
endforeach()
# With several threads each bandwidth probe also times the threads' round trip (core_round_trip.h).
if(out MATCHES "read bandwidth [^\n]*, [0-9]+ threads [0-9.]+ GB/s")
  foreach(re "round trip of a cache line between two threads [^\n]*: [0-9]+ ns" "round trip between threads [0-9]+ ns")
    if(NOT out MATCHES "${re}")
      message(FATAL_ERROR "bench_cpu output lacks /${re}/")
    endif()
  endforeach()
endif()
