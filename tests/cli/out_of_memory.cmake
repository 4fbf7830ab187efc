# Running out of memory at any point of loading and generating ends mamba-cli with one "error: ..."
# line naming memory and exit status 2, never an abort ("terminate called after throwing an instance
# of 'std::bad_alloc'": the JSON library's destructor allocates while it frees a half-parsed
# tokenizer.json, so a bad_alloc there reached std::terminate). The address space is capped with
# prlimit(1) at steps across the range where loading starts to fit; each run must succeed or fail
# that way (naming what ran out, also where the bad_alloc reached the terminate handler). Not under the sanitizers (they reserve terabytes of address space).
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
if(SANITIZE)
  message("SKIP: the address-space cap does not apply under ASan")
  return()
endif()
find_program(PRLIMIT prlimit)
if(NOT PRLIMIT)
  message("SKIP: no prlimit(1) (util-linux) to cap the address space with")
  return()
endif()
# model|first MB|last MB|step: ranges that span both outcomes in either tier the default precision
# (auto) picks for these bf16 checkpoints: exact fits from ~30 / ~90 MB, the bf16 tier (AVX-512 BF16
# CPUs; its blocked copy of the projections is made at load) from ~50 / ~115 MB, and in between auto
# falls back to exact (last field: a fallback that then runs is expected in the range).
set(models "${SRC}/models/mamba2-books-7m-bpe8k|16|60|2|1")
if(EXISTS "${SHARED}/models/mamba2-books-16m/config.json")
  list(APPEND models "${SHARED}/models/mamba2-books-16m|36|132|4|0")  # a 50k-entry tokenizer.json, loaded after the model: where the copy does not fit, neither does it
endif()
foreach(entry IN LISTS models)
  string(REPLACE "|" ";" entry "${entry}")
  list(GET entry 0 model)
  list(GET entry 1 from_mb)
  list(GET entry 2 to_mb)
  list(GET entry 3 step_mb)
  list(GET entry 4 want_fallback)
  set(failed 0)
  set(passed 0)
  set(fell_back 0)  # runs where auto's bf16 copy did not fit (or would not) and the exact tier ran instead
  set(bf16_cpu 0)
  foreach(mb RANGE ${from_mb} ${to_mb} ${step_mb})
    math(EXPR bytes "${mb} * 1000000")
    execute_process(COMMAND ${PRLIMIT} --as=${bytes} ${CLI} run -t 1 -m ${model} -p Hello -n 4
                    OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(err MATCHES "^cpu: avx512 \\([^\n]*BF16 yes")
      set(bf16_cpu 1)
    endif()
    if(rc EQUAL 0)
      math(EXPR passed "${passed} + 1")
      # auto sees the cap (what /proc/self/limits leaves beside the mapped size) and stays exact, or
      # its copy fails to allocate and it falls back
      if(err MATCHES "precision exact \\(auto: the bf16 tier's copy of the projections ([^\n]*exceed the memory available|did not fit in memory)")
        math(EXPR fell_back "${fell_back} + 1")
      endif()
    elseif(rc EQUAL 2 AND err MATCHES "error: [^\n]*(out of memory|Cannot allocate memory)" AND NOT err MATCHES "terminate")
      # A bad_alloc that reached the terminate handler (out of a destructor, e.g. the JSON library's
      # freeing a half-parsed tokenizer.json) still names what was being loaded.
      if(err MATCHES "error: out of memory\n")
        message(FATAL_ERROR "${model} with ${mb} MB of address space: an out-of-memory error that names nothing:\n${err}")
      endif()
      math(EXPR failed "${failed} + 1")
    else()
      message(FATAL_ERROR "${model} with ${mb} MB of address space: exit ${rc}, stderr:\n${err}")
    endif()
  endforeach()
  # The range spans both outcomes, so both paths were taken.
  if(failed EQUAL 0 OR passed EQUAL 0)
    message(FATAL_ERROR "${model}: ${failed} runs out of memory, ${passed} that fit, in ${from_mb}-${to_mb} MB: the range no longer spans both")
  endif()
  # On a CPU with the bf16 tier, auto runs exact where only the exact tier fits (below ~50 / ~115 MB;
  # since auto reads the address-space limit, everywhere in these ranges: they are far below its
  # 512 MiB to spare), saying so, rather than failing where `--precision exact` would run.
  if(want_fallback AND bf16_cpu AND fell_back EQUAL 0)
    message(FATAL_ERROR "${model}: no run fell back from the bf16 tier's copy to the exact tier in ${from_mb}-${to_mb} MB")
  endif()
  message(STATUS "${model}: ${failed} runs out of memory (each a clean error), ${passed} fit (${fell_back} of them exact after the bf16 copy did not fit)")
endforeach()
