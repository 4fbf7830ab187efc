# Bad input gives one clear "error: ..." line and a non-zero exit, never a crash.
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
set(model ${SRC}/models/mamba2-books-7m-bpe8k)
expect_error("error: sampling parameter temperature = -1[^\n]*\nRun with --help for more information" run -m ${model} -p hi --temp -1)
expect_error("error: sampling parameter top_p = 2" run -m ${model} -p hi --top-p 2)
expect_error("error: sampling parameter repetition_penalty = 0" run -m ${model} -p hi --repeat-penalty 0)
expect_error("error: sampling parameter min_p = 1 is out of range" run -m ${model} -p hi --min-p 1)
expect_error("error: sampling parameter min_p = -0.1 is out of range" run -m ${model} -p hi --min-p -0.1)
expect_error("error: sampling parameter typical_p" run -m ${model} -p hi --typical-p 0)
expect_error("error: sampling parameter top_k" run -m ${model} -p hi --top-k -3)
expect_error("error: sampling parameter frequency_penalty" run -m ${model} -p hi --frequency-penalty 5)
expect_error("error: -n/--n-predict = -2" run -m ${model} -p hi -n -2)
expect_error("error: --prompt-ids: 'x'" run -m ${model} --prompt-ids 1,x,3)
expect_error("error: --prompt-ids: empty item after item 1" run -m ${model} --prompt-ids 1,,3)
expect_error("error: --prompt-ids: token id 99999 \\(item 2\\) is outside the vocabulary \\[0, 8192\\) \\(the model's\\)" run -m ${model} --prompt-ids 1,99999)
expect_error("error: .*at most one of" run -m ${model} -p hi --prompt-ids 1)
expect_error("error: .*no such file" run -m ${model} -f ${WORK}/does-not-exist.txt)
expect_error("error: --prompt-ids: empty item before item 1 \\(the list starts with a comma\\)\nRun with --help for more information\\.\n$" run -m ${model} --prompt-ids ,)
expect_error("error: --prompt-ids: no token ids \\(the prompt would be empty\\)" run -m ${model} --prompt-ids "[ ]")
# …found before the model load (a model path that does not exist is not reached).
expect_error("error: --prompt-ids: no token ids" run -m ${WORK}/no-such-model --prompt-ids "[ ]")
cli_run_ok(bracket_comma run -m ${model} --prompt-ids "[1, 2]," -n 1)
expect_error("error: .*/no/such/model" run -m /no/such/model -p hi)
expect_error("error: .*--bogus" run -m ${model} -p hi --bogus)
expect_error("error: .*temp" run -m ${model} -p hi --temp abc)
expect_error("error: .*need --json" run -m ${model} -p hi --top-logprobs 3)
expect_error("error: --top-logprobs: expected an integer from 0 to 100, got -1" run -m ${model} -p hi --json --top-logprobs -1)
expect_error("error: .*stop" run -m ${model} -p hi --stop "")  # an empty CMake list element may not reach the CLI: either message is fine
expect_error("error: give exactly one of" perplexity -m ${model})
file(WRITE ${WORK}/one.ids "5")
expect_error("error: [^\n]*/one.ids: perplexity needs at least 2 token ids, got 1" perplexity -m ${model} --ids-file ${WORK}/one.ids)
# A text of one token is named as a text (it said "token ids", of a text file).
file(WRITE ${WORK}/one.txt "the")
expect_error("error: [^\n]*/one.txt: perplexity needs a text of at least 2 tokens, got 1 \\(3 bytes\\)" perplexity -m ${model} -f ${WORK}/one.txt)
expect_error("error: --ctx: expected an integer from 1 to 9223372036854775807, got 0\nRun with --help" perplexity -m ${model} --ids-file ${WORK}/one.ids --ctx 0)
expect_error("error: --ctx: expected an integer from 1 to 9223372036854775807, got -1" perplexity -m ${model} --ids-file ${WORK}/one.ids --ctx -1)
# Commas separate ids: a leading one or two in a row are an empty item; one after the last id is fine.
file(WRITE ${WORK}/lead.ids ",1,2")
expect_error("error: .*/lead.ids: empty item before item 1 \\(the list starts with a comma\\)" perplexity -m ${model} --ids-file ${WORK}/lead.ids)
expect_error("error: --prompt-ids: empty item after item 2 \\(two commas\\)" run -m ${model} --prompt-ids "1,2,,")
# The ids file is read and parsed before the model loads (as run -f): its error, not the model's.
file(WRITE ${WORK}/bad.ids "1 2 x")
expect_error("error: .*/bad.ids: 'x' \\(item 3\\) is not a token id" perplexity -m /no/such/model --ids-file ${WORK}/bad.ids)
expect_error("error: .*at least 2 token ids" perplexity -m /no/such/model --ids-file ${WORK}/one.ids)
# An ids file saved with a UTF-8 byte-order mark (Notepad) reads as without it (the mark had made
# item 1 an invisible "\uFEFF5", "not a token id").
file(WRITE ${WORK}/plain.ids "5 6 7 8\n")
execute_process(COMMAND printf "\\357\\273\\2775 6 7 8\\n" OUTPUT_FILE ${WORK}/bom.ids)
cli_run_ok(no_bom perplexity -m ${model} --ids-file ${WORK}/plain.ids)
cli_run_ok(bom perplexity -m ${model} --ids-file ${WORK}/bom.ids)
if(NOT bom_OUT STREQUAL no_bom_OUT OR NOT bom_OUT MATCHES "^predictions: 3\n")
  message(FATAL_ERROR "--ids-file with a byte-order mark: [${bom_OUT}], without: [${no_bom_OUT}]")
