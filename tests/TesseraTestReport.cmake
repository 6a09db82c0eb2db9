# tessera-report (report/html_report.hpp): the page drawn by headless Chromium from real runs, its negative control,
# and the tool's refusals of bad input (each leaving no page behind).
add_test(NAME report.renders_in_chromium
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/report/report_renders.sh ${PROJECT_BINARY_DIR}/examples
          $<TARGET_FILE:tessera-report> ${MPIEXEC_EXECUTABLE} python3)
set_tests_properties(report.renders_in_chromium PROPERTIES LABELS report TIMEOUT 300)
add_test(NAME report.blank_page_fails COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/report/blank_page_fails.sh python3)
set_tests_properties(report.blank_page_fails PROPERTIES LABELS report TIMEOUT 120)

# Bad input: exit code, the message, and no page (nor its .partial-<pid>) left.
function(tessera_report_error name code expected setup)
  string(REPLACE ";" " " args "${ARGN}")
  add_test(NAME report.${name} COMMAND bash -c
    "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${setup}
     $<TARGET_FILE:tessera-report> -o out.html ${args} > out.txt 2>&1; rc=$?; cat out.txt;
     [ $rc -eq ${code} ] && grep -q -F -- '${expected}' out.txt && [ ! -e out.html ] && [ -z \"$(ls -d out.html.partial* 2>/dev/null)\" ]")
  set_tests_properties(report.${name} PROPERTIES LABELS report TIMEOUT 60)
endfunction()
tessera_report_error(no_files 2 "no metrics files given" "")
tessera_report_error(unknown_option 2 "unknown option --colour" "" --colour m.jsonl)
tessera_report_error(missing_file 1 "nope.jsonl: cannot be read (no such file)" "" nope.jsonl)
tessera_report_error(not_json 1 "m.jsonl:2: not a JSON record" "printf '{\"event\":\"run\"}\\nhello\\n' > m.jsonl;" m.jsonl)
tessera_report_error(unfinished 1 "m.jsonl: no \"done\" record" "printf '{\"event\":\"step\",\"step\":0,\"loss\":1.5,\"step_ms\":3,\"tokens\":8}\\n' > m.jsonl;" m.jsonl)
tessera_report_error(bad_phase 1 "m.jsonl:1: \"phase\" is \"middle\"" "printf '{\"event\":\"memory\",\"step\":0,\"micro\":0,\"rank\":0,\"phase\":\"middle\"}\\n' > m.jsonl;" m.jsonl)
tessera_report_error(unwritable_out 1 "cannot be written" "printf '{\"event\":\"done\",\"peak\":1,\"train_s\":1.0}\\n' > m.jsonl;" -o /nonexistent-dir/x.html m.jsonl)

# trace= (report/timeline.hpp): each policy's trace opened as Perfetto would (tests/report/check_trace.py): a lane
# per rank, and the events the policy must show; no .partial left. Then bad trace= paths are refused up front.
set(_trace_env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)
function(tessera_trace_test name binary ranks kinds)
  string(REPLACE ";" " " args "${ARGN}")
  if(ranks GREATER 1)
    set(launch "${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${ranks} --oversubscribe")
  else()
    set(launch "")
  endif()
  add_test(NAME report.trace_${name} COMMAND bash -c
    "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d;
     ${launch} ${PROJECT_BINARY_DIR}/examples/${binary} model=tiny max_steps=2 seq_len=32 batch_size=2 predict=false trace=t.json ${args} > out.txt 2>&1 || { cat out.txt; exit 1; };
     [ -z \"$(ls -d t.json.partial* 2>/dev/null)\" ] && python3 ${CMAKE_CURRENT_SOURCE_DIR}/report/check_trace.py t.json ${ranks} ${kinds}")
  set_tests_properties(report.trace_${name} PROPERTIES LABELS report TIMEOUT 300 ENVIRONMENT "${_trace_env}")
endfunction()
tessera_trace_test(single llama-fp32 1 step,micro-step,forward,backward,optimizer)
tessera_trace_test(accumulation llama-bf16mixed 1 step,micro-step,forward,backward,optimizer accumulate_grad_batches=2)
tessera_trace_test(offload llama-offload-bf16true 1 forward,backward,optimizer,host,device)
if(TESSERA_WITH_MPI)
  tessera_trace_test(ddp llama-ddp-fp32 2 forward,backward,optimizer,all-reduce)
  tessera_trace_test(zero2 llama-zero2-fp32 2 forward,backward,optimizer,reduce-scatter,all-gather)
  tessera_trace_test(fsdp llama-fsdp-fp32 4 forward,backward,optimizer,all-gather,reduce-scatter)
  tessera_trace_test(fsdp_offload llama-fsdp-offload-bf16true 2 all-gather,reduce-scatter,host,device)
endif()
# The check itself must be able to fail: a 1-rank trace does not pass for 2 ranks, nor without a kind it lacks.
add_test(NAME report.trace_check_fails COMMAND bash -c
  "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d;
   ${PROJECT_BINARY_DIR}/examples/llama-fp32 model=tiny max_steps=1 seq_len=32 batch_size=2 predict=false trace=t.json > /dev/null 2>&1 &&
   ! python3 ${CMAKE_CURRENT_SOURCE_DIR}/report/check_trace.py t.json 2 forward &&
   ! python3 ${CMAKE_CURRENT_SOURCE_DIR}/report/check_trace.py t.json 1 all-gather &&
   printf '{\"traceEvents\": [' > bad.json && ! python3 ${CMAKE_CURRENT_SOURCE_DIR}/report/check_trace.py bad.json 1 step")
set_tests_properties(report.trace_check_fails PROPERTIES LABELS report TIMEOUT 120)
function(tessera_trace_refused name expected)
  string(REPLACE ";" " " args "${ARGN}")
  add_test(NAME report.trace_refused_${name} COMMAND bash -c
    "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; mkdir adir;
     ${PROJECT_BINARY_DIR}/examples/llama-fp32 model=tiny max_steps=1 predict=false ${args} > out.txt 2>&1; rc=$?; cat out.txt;
     [ $rc -ne 0 ] && grep -q -F -- '${expected}' out.txt && [ -z \"$(ls | grep -v -e out.txt -e adir)\" ]")
  set_tests_properties(report.trace_refused_${name} PROPERTIES LABELS report TIMEOUT 60)
endfunction()
tessera_trace_refused(directory "trace=adir: names a directory" trace=adir)
tessera_trace_refused(no_parent "trace=nope/t.json: parent directory nope does not exist" trace=nope/t.json)
tessera_trace_refused(same_as_metrics "trace=m.json: is also metrics=m.json" trace=m.json metrics=m.json)
