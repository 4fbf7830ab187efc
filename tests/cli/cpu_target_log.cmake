# `run` and `perplexity` name the CPU dispatch target and why on stderr, once, before the model
# loads ("cpu: TARGET (why), weight prefetch on|off (why)", and on the avx512 target ", batch tile
# 8x3|4x6 (why)"), and a bad MAMBA_CPU_TARGET, MAMBA_WEIGHT_PREFETCH or MAMBA_BATCH_TILE is reported
# at that point (before the "model:" line), not at the first matmul.
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
set(model ${SRC}/models/mamba2-books-7m-bpe8k)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

# Detected (no variable): exactly one cpu line, before the model line.
unset(ENV{MAMBA_CPU_TARGET})
unset(ENV{MAMBA_WEIGHT_PREFETCH})
unset(ENV{MAMBA_BATCH_TILE})
cli_run_ok(r run -m ${model} -p "Once" -n 2)
if(NOT r_ERR MATCHES "^cpu: (baseline|avx2) \\(detected[;)][^\n]*, weight prefetch (on \\(detected\\)|off \\(detected: AMD family 19h with AVX-512\\))\nmodel: "
   AND NOT r_ERR MATCHES "^cpu: avx512 \\(detected[;)][^\n]*, weight prefetch (on \\(detected\\)|off \\(detected: AMD family 19h with AVX-512\\)), batch tile (8x3 \\(detected\\)|4x6 \\(detected: AMD family 1[A-F]h\\))\nmodel: ")
  message(FATAL_ERROR "run: expected 'cpu: TARGET (detected...)' as the first stderr line, then 'model: ...':\n${r_ERR}")
endif()
string(REGEX MATCHALL "cpu: " lines "${r_ERR}")
list(LENGTH lines n)
if(NOT n EQUAL 1)
  message(FATAL_ERROR "run: expected one cpu line, got ${n}:\n${r_ERR}")
endif()
# The default precision (auto) names the tier it chose for this bf16 checkpoint and why: bf16 where
# the avx512 target runs on a CPU with AVX-512 BF16, else exact; a named exact tier adds nothing.
if(r_ERR MATCHES "^cpu: avx512 \\([^\n]*BF16 yes")
  set(want_model "model: [^\n]*mamba2-books-7m-bpe8k \\(mamba2, 12 layers, precision bf16 \\(auto: bf16 weights, AVX-512 BF16\\)\\)\n")
else()
  set(want_model "model: [^\n]*mamba2-books-7m-bpe8k \\(mamba2, 12 layers, precision exact \\(auto: no AVX-512 BF16 on this CPU target\\)\\)\n")
endif()
if(NOT r_ERR MATCHES "${want_model}")
  message(FATAL_ERROR "run: expected the model line '${want_model}':\n${r_ERR}")
endif()
if(r_ERR MATCHES "^cpu: avx512 \\([^\n]*BF16 yes")  # a named tier other than exact: named, no reason
  cli_run_ok(b run -m ${model} -p "Once" -n 2 --precision bf16)
  if(NOT b_ERR MATCHES "model: [^\n]*mamba2-books-7m-bpe8k \\(mamba2, 12 layers, precision bf16\\)\n")
    message(FATAL_ERROR "run --precision bf16: expected ', precision bf16' on the model line:\n${b_ERR}")
  endif()
endif()
cli_run_ok(r run -m ${model} -p "Once" -n 2 --precision exact)
if(NOT r_ERR MATCHES "model: [^\n]*mamba2-books-7m-bpe8k \\(mamba2, 12 layers, precision exact\\)\n")
  message(FATAL_ERROR "run --precision exact: expected ', precision exact' on the model line:\n${r_ERR}")
endif()

# Forced: baseline runs on every x86-64 CPU.
set(ENV{MAMBA_CPU_TARGET} Baseline)  # any case (AVX2, Avx512)
cli_run_ok(r run -m ${model} -p "Once" -n 2)
if(NOT r_ERR MATCHES "^cpu: baseline \\(forced by MAMBA_CPU_TARGET\\), weight prefetch (on|off) \\(detected[^\n]*\\)\nmodel: ")
  message(FATAL_ERROR "run with MAMBA_CPU_TARGET=baseline: expected 'cpu: baseline (forced by MAMBA_CPU_TARGET)':\n${r_ERR}")