endif()
file(WRITE ${WORK}/trail.ids "[1, 2, 3,]\n")
cli_run_ok(trailing perplexity -m ${model} --ids-file ${WORK}/trail.ids)
# An id past the model's vocabulary names the file and the item (1-based, as the parser does).
file(WRITE ${WORK}/oov.ids "1 2 8192")
expect_error("error: .*/oov.ids: token id 8192 \\(item 3\\) is outside the vocabulary \\[0, 8192\\) \\(the model's\\)" perplexity -m ${model} --ids-file ${WORK}/oov.ids)
# Id lists: one optional pair of brackets around the whole list (as JSON prints it), both or neither.
expect_error("error: --decode: unbalanced brackets: the list starts with '\\['" tokenize -m ${model} -d "[1,2")
expect_error("error: --prompt-ids: unbalanced brackets: the list ends with '\\]'" run -m ${model} --prompt-ids "1,2]")
expect_error("error: --decode: '1\\]' \\(item 1\\)" tokenize -m ${model} -d "[1] [2]")
cli_run_ok(plain tokenize -m ${model} -d "1 2")
cli_run_ok(bracketed tokenize -m ${model} -d "[1, 2]")
if(NOT plain_OUT STREQUAL bracketed_OUT OR plain_OUT STREQUAL "")
  message(FATAL_ERROR "tokenize -d '[1, 2]' printed '${bracketed_OUT}', '1 2' printed '${plain_OUT}'")
