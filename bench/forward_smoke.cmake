# cmake -DBENCH=<bench_forward> -DMODEL=<dir> -P bench/forward_smoke.cmake: a tiny bench_forward run
# exits 0 and prints the kernels it ran (cpu: line), its row and the precision it loaded with; --precision int8 on a float checkpoint
# is refused (exit 2) with the reason. Timings unchecked.
execute_process(COMMAND ${BENCH} --threads 1 --prompt-len 8 --decode-steps 2 --precision exact ${MODEL}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "bench_forward exited with ${rc}")
endif()
foreach(re "^cpu: (baseline|avx2|avx512) \\(" "prefill tok/s +decode tok/s" "\\(precision exact; prompt 8 tokens; decode 2 steps")
  if(NOT out MATCHES "${re}")
    message(FATAL_ERROR "bench_forward output lacks /${re}/")
  endif()
endforeach()
execute_process(COMMAND ${BENCH} --threads 1 --prompt-len 8 --decode-steps 2 --precision int8 ${MODEL}
                RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
if(NOT rc EQUAL 2 OR NOT err MATCHES "error: .*precision int8.*not quantized")
  message(FATAL_ERROR "bench_forward --precision int8 on a float checkpoint: exit ${rc}, stderr: ${err}")
endif()
