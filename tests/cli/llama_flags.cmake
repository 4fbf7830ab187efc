# llama.cpp's multi-letter one-dash flags (-ngl, -fa, -hf, ...) are refused by name with what to do
# here: CLI11 had read them as bundled letters or a letter with its value attached (`run -fa -f x`
# ran as -f "a" then -f x, silently; `-hf` printed the help and exited 0). One dash takes one
# letter; values that start with '-' (a prompt, a negative number) still work.
include(${CMAKE_CURRENT_LIST_DIR}/cli_util.cmake)
set(model ${SRC}/models/mamba2-books-7m-bpe8k)
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
file(WRITE ${WORK}/prompt.txt "It was")

foreach(flag -ngl -fa -hf -np -tb -mli -no-cnv -cnv -ctk -ctv -sm -mg -ts)
  expect_error("error: unknown option '${flag}' of run \\(llama.cpp's ${flag}/[^\n]*\\? [^\n]+\\)\nRun with --help for more information\\.\n$"
               run -m ${model} ${flag} 1 -p hi -n 1)
endforeach()
expect_error("error: unknown option '-fa' of run \\(llama.cpp's -fa/--flash-attn\\? Mamba models have no attention" run -m ${model} -fa -f ${WORK}/prompt.txt -n 1)
expect_error("error: unknown option '-hf' of run .*-m takes a Hugging Face repo id.*hf download ORG/NAME" run -m ${model} -hf state-spaces/mamba-130m-hf -p hi)
expect_error("error: unknown option '-ngl' of run \\(llama.cpp's -ngl/--gpu-layers/--n-gpu-layers\\? mamba.cpp computes on the CPU only" run -m ${model} -ngl 99 -p hi)
expect_error("llama.cpp's -tb/--threads-batch\\? -t/--threads N sets" run -m ${model} -tb 2 -p hi)
expect_error("llama.cpp's -np/--parallel\\? .*mamba-server batches" run -m ${model} -np 4 -p hi)
# The table is shared with mamba-server, whose hints differ where its equivalent does; a flag
# mamba-cli has itself (-t) or one meaning nothing to it (--alias) gets none here.
expect_error("llama.cpp's -cb/--cont-batching\\? mamba-cli run generates one sequence" run -m ${model} -cb -p hi)
expect_error("error: unknown option '--alias' of run\nRun with --help" run -m ${model} --alias x -p hi)
# Long spellings and one-letter llama.cpp flags get the same hint.
expect_error("error: unknown option '--n-gpu-layers=99' of run \\(llama.cpp's -ngl/" run -m ${model} --n-gpu-layers=99 -p hi)
expect_error("error: unknown option '-s' of run \\(llama.cpp's -s/--seed\\? mamba-cli run's is --seed N\\)" run -m ${model} -s 5 -p hi)
# llama-perplexity's -c is its scoring window, which is perplexity's --ctx here; elsewhere -c sizes a
# context a Mamba model does not have.
expect_error("error: unknown option '-c' of perplexity \\(llama.cpp's -c/--ctx-size\\? perplexity's scoring window is --ctx N, as llama-perplexity's -c N \\(windows of N \\+ 1 ids sharing their boundary id\\)\\)"
             perplexity -m ${model} -c 512 -f ${WORK}/prompt.txt)
expect_error("error: unknown option '-c' of run \\(llama.cpp's -c/--ctx-size\\? a Mamba model has no context window to size \\(its state does not grow with the text\\): leave it out\\)\n"
             run -m ${model} -c 512 -p hi)
# Other multi-letter one-dash arguments: how options are written.
expect_error("error: unknown option '-xyz' of run \\(one dash takes one letter; long options take two, as --help lists them\\)\n"
             run -m ${model} -xyz -p hi)
expect_error("error: unknown option '-pHello' of run \\(one dash takes one letter; a value goes after a space: -p Hello\\)" run -m ${model} -pHello)
expect_error("error: unknown option '-dh' of tokenize \\(one dash takes one letter.*mamba-cli tokenize -- -dh\\)" tokenize -m ${model} -dh 1)

# Still fine: values that start with '-', a number attached to its letter, negative numbers.
cli_run_ok(dash_prompt run -m ${model} -p "-fa" -n 2 --json)
cli_run_ok(dash_prompt_long run -m ${model} --prompt=-fa -n 2 --json)
if(NOT dash_prompt_OUT STREQUAL dash_prompt_long_OUT OR NOT dash_prompt_OUT MATCHES "\"prompt_ids\":\\[[0-9]+,[0-9]+")
  message(FATAL_ERROR "-p -fa: ${dash_prompt_OUT}\n--prompt=-fa: ${dash_prompt_long_OUT}")
endif()
cli_run_ok(attached run -m ${model} --prompt-ids 1 -n3 -l0-inf --frequency-penalty -1 --ignore-eos --json)
string(JSON n LENGTH "${attached_OUT}" ids)
if(NOT n EQUAL 3)
  message(FATAL_ERROR "-n3 must generate 3 tokens: ${attached_OUT}")
endif()
cli_run_ok(help run -h)
if(NOT help_OUT MATCHES "Usage: mamba-cli run")
  message(FATAL_ERROR "run -h: ${help_OUT}")
endif()
# -t is the thread count in run and perplexity (tokenize's -t is its tokenizer): a file or repo
# given to it is pointed at --tokenizer.
expect_error("--threads: expected a decimal integer, got 'tok.json' \\(a thread count; a tokenizer file or repo goes in --tokenizer\\)"
             perplexity -m ${model} -t tok.json -f ${WORK}/prompt.txt)
# A number with a decimal point is no file: no such hint.
expect_error("--threads: expected a decimal integer, got '1.5'\nRun with --help" run -m ${model} -t 1.5 -p hi)
