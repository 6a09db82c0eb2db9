# tessera-report (report/html_report.hpp): the page drawn by headless Chromium from real runs, its negative control,
# and the tool's refusals of bad input (each leaving no page behind).
add_test(NAME report.renders_in_chromium
  COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/report/report_renders.sh ${PROJECT_BINARY_DIR}/examples
          $<TARGET_FILE:tessera-report> ${MPIEXEC_EXECUTABLE} python3)
set_tests_properties(report.renders_in_chromium PROPERTIES LABELS report TIMEOUT 300)
add_test(NAME report.blank_page_fails COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/report/blank_page_fails.sh python3)
set_tests_properties(report.blank_page_fails PROPERTIES LABELS report TIMEOUT 120)

# Bad input: exit code, the message, and no page (nor its .partial) left.
function(tessera_report_error name code expected setup)
  string(REPLACE ";" " " args "${ARGN}")
  add_test(NAME report.${name} COMMAND bash -c
    "d=$(mktemp -d); trap 'rm -rf $d' EXIT; cd $d; ${setup}
     $<TARGET_FILE:tessera-report> -o out.html ${args} > out.txt 2>&1; rc=$?; cat out.txt;
     [ $rc -eq ${code} ] && grep -q -F -- '${expected}' out.txt && [ ! -e out.html ] && [ ! -e out.html.partial ]")
  set_tests_properties(report.${name} PROPERTIES LABELS report TIMEOUT 60)
endfunction()
tessera_report_error(no_files 2 "no metrics files given" "")
tessera_report_error(unknown_option 2 "unknown option --colour" "" --colour m.jsonl)
tessera_report_error(missing_file 1 "nope.jsonl: cannot be read (no such file)" "" nope.jsonl)
tessera_report_error(not_json 1 "m.jsonl:2: not a JSON record" "printf '{\"event\":\"run\"}\\nhello\\n' > m.jsonl;" m.jsonl)
tessera_report_error(unfinished 1 "m.jsonl: no \"done\" record" "printf '{\"event\":\"step\",\"step\":0,\"loss\":1.5,\"step_ms\":3,\"tokens\":8}\\n' > m.jsonl;" m.jsonl)
tessera_report_error(bad_phase 1 "m.jsonl:1: \"phase\" is \"middle\"" "printf '{\"event\":\"memory\",\"step\":0,\"micro\":0,\"rank\":0,\"phase\":\"middle\"}\\n' > m.jsonl;" m.jsonl)
tessera_report_error(unwritable_out 1 "cannot be written" "printf '{\"event\":\"done\",\"peak\":1,\"train_s\":1.0}\\n' > m.jsonl;" -o /nonexistent-dir/x.html m.jsonl)
