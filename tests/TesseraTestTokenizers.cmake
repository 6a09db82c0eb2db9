# tessera's tokenizers (text/tokenizer.hpp) against python sentencepiece 0.2.1, tokenizers 0.23.3 and transformers'
# GPT2Tokenizer (tests/reference/check_tokenizers.py), byte for byte: ids and decoded text of ~3,400 generated strings
# per tokenizer, on the committed fixtures (tests/text/fixtures/, scripts/make_test_tokenizers.py: a Llama-like
# SentencePiece BPE, a T5-like unigram, an OPT-like byte-level BPE as tokenizer.json and as vocab.json + merges.txt)
# and, with --variants, four tokenizer.json files derived from the BPE one (add_prefix_space, no regex,
# ignore_merges, added tokens with single_word / lstrip / rstrip). tokenize_dump is tessera's side.
add_executable(tokenize_dump text/tokenize_dump.cpp)
target_link_libraries(tokenize_dump PRIVATE tessera::tessera)

set(_fixtures "${CMAKE_CURRENT_SOURCE_DIR}/text/fixtures")
set(_check_tokenizers ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_tokenizers.py"
    $<TARGET_FILE:tokenize_dump>)
tessera_reference_case(reference.tokenizers
  COMMAND ${_check_tokenizers} ${_fixtures}/sp_bpe ${_fixtures}/sp_unigram ${_fixtures}/bpe_json ${_fixtures}/bpe_files
          --variants)
# Negative controls: one expected id off by one must be reported, for a byte-level BPE and for SentencePiece.
tessera_reference_case(reference.tokenizers_negative_control_bpe
  COMMAND ${_check_tokenizers} ${_fixtures}/bpe_json --perturb --expect-mismatch)
tessera_reference_case(reference.tokenizers_negative_control_sentencepiece
  COMMAND ${_check_tokenizers} ${_fixtures}/sp_unigram --perturb --expect-mismatch)
# Long one-line texts (about 300 KB each, --long) encoded by tessera in chunks, at every cut (--chunk-bytes 1) and
# in 4 KiB chunks (text/chunks.hpp), against the references' ids of each whole text; with its negative control.
tessera_reference_case(reference.tokenizers_long_text
  COMMAND ${_check_tokenizers} ${_fixtures}/sp_bpe ${_fixtures}/sp_unigram ${_fixtures}/bpe_json ${_fixtures}/bpe_files
          --variants --long 300000)
tessera_reference_case(reference.tokenizers_long_text_negative_control
  COMMAND ${_check_tokenizers} ${_fixtures}/sp_bpe --long 300000 --perturb --expect-mismatch)

# The instruction rows (data/text_data.hpp through data/token_batches.hpp) against litgpt 0.5.7's SFTDataset with the
# alpaca prompt style (tests/reference/check_text_data.py): a Llama-like SentencePiece (BOS added), an OPT-like
# tokenizer.json, a T5-like SentencePiece; text_rows_dump is tessera's side. The negative control must see a mismatch.
add_executable(text_rows_dump data/text_rows_dump.cpp)
target_link_libraries(text_rows_dump PRIVATE tessera::tessera)
set(_check_text_data ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_text_data.py"
    $<TARGET_FILE:text_rows_dump>)
tessera_reference_case(reference.text_data_litgpt TIMEOUT 600
  COMMAND ${_check_text_data} ${_fixtures}/sp_bpe:LlamaTokenizer ${_fixtures}/bpe_json ${_fixtures}/sp_unigram:T5Tokenizer)
tessera_reference_case(reference.text_data_litgpt_negative_control TIMEOUT 600
  COMMAND ${_check_text_data} ${_fixtures}/sp_bpe:LlamaTokenizer --count 20 --perturb --expect-mismatch)
# litgpt's Alpaca2k (--alpaca2k): the records as load_dataset's Arrow cache (data= its cache_dir), split by litgpt's
# own Alpaca2k.setup() (train_test_split(test_size=0.05, seed=42)) against tessera's val_split_fraction=0.05 seed=42.
if(TESSERA_WITH_ARROW)
  tessera_reference_case(reference.text_data_alpaca2k
    COMMAND ${_check_text_data} ${_fixtures}/sp_bpe:LlamaTokenizer ${_fixtures}/bpe_json --count 120 --alpaca2k)
  tessera_reference_case(reference.text_data_alpaca2k_negative_control
    COMMAND ${_check_text_data} ${_fixtures}/bpe_json --count 40 --alpaca2k --perturb --expect-mismatch)
endif()