endif()
# Numbers are plain decimal (cli/strict_numbers.h): CLI11 alone read "010" as octal 8, "0x10" as 16
# and "" as 0.
expect_error("error: --n-predict: expected a decimal integer, got '0x10'" run -m ${model} -p hi -n 0x10)
expect_error("error: --top-k: expected a decimal integer, got 'abc'" run -m ${model} -p hi --top-k abc)
# Past an int: the range is named (CLI11 alone said "Could not convert").
expect_error("error: --n-predict: expected an integer from -1 \\(no limit\\) to 2147483647, got 99999999999999999999" run -m ${model} -p hi -n 99999999999999999999)
expect_error("error: --top-k: expected an integer from 0 \\(off\\) to 2147483647, got 2147483648" run -m ${model} -p hi --top-k 2147483648)
expect_error("error: --top-p: expected a decimal number, got '0x1p-1'" run -m ${model} -p hi --top-p 0x1p-1)
# Beyond a 32-bit float: named as typed (it had become inf, then "temperature = inf is out of range").
expect_error("error: --temp: expected a number of magnitude at most 3.4e38 \\(a 32-bit float\\), got '1e300'" run -m ${model} -p hi --temp 1e300)
expect_error("error: --repeat-penalty: expected a number of magnitude at most 3.4e38 \\(a 32-bit float\\), got '4e38'" run -m ${model} -p hi --repeat-penalty 4e38)
execute_process(COMMAND ${CLI} run -m ${model} -p hi -n "" ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "error: --n-predict: expected a decimal integer, got ''")
  message(FATAL_ERROR "-n '' must be an error (exit 2), got exit ${rc}:\n${err}")
endif()
execute_process(COMMAND ${CLI} run -m ${model} -p hi --temp "" ERROR_VARIABLE err RESULT_VARIABLE rc OUTPUT_QUIET)
if(NOT rc EQUAL 2 OR NOT err MATCHES "error: --temp: expected a decimal number, got ''")
  message(FATAL_ERROR "--temp '' must be an error (exit 2), got exit ${rc}:\n${err}")
endif()
cli_run_ok(octal run -m ${model} --prompt-ids 1 -n 010 --json --ignore-eos)
string(REGEX MATCH "\"ids\":\\[[0-9,]*\\]" ids "${octal_OUT}")
string(REGEX MATCHALL "[0-9]+" n "${ids}")
list(LENGTH n count)
if(NOT count EQUAL 10)
  message(FATAL_ERROR "-n 010 must generate ten tokens (decimal), got ${count}: ${ids}")
endif()
# tokenize: a flag of the other direction is an error, not silently ignored.
expect_error("error: --decode excludes --tokens" tokenize -m ${model} --tokens -d 41)
expect_error("error: --skip-special requires --decode" tokenize -m ${model} --skip-special Hello)
expect_error("error: --prompt-ids: '99999999999' \\(item 1\\) is too large for a token id \\(at most 2147483647\\)" run -m ${model} --prompt-ids 99999999999)
# A prompt / text file that is not UTF-8 is named, before the model loads (it was an "encode:" error
# without the file's name, after the load).
execute_process(COMMAND printf "ab\\377cd" OUTPUT_FILE ${WORK}/bad-utf8.txt)
expect_error("error: .*bad-utf8.txt: not valid UTF-8 text \\(invalid byte 0xFF at offset 2\\)" run -m ${model} -f ${WORK}/bad-utf8.txt)
expect_error("error: .*bad-utf8.txt: not valid UTF-8 text \\(invalid byte 0xFF at offset 2\\)" perplexity -m ${model} -f ${WORK}/bad-utf8.txt)

# Output that cannot be written fails the command (exit 2, named), as in coreutils: a full disk
# gave exit 0 and a truncated --json file.
if(EXISTS /dev/full)
  foreach(cmd "run;-m;${model};-t;1;-p;It was;-n;5;--json" "tokenize;hello")
    execute_process(COMMAND ${CLI} ${cmd} OUTPUT_FILE /dev/full ERROR_VARIABLE err RESULT_VARIABLE rc)
    if(NOT rc EQUAL 2 OR NOT err MATCHES "error: write error on standard output")
      message(FATAL_ERROR "mamba-cli ${cmd} > /dev/full: expected exit 2 and a write error, got ${rc}:\n${err}")
    endif()
  endforeach()
  # run's stats line does not read as a finished run then (a fresh user's finding).
  execute_process(COMMAND ${CLI} run -m ${model} -t 1 -p "It was" -n 5 OUTPUT_FILE /dev/full ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT err MATCHES "finish: length, but the output could not be written \\| prompt:")
    message(FATAL_ERROR "mamba-cli run > /dev/full: expected the stats line to say the output failed:\n${err}")
  endif()
