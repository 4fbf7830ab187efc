# Inputs a fresh user gets wrong are refused at once with one "error: ..." line naming the option
# or field and what was expected (exit 2), never silently replaced, clamped or crashed on.
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
set(model ${SRC}/models/mamba2-books-7m-bpe8k)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})

# raw(<prefix> args...): mamba-cli with exactly these arguments (empty ones kept), no `-t 1` added.
macro(raw prefix)
  execute_process(COMMAND ${ARGN} OUTPUT_VARIABLE ${prefix}_OUT ERROR_VARIABLE ${prefix}_ERR RESULT_VARIABLE ${prefix}_RC)
endmacro()
function(expect_rc2 what pattern rc err)
  if(NOT rc EQUAL 2 OR NOT err MATCHES "${pattern}")
    message(FATAL_ERROR "${what}: expected exit 2 and stderr matching '${pattern}', got exit ${rc}:\n${err}")
  endif()
endfunction()

# Thread counts: checked at parse time (100000 crashed OpenMP, 30000 ran at 0.2 tokens/s).
expect_error("error: --threads: expected an integer from 0 \\(all hardware threads\\) to 1024, got 100000" run -m ${model} -p hi -n 4 -t 100000)
expect_error("error: .*--threads.*got 1025" run -m ${model} -p hi -n 1 --threads 1025)
expect_error("error: .*--threads.*got -1" run -m ${model} -p hi -n 1 -t -1)
expect_error("error: --threads: expected a decimal integer, got 'abc'" run -m ${model} -p hi -n 1 -t abc)
expect_error("error: .*--threads.*got 5000" perplexity -m ${model} --ids-file ${WORK}/none -t 5000)
# More threads than the CPUs this process may run on (nproc counts its affinity mask) is allowed but
# slower: a warning names how many there are (it was silent); as many as there are is not warned about.
find_program(NPROC nproc)
if(NPROC)
  execute_process(COMMAND ${NPROC} OUTPUT_VARIABLE cpus OUTPUT_STRIP_TRAILING_WHITESPACE)
  math(EXPR more "${cpus} + 1")
  cli_run_ok(over run -m ${model} -p hi -n 1 -t ${more})
  if(NOT over_ERR MATCHES "\nwarning: -t/--threads ${more} is more than the ${cpus} hardware threads? this process may run on: [^\n]*\\(leave -t out, or -t 0, to use all ${cpus}\\)\n")
    message(FATAL_ERROR "run -t ${more} on ${cpus} CPUs: no warning:\n${over_ERR}")
  endif()
  file(WRITE ${WORK}/four.ids "5 6 7 8")
  cli_run_ok(over_ppl perplexity -m ${model} --ids-file ${WORK}/four.ids -t ${more})
  if(NOT over_ppl_ERR MATCHES "warning: -t/--threads ${more} is more than the ${cpus} hardware thread")
    message(FATAL_ERROR "perplexity -t ${more} on ${cpus} CPUs: no warning:\n${over_ppl_ERR}")
  endif()
  cli_run_ok(fit run -m ${model} -p hi -n 1 -t ${cpus})
  if(fit_ERR MATCHES "warning")
    message(FATAL_ERROR "run -t ${cpus} on ${cpus} CPUs warned:\n${fit_ERR}")
  endif()
  # Threads from OMP_NUM_THREADS (no -t: all, which it then sets) are warned about the same way.
  execute_process(COMMAND ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=${more} ${CLI} run -m ${model} -p hi -n 1
                  OUTPUT_VARIABLE omp_OUT ERROR_VARIABLE omp_ERR RESULT_VARIABLE omp_RC)
  if(NOT omp_RC EQUAL 0 OR NOT omp_ERR MATCHES "warning: OMP_NUM_THREADS=${more} gives ${more} compute threads, more than the ${cpus} hardware threads? this process may run on")
    message(FATAL_ERROR "OMP_NUM_THREADS=${more} on ${cpus} CPUs: exit ${omp_RC}, no warning:\n${omp_ERR}")
  endif()
  # With OMP_NUM_THREADS set, leaving -t out takes it: the -t warning does not advise that then.
  execute_process(COMMAND ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=${more} ${CLI} run -m ${model} -p hi -n 1 -t ${more}
                  OUTPUT_VARIABLE ompt_OUT ERROR_VARIABLE ompt_ERR RESULT_VARIABLE ompt_RC)
  if(NOT ompt_RC EQUAL 0 OR NOT ompt_ERR MATCHES "\\(give -t ${cpus}; leaving it out, or -t 0, would take OMP_NUM_THREADS=${more}\\)")
    message(FATAL_ERROR "OMP_NUM_THREADS=${more} with -t ${more}: exit ${ompt_RC}, the advice:\n${ompt_ERR}")
  endif()
