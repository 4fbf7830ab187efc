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
# The embedded model's bytes per step, recomputed from its safetensors header: bf16 projections and
# embedding (tied: read once) at 2 bytes, the norms, conv, A_log, D and dt_bias at 4 (the model's fp32
# copies) = 14 659 712 B; its fp32 state 12 layers · (conv 640·3 + ssm 8 heads·64·64) · 4 = 1 665 024 B,
# read and written per sequence.
if(MODEL MATCHES "mamba2-books-7m-bpe8k$" AND NOT out MATCHES "bytes per decode step: weights 14\\.7 MB \\+ per sequence 3\\.33 MB \\(state 1\\.67 MB")
  message(FATAL_ERROR "bench_cpu: the embedded model's bytes per decode step should read 14.7 MB + 3.33 MB (state 1.67 MB)")
endif()
# With several threads each bandwidth probe also times the threads' round trip (core_round_trip.h).
if(out MATCHES "read bandwidth [^\n]*, [0-9]+ threads [0-9.]+ GB/s")
  foreach(re "round trip of a cache line between two threads [^\n]*: [0-9]+ ns" "round trip between threads [0-9]+ ns")
    if(NOT out MATCHES "${re}")
      message(FATAL_ERROR "bench_cpu output lacks /${re}/")
    endif()
  endforeach()
endif()