endif()
cli_run_ok(version --version)
if(NOT version_OUT MATCHES "^mamba-cli [0-9]+\\.[0-9]+\\.[0-9]+")
  message(FATAL_ERROR "mamba-cli --version printed [${version_OUT}]")
endif()
# After a subcommand too (USAGE: "--help and --version exit 0 ... for every subcommand").
foreach(sub run inspect tokenize perplexity quantize)
  cli_run_ok(subversion ${sub} --version)
  if(NOT subversion_OUT STREQUAL version_OUT)
    message(FATAL_ERROR "mamba-cli ${sub} --version printed [${subversion_OUT}], mamba-cli --version [${version_OUT}]")
  endif()
endforeach()
expect_error("error: unknown option '-v' \\(the version is --version\\)" -v)

# Text that starts with '-' is not read as bundled short flags: "-hello" printed the help (-h) and
# exited 0; an unknown option is named with the "--" way to pass such text.
expect_error("error: unknown option '-hello' of tokenize .*mamba-cli tokenize -- -hello" tokenize -hello)
expect_error("error: unknown option '-x' of run\n" run -m ${model} -x -p hi)  # no "--" hint: run has no positionals
expect_error("error: unknown option '--no-such' of run" run -m ${model} --no-such -p hi)
# A bare word is not a prompt (llama.cpp's -p habit, or a forgotten -p): the error says how to give one
# (it said only "The following argument was not expected"); so does a prompt with spaces left unquoted.
expect_error("error: unexpected argument 'hello' of run: use -p \"...\" for the prompt \\(in quotes when it has spaces\\), or -f FILE, or give it on stdin\nRun with --help"
             run -m ${model} "hello")
expect_error("error: unexpected arguments 'was' 'dark' 'night' of run: use -p \"...\" for the prompt" run -m ${model} -p It was dark night)
expect_error("error: unexpected argument 'text.txt' of perplexity: give the text to score with -f FILE, or token ids with --ids-file FILE"
             perplexity -m ${model} text.txt)
# Words after "--" get the same hint (CLI11 handed them up to mamba-cli itself, which said only "The
# following arguments were not expected: words some", backwards); tokenize takes them as text after
# its first word too, and a subcommand without extras still refuses them (in the order typed).
expect_error("error: unexpected arguments 'some' 'words' of run: use -p \"...\" for the prompt \\(in quotes when it has spaces\\), or -f FILE, or give it on stdin\nRun with --help"
             run -m ${model} -- some words)
expect_error("error: unexpected arguments 'hello' 'world' of run: use -p" run -m ${model} hello -- world)
expect_error("error: unexpected argument 'text.txt' of perplexity: give the text to score with -f FILE" perplexity -m ${model} -- text.txt)
cli_run_ok(after_dashes tokenize -m ${model} hello -- world)
cli_run_ok(two_words tokenize -m ${model} hello world)
if(NOT after_dashes_OUT STREQUAL two_words_OUT)
  message(FATAL_ERROR "tokenize hello -- world printed [${after_dashes_OUT}], tokenize hello world [${two_words_OUT}]")
endif()
expect_error("error: unexpected arguments 'extra' 'words' of inspect: inspect takes one MODEL" inspect ${model} -- extra words)
expect_error("error: unexpected argument 'more' of inspect: inspect takes one MODEL" inspect ${model} more)
# tokenize without TEXT reads it from stdin (ids with -d), one trailing newline dropped.
file(WRITE ${WORK}/hello_world.txt "Hello world\n")
execute_process(COMMAND ${CLI} tokenize -m ${model} INPUT_FILE ${WORK}/hello_world.txt OUTPUT_VARIABLE in_OUT RESULT_VARIABLE in_RC)
cli_run_ok(arg tokenize -m ${model} "Hello world")
if(NOT in_RC EQUAL 0 OR NOT in_OUT STREQUAL arg_OUT OR arg_OUT STREQUAL "")
  message(FATAL_ERROR "tokenize with stdin: exit ${in_RC} [${in_OUT}], with the argument [${arg_OUT}]")
