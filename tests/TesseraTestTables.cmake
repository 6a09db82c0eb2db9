# tessera's table reader (data/table_source.hpp: datasets directories, DatasetDicts, load_dataset's cache, Parquet)
# against `datasets` 5.2 and pyarrow 26 (tests/reference/check_table_source.py): the script makes the tables with
# them (captioned JPEG and PNG images, text, ClassLabel columns; several Arrow files, several row groups) and compares
# every value table_dump reads with what `datasets` reads; then the bad tables (truncated, wrong schema, missing
# column, missing file, null value) must each be refused with the file, row and column named. The negative control
# must see a mismatch.
if(TESSERA_WITH_ARROW)
  add_executable(table_dump data/table_dump.cpp)
  target_link_libraries(table_dump PRIVATE tessera::tessera)
  set(_check_tables ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_table_source.py"
      $<TARGET_FILE:table_dump>)
  tessera_reference_case(reference.table_source COMMAND ${_check_tables})
  tessera_reference_case(reference.table_source_negative_control COMMAND ${_check_tables} --perturb --expect-mismatch)
endif()

# The first batches and the step-1 loss from a datasets directory against the labs' pipeline
# (tests/reference/check_lab_batches.py: datasets' shuffle and select, the model's image processor and tokenizer with
# padding, truncation and max_length, transformers' loss): BLIP-2 over OPT on captioned JPEG and PNG images, with the
# caption-only and the processor's targets and the DataLoader order; the same over Flan-T5 with its SentencePiece
# tokenizer as the hub ships it (spiece.model); ViT on a DatasetDict with a ClassLabel column.
if(TESSERA_WITH_ARROW AND TARGET blip2-opt-fp32 AND TARGET blip2-t5-fp32 AND TARGET vit-fp32)
  add_executable(batch_dump data/batch_dump.cpp)
  target_link_libraries(batch_dump PRIVATE tessera::tessera)
  target_include_directories(batch_dump PRIVATE "${CMAKE_CURRENT_SOURCE_DIR}")
  tessera_use_pch(batch_dump)
  set(_check_lab_batches ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_lab_batches.py"
      $<TARGET_FILE:batch_dump>)
  tessera_reference_case(reference.lab_batches_blip2 COMMAND ${_check_lab_batches} $<TARGET_FILE:blip2-opt-fp32> --family blip2)
  tessera_reference_case(reference.lab_batches_blip2_t5
    COMMAND ${_check_lab_batches} $<TARGET_FILE:blip2-t5-fp32> --family blip2-t5)
  tessera_reference_case(reference.lab_batches_vit COMMAND ${_check_lab_batches} $<TARGET_FILE:vit-fp32> --family vit)
  tessera_reference_case(reference.lab_batches_negative_control
    COMMAND ${_check_lab_batches} $<TARGET_FILE:vit-fp32> --family vit --perturb --expect-mismatch)
  # Bad tables given to a run (image bytes that are no image, a null caption in 100,000 rows, a truncated Arrow
  # file, a missing data file, a missing column, two Parquet schemas): refused naming file, row and column, nothing
  # left behind; the negative control leaves one bad setting out and must see that run succeed.
  tessera_reference_case(reference.lab_batches_bad_tables
    COMMAND ${_check_lab_batches} $<TARGET_FILE:blip2-opt-fp32> --family bad)
  tessera_reference_case(reference.lab_batches_bad_tables_negative_control
    COMMAND ${_check_lab_batches} $<TARGET_FILE:blip2-opt-fp32> --family bad --perturb --expect-mismatch)
endif()

# The seed 000 and 002 entries (BLIP-2 over OPT) on a datasets directory with the lab's shuffle.
if(TESSERA_WITH_ARROW AND TARGET seed000-single AND TARGET seed002-bf16-true AND TARGET batch_dump)
  tessera_reference_case(reference.lab_batches_catalogue
    COMMAND ${_check_lab_batches} $<TARGET_FILE:seed000-single> --family catalogue
            --extra-exe $<TARGET_FILE:seed002-bf16-true>)
endif()