endif()
file(WRITE ${WORK}/p.ids "1 2 3 4 5")
cli_run_ok(r perplexity -m ${model} --ids-file ${WORK}/p.ids)
if(NOT r_ERR MATCHES "^cpu: baseline \\(forced by MAMBA_CPU_TARGET\\), weight prefetch [^\n]*\nmodel: [^\n]*mamba2-books-7m-bpe8k \\(mamba2, 12 layers, precision exact \\(auto: no AVX-512 BF16 on this CPU target\\)\\)\n")
  message(FATAL_ERROR "perplexity with MAMBA_CPU_TARGET=baseline: expected the cpu line, then the model line (auto: exact, no AVX-512 BF16):\n${r_ERR}")
endif()

# The bf16 tier needs AVX-512 BF16: on the baseline target (any CPU) the load is refused, naming it.
cli_run(r run -m ${model} -p "Once" -n 2 --precision bf16)
if(NOT r_RC EQUAL 2 OR NOT r_ERR MATCHES "error: precision bf16 needs a CPU with AVX-512 BF16[^
]*baseline \\(forced by MAMBA_CPU_TARGET\\)")
  message(FATAL_ERROR "run --precision bf16 with MAMBA_CPU_TARGET=baseline: expected exit 2 and the refusal, got ${r_RC}:
${r_ERR}")
endif()

# Invalid: the warning and the reason come first, then the model loads and runs on the detected target.
set(ENV{MAMBA_CPU_TARGET} avx3)
cli_run_ok(r run -m ${model} -p "Once" -n 2)
if(NOT r_ERR MATCHES "^warning: MAMBA_CPU_TARGET=avx3 is not one of baseline\\|avx2\\|avx512; using [a-z0-9]+\ncpu: (baseline|avx2|avx512) \\(detected[^\n]*; MAMBA_CPU_TARGET=avx3 ignored: not one of baseline\\|avx2\\|avx512\\), weight prefetch [^\n]*\nmodel: ")
  message(FATAL_ERROR "run with MAMBA_CPU_TARGET=avx3: expected the warning, then the cpu line, then the model line:\n${r_ERR}")
endif()
unset(ENV{MAMBA_CPU_TARGET})

# MAMBA_WEIGHT_PREFETCH: forced either way (bitwise the same text), an invalid value warned about and ignored.
foreach(v on off)
  set(ENV{MAMBA_WEIGHT_PREFETCH} ${v})
  cli_run_ok(${v} run -m ${model} -p "Once" -n 8 --temp 0)
  if(NOT ${v}_ERR MATCHES "^cpu: [^\n]*, weight prefetch ${v} \\(forced by MAMBA_WEIGHT_PREFETCH\\)(, batch tile [^\n]*)?\nmodel: ")
    message(FATAL_ERROR "run with MAMBA_WEIGHT_PREFETCH=${v}: expected 'weight prefetch ${v} (forced by MAMBA_WEIGHT_PREFETCH)':\n${${v}_ERR}")
  endif()
endforeach()
if(NOT on_OUT STREQUAL off_OUT)
  message(FATAL_ERROR "greedy text differs with and without the weight prefetch:\n${on_OUT}\n---\n${off_OUT}")
endif()
set(ENV{MAMBA_WEIGHT_PREFETCH} sometimes)
cli_run_ok(r run -m ${model} -p "Once" -n 2)
if(NOT r_ERR MATCHES "^warning: MAMBA_WEIGHT_PREFETCH=sometimes is not one of on\\|off; using (on|off)\ncpu: [^\n]*, weight prefetch (on|off) \\(detected[^\n]*; MAMBA_WEIGHT_PREFETCH=sometimes ignored: not one of on\\|off\\)(, batch tile [^\n]*)?\nmodel: ")
  message(FATAL_ERROR "run with MAMBA_WEIGHT_PREFETCH=sometimes: expected the warning, then the cpu line, then the model line:\n${r_ERR}")
endif()
unset(ENV{MAMBA_WEIGHT_PREFETCH})

# MAMBA_BATCH_TILE (the avx512 target's decode-batch tile): forced either way (bitwise the same text:
# a prompt of more than 4 tokens runs its prefill projections in the tile), an invalid value warned
# about and ignored. Other targets do not name it.
set(prompt "The old house on the hill had stood empty for many years, and the children of the village")
foreach(v 8x3 4x6)
  set(ENV{MAMBA_BATCH_TILE} ${v})
  cli_run_ok(t${v} run -m ${model} -p "${prompt}" -n 8 --temp 0)
  if(t${v}_ERR MATCHES "^cpu: avx512 " AND NOT t${v}_ERR MATCHES "^cpu: [^\n]*, batch tile ${v} \\(forced by MAMBA_BATCH_TILE\\)\nmodel: ")
    message(FATAL_ERROR "run with MAMBA_BATCH_TILE=${v}: expected 'batch tile ${v} (forced by MAMBA_BATCH_TILE)':\n${t${v}_ERR}")
  endif()
  if(NOT t${v}_ERR MATCHES "^cpu: avx512 " AND t${v}_ERR MATCHES "batch tile")
    message(FATAL_ERROR "run with MAMBA_BATCH_TILE=${v} below avx512: the batch tile is not named there:\n${t${v}_ERR}")
  endif()
endforeach()
if(NOT t8x3_OUT STREQUAL t4x6_OUT)
  message(FATAL_ERROR "greedy text differs between the two batch tiles:\n${t8x3_OUT}\n---\n${t4x6_OUT}")
endif()
# Values in any case (as MAMBA_CPU_TARGET); an invalid tile is warned about on every target.
set(ENV{MAMBA_WEIGHT_PREFETCH} OFF)
set(ENV{MAMBA_BATCH_TILE} 4X6)
cli_run_ok(r run -m ${model} -p "Once" -n 2)
if(NOT r_ERR MATCHES "^cpu: [^\n]*, weight prefetch off \\(forced by MAMBA_WEIGHT_PREFETCH\\)(, batch tile 4x6 \\(forced by MAMBA_BATCH_TILE\\))?\nmodel: "
   OR (r_ERR MATCHES "^cpu: avx512 " AND NOT r_ERR MATCHES "batch tile 4x6 \\(forced"))
  message(FATAL_ERROR "run with MAMBA_WEIGHT_PREFETCH=OFF MAMBA_BATCH_TILE=4X6: expected both forced:\n${r_ERR}")
endif()
unset(ENV{MAMBA_WEIGHT_PREFETCH})
set(ENV{MAMBA_CPU_TARGET} baseline)
set(ENV{MAMBA_BATCH_TILE} zz)
cli_run_ok(r run -m ${model} -p "Once" -n 2)
if(NOT r_ERR MATCHES "^warning: MAMBA_BATCH_TILE=zz is not one of 8x3\\|4x6; using (8x3|4x6)\ncpu: baseline \\(forced by MAMBA_CPU_TARGET\\), weight prefetch [^\n,]*\nmodel: ")
  message(FATAL_ERROR "run with MAMBA_CPU_TARGET=baseline MAMBA_BATCH_TILE=zz: expected the warning, then a cpu line without the tile:\n${r_ERR}")
endif()
unset(ENV{MAMBA_CPU_TARGET})
set(ENV{MAMBA_BATCH_TILE} 16x1)
cli_run_ok(r run -m ${model} -p "Once" -n 2)
if(r_ERR MATCHES "(^|\n)cpu: avx512 ")
  if(NOT r_ERR MATCHES "^warning: MAMBA_BATCH_TILE=16x1 is not one of 8x3\\|4x6; using (8x3|4x6)\ncpu: avx512 [^\n]*, batch tile (8x3|4x6) \\(detected[^\n]*; MAMBA_BATCH_TILE=16x1 ignored: not one of 8x3\\|4x6\\)\nmodel: ")
    message(FATAL_ERROR "run with MAMBA_BATCH_TILE=16x1: expected the warning, then the cpu line, then the model line:\n${r_ERR}")
  endif()
endif()
unset(ENV{MAMBA_BATCH_TILE})