endif()
string(STRIP "${arg_OUT}" hello_ids)
file(WRITE ${WORK}/hello_ids.txt "${hello_ids}\n")
execute_process(COMMAND ${CLI} tokenize -m ${model} -d INPUT_FILE ${WORK}/hello_ids.txt OUTPUT_VARIABLE din_OUT RESULT_VARIABLE din_RC)
if(NOT din_RC EQUAL 0 OR NOT din_OUT STREQUAL "Hello world\n")
  message(FATAL_ERROR "tokenize -d with stdin: exit ${din_RC} [${din_OUT}]")
endif()
# Words after "--" that look like mamba-cli's own flags are words too (they printed the help or
# the version, exit 0).
expect_error("error: unexpected argument '--help' of run: use -p" run -m ${model} -- --help)
expect_error("error: unexpected argument '--version' of run: use -p" run -m ${model} -- --version)
cli_run_ok(dash_after tokenize -m ${model} hello -- -hello)
cli_run_ok(dash_joined tokenize -m ${model} "hello -hello")
if(NOT dash_after_OUT STREQUAL dash_joined_OUT)
  message(FATAL_ERROR "tokenize hello -- -hello printed [${dash_after_OUT}], tokenize 'hello -hello' [${dash_joined_OUT}]")
endif()
cli_run_ok(dash tokenize -m ${model} -- -hello)
if(NOT dash_OUT MATCHES "^[0-9]+( [0-9]+)*\n$")
  message(FATAL_ERROR "tokenize -- -hello printed [${dash_OUT}]")
endif()

# A prompt file's (or stdin's) one trailing newline is not a prompt token, as in llama.cpp's -f:
# -f with "It was a dark\n" gives the prompt ids of -p "It was a dark".
file(WRITE ${WORK}/nl.txt "It was a dark\n")
file(WRITE ${WORK}/crlf.txt "It was a dark\r\n")
cli_run_ok(p_ids run -m ${model} -p "It was a dark" -n 1 --json)
string(REGEX MATCH "\"prompt_ids\":\\[[0-9,]*\\]" want "${p_ids_OUT}")
foreach(f nl.txt crlf.txt)
  cli_run_ok(f_ids run -m ${model} -f ${WORK}/${f} -n 1 --json)
  string(REGEX MATCH "\"prompt_ids\":\\[[0-9,]*\\]" got "${f_ids_OUT}")
  if(want STREQUAL "" OR NOT got STREQUAL want)
    message(FATAL_ERROR "-f ${f}: ${got}, expected ${want} (the trailing newline dropped)")
  endif()
endforeach()
# A lone final '\r' is text (as HF reads the file): only "\n" or "\r\n" is dropped.
file(WRITE ${WORK}/cr.txt "It was a dark\r")
cli_run_ok(cr_ids run -m ${model} -f ${WORK}/cr.txt -n 1 --json)
string(REGEX MATCH "\"prompt_ids\":\\[[0-9,]*\\]" got "${cr_ids_OUT}")
if(got STREQUAL want OR got STREQUAL "")
  message(FATAL_ERROR "-f cr.txt: ${got}: the final '\\r' was dropped")
endif()
execute_process(COMMAND ${CLI} run -t 1 -m ${model} -n 1 --json INPUT_FILE ${WORK}/nl.txt OUTPUT_VARIABLE s_out ERROR_VARIABLE s_err RESULT_VARIABLE rc)
string(REGEX MATCH "\"prompt_ids\":\\[[0-9,]*\\]" got "${s_out}")
if(NOT rc EQUAL 0 OR NOT got STREQUAL want)
  message(FATAL_ERROR "stdin: ${got}, expected ${want}\n${s_err}")