endif()
# An OMP_NUM_THREADS the load refuses is one error line, no warning before it.
execute_process(COMMAND ${CMAKE_COMMAND} -E env OMP_NUM_THREADS=5000 ${CLI} run -m ${model} -p hi -n 1
                OUTPUT_VARIABLE omp5_OUT ERROR_VARIABLE omp5_ERR RESULT_VARIABLE omp5_RC)
if(omp5_RC EQUAL 0 OR omp5_ERR MATCHES "warning" OR NOT omp5_ERR MATCHES "error: OMP_NUM_THREADS = 5000: expected 1 to 1024 threads")
  message(FATAL_ERROR "OMP_NUM_THREADS=5000: exit ${omp5_RC}:\n${omp5_ERR}")
endif()

# Precision tiers: auto | exact | bf16 | int8 only (any case, no numbers); int8 needs a q8/q4 checkpoint.
expect_error("error: --precision: expected auto, exact, bf16 or int8, got 'fp8'" run -m ${model} -p hi -n 1 --precision fp8)
expect_error("error: --precision: expected auto, exact, bf16 or int8, got 'BF-16'" perplexity -m ${model} --ids-file ${WORK}/none --precision BF-16)
expect_error("error: --precision: expected auto, exact, bf16 or int8, got '1'" run -m ${model} -p hi -n 1 --precision 1)
# (A CPU without AVX-512 VNNI is named first.)
expect_error("error: .*precision int8 (applies to the projections of a q8/q4 checkpoint.*mamba-cli quantize|needs a CPU with AVX-512 VNNI)" run -m ${model} -p hi -n 1 --precision int8)
cli_run_ok(ok run -m ${model} -p hi -n 1 -t 2)

# --seed: the full uint64 range, nothing beyond it (it was clamped to 2^64 - 1 silently).
expect_error("error: --seed: expected an integer from 0 to 18446744073709551615, or -1 for a random seed, got 99999999999999999999999"
             run -m ${model} -p hi -n 1 --seed 99999999999999999999999)
expect_error("error: --seed: .*got -5" run -m ${model} -p hi -n 1 --seed -5)
cli_run_ok(ok run -m ${model} -p hi -n 1 --seed 18446744073709551615)
# --seed -1 (llama.cpp's "random"): a drawn seed, printed as without the flag; a given one is not printed.
cli_run_ok(rnd run -m ${model} -p hi -n 1 --temp 0.8 --seed -1)
if(NOT rnd_ERR MATCHES "seed: [0-9]+ \\(repeat with --seed\\)")
  message(FATAL_ERROR "run --seed -1: expected the drawn seed on stderr:\n${rnd_ERR}")
endif()
cli_run_ok(given run -m ${model} -p hi -n 1 --temp 0.8 --seed 7)
if(given_ERR MATCHES "seed: [0-9]+ \\(repeat")
  message(FATAL_ERROR "run --seed 7: no seed should be drawn:\n${given_ERR}")
endif()

# A non-zero sampling value that a 32-bit float rounds to 0 is refused (it decoded greedily).
expect_error("error: --temp: '1e-300' is below 7.1e-46 in magnitude, which a 32-bit float rounds to 0"
             run -m ${model} -p hi -n 1 --temp 1e-300)
cli_run_ok(tiny run -m ${model} -p hi -n 1 --temp 1e-45 --seed 1)