endif()

# Ctrl-C during generation keeps what was generated: the --json object is printed complete, with
# finish_reason "cancelled" (it was lost: SIGINT killed the process before any output); -n -1 is
# "no limit", as llama.cpp's. --foreground: without it coreutils' timeout sends the signal twice (to
# the command, then to its own process group), and the second is the "Ctrl-C twice" that kills at
# once (seen in CI as a run killed before its --json object was printed).
find_program(TIMEOUT timeout)
if(TIMEOUT)
  execute_process(COMMAND ${TIMEOUT} --foreground -s INT 2 ${CLI} run -t 1 -m ${model} -p "It was" -n -1 --ignore-eos --json
                  OUTPUT_VARIABLE int_out ERROR_VARIABLE int_err RESULT_VARIABLE rc)
  string(JSON fin ERROR_VARIABLE jerr GET "${int_out}" finish_reason)
  string(JSON nids ERROR_VARIABLE jerr2 LENGTH "${int_out}" ids)
  if(NOT fin STREQUAL "cancelled" OR NOT int_err MATCHES "finish: cancelled \\(Ctrl-C\\)" OR nids LESS 1)
    message(FATAL_ERROR "run interrupted by SIGINT: exit ${rc}, finish [${fin}] ${jerr}, ids ${nids}\n${int_err}")
  endif()
  # perplexity likewise prints its figures over the predictions scored before the Ctrl-C (it printed
  # nothing): 300 000 ids take ~40 s on one thread, the signal comes after 2.
  execute_process(COMMAND sh -c "seq 1 300000 | awk '{print ($1 * 7919) % 8000}'" OUTPUT_FILE ${WORK}/long_ids.txt)
  execute_process(COMMAND ${TIMEOUT} --foreground -s INT 2 ${CLI} perplexity -t 1 -m ${model} --ids-file ${WORK}/long_ids.txt --ctx 512
                  OUTPUT_VARIABLE ppl_out ERROR_VARIABLE ppl_err RESULT_VARIABLE rc)
  set(scored "")
  if(ppl_err MATCHES "interrupted \\(Ctrl-C\\) after ([1-9][0-9]*) of 299999 predictions: the figures below cover those")
    set(scored ${CMAKE_MATCH_1})
  endif()
  if(scored STREQUAL "" OR NOT ppl_out MATCHES "^predictions: ${scored}\nmean_nll: [0-9.]+\nperplexity: [0-9.]+\nprecision: (exact|bf16)\n$")
    message(FATAL_ERROR "perplexity interrupted by SIGINT: exit ${rc}\nstdout:\n${ppl_out}\nstderr:\n${ppl_err}")
  endif()
  # SIGTERM (`kill`, a job scheduler's stop) does the same as Ctrl-C (it killed the process with no
  # output), and the process ends by SIGTERM: --preserve-status passes on 128 + 15.
  execute_process(COMMAND ${TIMEOUT} --preserve-status --foreground -s TERM 2 ${CLI} run -t 1 -m ${model} -p "It was" -n -1 --ignore-eos --json
                  OUTPUT_VARIABLE term_out ERROR_VARIABLE term_err RESULT_VARIABLE rc)
  string(JSON fin ERROR_VARIABLE jerr GET "${term_out}" finish_reason)
  string(JSON nids ERROR_VARIABLE jerr2 LENGTH "${term_out}" ids)
  if(NOT fin STREQUAL "cancelled" OR NOT term_err MATCHES "finish: cancelled \\(SIGTERM\\) \\| prompt: " OR nids LESS 1 OR NOT rc EQUAL 143)
    message(FATAL_ERROR "run stopped by SIGTERM: exit ${rc}, finish [${fin}] ${jerr}, ids ${nids}\n${term_err}")
  endif()
  execute_process(COMMAND ${TIMEOUT} --preserve-status --foreground -s TERM 2 ${CLI} perplexity -t 1 -m ${model} --ids-file ${WORK}/long_ids.txt --ctx 512
                  OUTPUT_VARIABLE ppl_out ERROR_VARIABLE ppl_err RESULT_VARIABLE rc)
  set(scored "")
  if(ppl_err MATCHES "interrupted \\(SIGTERM\\) after ([1-9][0-9]*) of 299999 predictions: the figures below cover those")
    set(scored ${CMAKE_MATCH_1})
  endif()
  if(scored STREQUAL "" OR NOT ppl_out MATCHES "^predictions: ${scored}\nmean_nll: [0-9.]+\nperplexity: [0-9.]+\nprecision: (exact|bf16)\n$" OR NOT rc EQUAL 143)
    message(FATAL_ERROR "perplexity stopped by SIGTERM: exit ${rc}\nstdout:\n${ppl_out}\nstderr:\n${ppl_err}")
  endif()