# A --stop that is not UTF-8 could never match the generated text: refused, naming the byte.
execute_process(COMMAND sh -c "exec \"$0\" run -t 1 -m \"$1\" -p hi -n 1 --stop \"$(printf 'a\\377b')\"" ${CLI} ${model}
                ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
expect_rc2("run --stop with byte 0xFF" "error: --stop: not valid UTF-8 text \\(invalid byte 0xFF at offset 1\\)" "${rc}" "${err}")

# Empty -m / paths are errors, not "use the default" (execute_process directly: a list expansion
# would drop the empty arguments).
execute_process(COMMAND ${CLI} run -t 1 -m "" -p hi -n 1 ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
expect_rc2("run -m ''" "error: --model: must not be empty: expected a model directory or HF repo id" "${rc}" "${err}")
execute_process(COMMAND ${CLI} perplexity -t 1 -m "" --ids-file ${WORK}/x ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
expect_rc2("perplexity -m ''" "error: --model: must not be empty" "${rc}" "${err}")
execute_process(COMMAND ${CLI} inspect "" ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
expect_rc2("inspect ''" "error: MODEL: must not be empty" "${rc}" "${err}")
execute_process(COMMAND ${CLI} tokenize -m "" hi ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
expect_rc2("tokenize -m ''" "error: --model: must not be empty" "${rc}" "${err}")
execute_process(COMMAND ${CLI} quantize -m ${model} --type q8 -o "" ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
expect_rc2("quantize -o ''" "error: --output: must not be empty" "${rc}" "${err}")
execute_process(COMMAND ${CLI} run -t 1 -m ${model} -f "" ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
expect_rc2("run -f ''" "error: --file: must not be empty" "${rc}" "${err}")

# An explicit MAMBA_MODEL that does not resolve is named, never replaced by the embedded model.
file(WRITE ${WORK}/ids.txt "5 6 7")
foreach(sub "inspect" "run;-t;1;-p;hi;-n;1" "tokenize;hi" "perplexity;-t;1;--ids-file;${WORK}/ids.txt")
  raw(e ${CMAKE_COMMAND} -E env MAMBA_MODEL=/nonexistent ${CLI} ${sub})
  expect_rc2("MAMBA_MODEL=/nonexistent mamba-cli ${sub}" "error: MAMBA_MODEL=/nonexistent .*does not resolve: /nonexistent: no such model directory"
             "${e_RC}" "${e_ERR}")
endforeach()
file(MAKE_DIRECTORY ${WORK}/empty-dir)
raw(e ${CMAKE_COMMAND} -E env MAMBA_MODEL=${WORK}/empty-dir ${CLI} inspect)
expect_rc2("MAMBA_MODEL=<dir without config.json> inspect" "error: MAMBA_MODEL=.*empty-dir .*has no config.json" "${e_RC}" "${e_ERR}")
raw(e ${CMAKE_COMMAND} -E env MAMBA_MODEL=${model} ${CLI} inspect)
if(NOT e_RC EQUAL 0 OR NOT e_OUT MATCHES "layers +12")
  message(FATAL_ERROR "MAMBA_MODEL=${model} inspect failed:\n${e_ERR}")
endif()

# Unknown subcommands are named, with the valid ones.
expect_error("error: unknown subcommand 'bogus' \\(expected one of: run, inspect, tokenize, perplexity, quantize\\)" bogus)
# An option before the subcommand is named (it was "A subcommand is required").
expect_error("error: unknown option '--bogus' before the subcommand \\(options go after it: mamba-cli SUBCOMMAND \\[OPTIONS\\]; subcommands: run, inspect" --bogus)
expect_error("error: unknown option '-m' before the subcommand" -m ${model} run)
raw(e ${CLI})
expect_rc2("mamba-cli (no arguments)" "error: a subcommand is required: one of run, inspect" "${e_RC}" "${e_ERR}")

# Prompt files: a directory is "not a regular file"; the file is checked before the model loads;
# pipes, /dev/null, /dev/stdin and `-` are read as streams.
expect_error("error: ${WORK}: is a directory, not a regular file" run -m ${model} -f ${WORK})
expect_error("error: ${WORK}: is a directory, not a regular file" perplexity -m ${model} -f ${WORK})
expect_error("error: /no/such/prompt.txt: no such file" run -m /no/such/model -f /no/such/prompt.txt)
expect_error("error: /no/such/ids: no such file" perplexity -m /no/such/model --ids-file /no/such/ids)
expect_error("error: the prompt is empty" run -m ${model} -f /dev/null)
# Bad --prompt-ids are reported before the model loads (the model path is not even looked at).
expect_error("error: --prompt-ids: '-5'" run -m /no/such/model --prompt-ids -5)
# A model directory whose config.json or weights file is a directory says so.
file(MAKE_DIRECTORY ${WORK}/cfgdir/config.json ${WORK}/wdir/model.safetensors)
file(COPY ${model}/model.safetensors ${model}/tokenizer.json DESTINATION ${WORK}/cfgdir)
file(COPY ${model}/config.json ${model}/tokenizer.json DESTINATION ${WORK}/wdir)
expect_error("error: ${WORK}/cfgdir/config.json: is a directory, not a file" run -m ${WORK}/cfgdir -p hi -n 1)
expect_error("error: ${WORK}/wdir/model.safetensors: is a directory, not a weights file" run -m ${WORK}/wdir -p hi -n 1)
# An endless stream stops at the 1 GiB limit instead of filling the memory.
expect_error("error: /dev/zero: more than 1024 MiB of input \\(the limit for prompt and text files\\)" perplexity -m ${model} -f /dev/zero)
# A regular file over the limit is refused by its size before any of it is read (a 2 GiB file read
# 1 GiB first); binary input is refused at its first MiB (/dev/urandom read 1 GiB before refusing).
find_program(TRUNCATE truncate)
if(TRUNCATE)
  execute_process(COMMAND ${TRUNCATE} -s 2G ${WORK}/big.txt)  # sparse: no disk space used
  expect_error("error: ${WORK}/big.txt: 2147483648 bytes \\(2048.0 MiB\\), more than the 1024 MiB limit for prompt and text files"
               run -m ${model} -f ${WORK}/big.txt)
  expect_error("error: ${WORK}/big.txt: 2147483648 bytes" perplexity -m ${model} --ids-file ${WORK}/big.txt)
  file(REMOVE ${WORK}/big.txt)
endif()
if(EXISTS /dev/urandom)
  expect_error("error: /dev/urandom: not valid UTF-8 text \\(invalid byte 0x[0-9A-F][0-9A-F] at offset [0-9]+\\)\n$"
               run -m ${model} -f /dev/urandom)
  expect_error("error: /dev/urandom: not valid UTF-8 text" perplexity -m ${model} --ids-file /dev/urandom)
endif()
# ... while a character cut by the 1 MiB reads stays whole: an ids file whose "é" straddles the
# boundary is refused for that item as a whole, not as broken UTF-8. (An ids file is only parsed:
# perplexity over 1 MiB of text took ~2 min, over 10 under ASan.)
string(REPEAT "5 " 524287 ids_run)
file(WRITE ${WORK}/straddle.ids "${ids_run} é 6")
expect_error("error: ${WORK}/straddle.ids: 'é' \\(item 524288\\) is not a token id" perplexity -m ${model} --ids-file ${WORK}/straddle.ids)
# A bad item is shown escaped and shortened: a NUL no longer ends the message, an ESC does not reach
# the terminal, and a 100-byte item shows its first 40 bytes and its length (a 5 MB one was echoed).
execute_process(COMMAND printf "5 7\\000 9" OUTPUT_FILE ${WORK}/nul.ids)
expect_error("error: ${WORK}/nul.ids: '7\\\\x00' \\(item 2\\) is not a token id \\(a non-negative integer\\)\n$"
             perplexity -m ${model} --ids-file ${WORK}/nul.ids)
execute_process(COMMAND printf "5 \\033[31mRED 7" OUTPUT_FILE ${WORK}/esc.ids)
expect_error("error: ${WORK}/esc.ids: '\\\\x1B\\[31mRED' \\(item 2\\)" perplexity -m ${model} --ids-file ${WORK}/esc.ids)
string(REPEAT "a" 100 long_item)
string(REPEAT "a" 40 long_shown)
expect_error("error: --prompt-ids: '${long_shown}…' \\(100 bytes\\) \\(item 1\\) is not a token id" run -m ${model} --prompt-ids "${long_item}" -n 1)
# "-0" is no token id either (std::from_chars reads it as 0, which was taken).
expect_error("error: --prompt-ids: '-0' \\(item 2\\) is not a token id \\(a non-negative integer\\)" run -m ${model} --prompt-ids "5 -0" -n 1)
string(REPEAT "9" 100 long_number)
expect_error("error: --prompt-ids: '9999999999999999999999999999999999999999…' \\(100 bytes\\) \\(item 2\\) is too large" run -m ${model} --prompt-ids "5 ${long_number}" -n 1)
# A UTF-16 file (PowerShell's `>` writes one) is named as such.
execute_process(COMMAND printf "\\377\\3765\\000 \\0006\\000" OUTPUT_FILE ${WORK}/utf16.ids)
expect_error("error: ${WORK}/utf16.ids: not valid UTF-8 text \\(invalid byte 0xFF at offset 0\\): it starts with the UTF-16 byte-order mark FF FE; save it as UTF-8"
             perplexity -m ${model} --ids-file ${WORK}/utf16.ids)
set(prompt "The old man looked at the sea and said")
file(WRITE ${WORK}/prompt.txt "${prompt}")
cli_run_ok(ref run -m ${model} -p "${prompt}" -n 4)
raw(s ${CLI} run -t 1 -m ${model} -n 4 -f - INPUT_FILE ${WORK}/prompt.txt)
if(NOT s_RC EQUAL 0 OR NOT s_OUT STREQUAL ref_OUT)
  message(FATAL_ERROR "run -f - (stdin): exit ${s_RC}, [${s_OUT}] vs [${ref_OUT}]:\n${s_ERR}")
endif()
find_program(SH sh)
if(SH)
  # A pipe (what `-f <(cmd)` and `-f /dev/stdin` in a pipeline are).
  raw(s ${SH} -c "cat '${WORK}/prompt.txt' | '${CLI}' run -t 1 -m '${model}' -n 4 -f /dev/stdin")
  if(NOT s_RC EQUAL 0 OR NOT s_OUT STREQUAL ref_OUT)
    message(FATAL_ERROR "run -f /dev/stdin from a pipe: exit ${s_RC}, [${s_OUT}] vs [${ref_OUT}]:\n${s_ERR}")
  endif()
  raw(p ${SH} -c "printf '5 6 7 8' | '${CLI}' perplexity -t 1 -m '${model}' --ids-file /dev/stdin")
  if(NOT p_RC EQUAL 0 OR NOT p_OUT MATCHES "predictions: 3")
    message(FATAL_ERROR "perplexity --ids-file /dev/stdin from a pipe: exit ${p_RC}:\n${p_OUT}${p_ERR}")
  endif()
endif()

# Configs whose values the loader used to accept silently (copies of the embedded model's config
# beside links to its weights).
file(READ ${model}/config.json cfg)
function(bad_config name key value pattern)
  set(dir ${WORK}/${name})
  file(MAKE_DIRECTORY ${dir})
  string(JSON c SET "${cfg}" ${key} ${value})
  file(WRITE ${dir}/config.json "${c}")
  file(CREATE_LINK ${model}/model.safetensors ${dir}/model.safetensors SYMBOLIC)
  expect_error("${pattern}" inspect ${dir})
endfunction()
bad_config(eps-1e300 layer_norm_epsilon 1e300 "error: .*layer_norm_epsilon = 1e\\+300: must be positive and finite as float32")
bad_config(eos-huge eos_token_id 1000000000 "error: .*eos_token_id = 1000000000: expected a token id in \\[0, vocab_size = 8192\\)")
bad_config(eos-neg eos_token_id -3 "error: .*eos_token_id = -3: expected a token id in \\[0, vocab_size = 8192\\)")
bad_config(layers-11 num_hidden_layers 11
           "error: .*tensor 'backbone.layers.11[.][^']*' belongs to layer 11, but the config says num_hidden_layers = 11")
bad_config(act-gelu hidden_act "\"gelu\"" "error: .*\"hidden_act\" = \"gelu\": not supported \\(expected \"silu\" or \"swish\"")

# What `run` refuses beside the weights, `inspect` (the "will it load?" check) refuses too; the EOS
# ids it prints are the ones `run` stops at (generation_config.json first).
function(side_file name file content pattern)
  set(dir ${WORK}/${name})
  file(MAKE_DIRECTORY ${dir})
  foreach(f config.json model.safetensors tokenizer.json)
    file(CREATE_LINK ${model}/${f} ${dir}/${f} SYMBOLIC)
  endforeach()
  file(REMOVE ${dir}/${file})
  file(WRITE ${dir}/${file} "${content}")
  if(pattern STREQUAL "")
    cli_run_ok(side inspect ${dir})
    set(side_OUT "${side_OUT}" PARENT_SCOPE)
  else()
    expect_error("${pattern}" inspect ${dir})
  endif()
endfunction()
side_file(gen-broken generation_config.json "{\"eos_token_id\": " "error: .*generation_config.json: invalid JSON")
side_file(gen-oov generation_config.json "{\"eos_token_id\": 99999}"
          "error: .*generation_config.json: eos_token_id = 99999: expected a token id in \\[0, vocab_size = 8192\\)")
side_file(tok-broken tokenizer.json "{" "error: .*tokenizer.json: invalid JSON")
side_file(gen-eos generation_config.json "{\"eos_token_id\": [0, 13]}" "")
if(NOT side_OUT MATCHES "bos / eos / pad  0 / 0,13 \\(generation_config.json\\) / 1")
  message(FATAL_ERROR "inspect with generation_config.json eos [0, 13]:\n${side_OUT}")
endif()

# Quantizing a model with nothing quantizable is an error that writes nothing.
require_shared()
expect_error("error: .*nothing to quantize: no projection or embedding has K \\(its input width\\) a multiple of 32"
             quantize -m ${SHARED}/fixtures/mamba1-odd/model --type q4 -o ${WORK}/odd-q4)
if(EXISTS ${WORK}/odd-q4)
  message(FATAL_ERROR "quantize of a model with nothing quantizable wrote ${WORK}/odd-q4")
endif()
file(GLOB leftovers LIST_DIRECTORIES true ${WORK}/.*tmp-*)
if(leftovers)
  message(FATAL_ERROR "quantize left ${leftovers}")
endif()

# A repeated option takes its last value (as llama.cpp does): -n 9 -n 2 generates 2 tokens.
cli_run_ok(twice run -m ${model} --prompt-ids 1 -n 9 -n 2 --json --ignore-eos)
if(NOT twice_OUT MATCHES "\"ids\":\\[[0-9]+,[0-9]+\\]")
  message(FATAL_ERROR "run -n 9 -n 2 must generate 2 tokens:\n${twice_OUT}")
endif()

# A weights file that is a dangling symbolic link is named as such (it read "no weights found").
file(MAKE_DIRECTORY ${WORK}/dangling)
file(COPY ${model}/config.json DESTINATION ${WORK}/dangling)
file(REMOVE ${WORK}/dangling/model.safetensors)
file(CREATE_LINK ${WORK}/no-such-target.safetensors ${WORK}/dangling/model.safetensors SYMBOLIC)
expect_error("error: .*dangling/model.safetensors: a symbolic link to .*no-such-target.safetensors, which does not exist" inspect ${WORK}/dangling)
# A tokenizer.json or generation_config.json that is a dangling link (an interrupted HF download)
# is named, not taken for "no tokenizer" / "no generation config" (run printed bare ids, exit 0).
file(MAKE_DIRECTORY ${WORK}/dangling-tok)
foreach(f config.json model.safetensors)
  file(CREATE_LINK ${model}/${f} ${WORK}/dangling-tok/${f} SYMBOLIC)
endforeach()
file(REMOVE ${WORK}/dangling-tok/tokenizer.json)
file(CREATE_LINK ${WORK}/no-such-blob ${WORK}/dangling-tok/tokenizer.json SYMBOLIC)
expect_error("error: .*dangling-tok/tokenizer.json: a symbolic link to .*no-such-blob, which does not exist" inspect ${WORK}/dangling-tok)
expect_error("error: .*dangling-tok/tokenizer.json: a symbolic link to .*no-such-blob, which does not exist" run -m ${WORK}/dangling-tok --prompt-ids 1 -n 1)
file(REMOVE ${WORK}/dangling-tok/tokenizer.json)
file(CREATE_LINK ${WORK}/no-such-blob ${WORK}/dangling-tok/generation_config.json SYMBOLIC)
expect_error("error: .*dangling-tok/generation_config.json: a symbolic link to .*no-such-blob, which does not exist" run -m ${WORK}/dangling-tok --prompt-ids 1 -n 1)
# inspect names the file(s) the tensors came from.
cli_run_ok(files inspect ${model})
if(NOT files_OUT MATCHES "weights file     model.safetensors\n")
  message(FATAL_ERROR "inspect does not name the weights file:\n${files_OUT}")
endif()

# inspect lists stored tensors the model does not read: the embedded model's tensors sharded by an
# index.json beside one extra shard holding an unknown tensor "foo.bar".
set(xdir ${WORK}/extra-tensor)
file(REMOVE_RECURSE ${xdir})
file(MAKE_DIRECTORY ${xdir})
foreach(f config.json tokenizer.json)
  file(CREATE_LINK ${model}/${f} ${xdir}/${f} SYMBOLIC)
endforeach()
file(CREATE_LINK ${model}/model.safetensors ${xdir}/model-00001-of-00002.safetensors SYMBOLIC)
file(READ ${model}/model.safetensors len_hex LIMIT 8 HEX)  # little-endian u64; headers here are < 2^24 bytes
string(SUBSTRING "${len_hex}" 0 2 b0)
string(SUBSTRING "${len_hex}" 2 2 b1)
string(SUBSTRING "${len_hex}" 4 2 b2)
math(EXPR hlen "0x${b2}${b1}${b0}")
file(READ ${model}/model.safetensors header OFFSET 8 LIMIT ${hlen})
string(JSON n LENGTH "${header}")
math(EXPR last "${n} - 1")
set(map "{\"foo.bar\": \"extra.safetensors\"")
foreach(i RANGE ${last})
  string(JSON name MEMBER "${header}" ${i})
  if(NOT name STREQUAL "__metadata__")
    string(APPEND map ", \"${name}\": \"model-00001-of-00002.safetensors\"")
  endif()
endforeach()
file(WRITE ${xdir}/model.safetensors.index.json "{\"metadata\": {}, \"weight_map\": ${map}}}")
set(xhdr "{\"foo.bar\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]}}")
string(LENGTH "${xhdr}" xl)
math(EXPR o1 "${xl} / 64")
math(EXPR o2 "(${xl} % 64) / 8")
math(EXPR o3 "${xl} % 8")
execute_process(COMMAND printf "\\${o1}${o2}${o3}\\000\\000\\000\\000\\000\\000\\000%sA" "${xhdr}" OUTPUT_FILE ${xdir}/extra.safetensors)
cli_run_ok(extra inspect ${xdir})
if(NOT extra_OUT MATCHES "unused tensors   1 not read by the model: foo.bar\n")
  message(FATAL_ERROR "inspect does not list the unused tensor foo.bar:\n${extra_OUT}${extra_ERR}")
endif()
if(files_OUT MATCHES "unused tensors")
  message(FATAL_ERROR "inspect lists unused tensors for the embedded model:\n${files_OUT}")
endif()
# A single model.safetensors beside a sharded index is the one read (transformers' order; the
# index had won).
file(CREATE_LINK ${model}/model.safetensors ${xdir}/model.safetensors SYMBOLIC)
cli_run_ok(both inspect ${xdir})
if(NOT both_OUT MATCHES "weights file     model.safetensors\n" OR both_OUT MATCHES "unused tensors")
  message(FATAL_ERROR "with model.safetensors and an index, inspect should read model.safetensors:\n${both_OUT}")
endif()

# A dangling model.safetensors beside a good pytorch_model.bin is named, not skipped for the .bin
# (an interrupted download of the format transformers reads first).
set(ssm ${SHARED}/fixtures/mamba1-tiny-ssm/model)
file(REMOVE_RECURSE ${WORK}/dangling-bin)
file(MAKE_DIRECTORY ${WORK}/dangling-bin)
foreach(f config.json pytorch_model.bin)
  file(CREATE_LINK ${ssm}/${f} ${WORK}/dangling-bin/${f} SYMBOLIC)
endforeach()
cli_run_ok(bin_ok inspect ${WORK}/dangling-bin)
file(CREATE_LINK ${WORK}/no-such-blob ${WORK}/dangling-bin/model.safetensors SYMBOLIC)
expect_error("error: .*dangling-bin/model.safetensors: a symbolic link to .*no-such-blob, which does not exist" inspect ${WORK}/dangling-bin)