endif()
# A word written as "[...]" is text (CLI11 split such vector arguments on commas and dropped the
# brackets: "[hello]" was encoded as "hello"), and "-d [1,,2]" reaches the id parser whole.
cli_run_ok(open_bracket tokenize -m ${model} "[")
cli_run_ok(bracketed_word tokenize -m ${model} "[hello]" "[a,,b]")
cli_run_ok(plain_words tokenize -m ${model} "hello" "a,,b")
string(STRIP "${open_bracket_OUT}" lb)
if(NOT bracketed_word_OUT MATCHES "^${lb} " OR bracketed_word_OUT STREQUAL plain_words_OUT)
  message(FATAL_ERROR "tokenize '[hello]' '[a,,b]' printed '${bracketed_word_OUT}' ('[' is ${lb}; without brackets: '${plain_words_OUT}')")
endif()
expect_error("error: --decode: empty item after item 1 \\(two commas\\)" tokenize -m ${model} -d "[1,,2]")
cli_run_ok(dashdash tokenize -m ${model} -- -x "[y]")
cli_run_ok(dashdash_ref tokenize -m ${model} -- "-x [y]")
if(NOT dashdash_OUT STREQUAL dashdash_ref_OUT)
  message(FATAL_ERROR "tokenize -- -x '[y]' printed '${dashdash_OUT}', tokenize '-x [y]' '${dashdash_ref_OUT}'")
endif()
# --stop "[and]" is that string, brackets included (CLI11 had split it to "and": the greedy
# continuation ", and\n" of "Once" stopped before " and").
cli_run_ok(stop_bracket run -m ${model} -p "Once" -n 3 --stop "[and]" --json)
cli_run_ok(stop_plain run -m ${model} -p "Once" -n 3 --stop "and" --json)
string(JSON r1 GET "${stop_bracket_OUT}" finish_reason)
string(JSON r2 GET "${stop_plain_OUT}" finish_reason)
if(NOT r1 STREQUAL "length" OR NOT r2 STREQUAL "stop_sequence")
  message(FATAL_ERROR "--stop '[and]': ${stop_bracket_OUT}\n--stop 'and': ${stop_plain_OUT}")
endif()

# Another model's tokenizer, with more ids than the model: a warning at load names the mismatch
# (before, only "prompt token 12092 … outside the vocabulary" once a prompt reached those ids).
if(SHARED AND EXISTS "${SHARED}/tokenizer/gpt-neox-20b.json")
  cli_run(r run -t 1 -m ${model} --tokenizer ${SHARED}/tokenizer/gpt-neox-20b.json -p "Hello world" -n 1)
  if(NOT r_RC EQUAL 2 OR NOT r_ERR MATCHES "warning: the tokenizer has 50277 ids and the model 8192: text that tokenizes to an id >= 8192 will be refused; is the tokenizer the model's own\\?")
    message(FATAL_ERROR "run with GPT-NeoX's tokenizer on an 8192-id model: exit ${r_RC}\n${r_ERR}")
  endif()
endif()
