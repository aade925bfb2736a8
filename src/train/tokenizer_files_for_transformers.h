#pragma once
// The files that let transformers load a tokenizer lazytrain reads. Two
// forms lazytrain reads are not enough for transformers' AutoTokenizer:
//  - GPT-2's original encoder.json + vocab.bpe: GPT2Tokenizer reads the
//    same mapping and merges as vocab.json + merges.txt, and AutoTokenizer
//    needs a tokenizer_config.json naming the class;
//  - a tokenizer.json without a tokenizer_config.json: AutoTokenizer then
//    takes the class from config.json's model_type (LlamaTokenizerFast for
//    a llama, which rewrites the post-processor to add a BOS) or fails, and
//    knows no end-of-sequence token, so generate never stops at one.
// A folder carrying a model (a checkpoint; convert's output) gets them.
#include <filesystem>
#include <string>
#include <vector>

namespace lt::train {

// Writes into `folder`, beside the tokenizer files already there, what
// transformers needs to load the tokenizer lazytrain reads from it; each
// file atomically (io::write_file_atomic), none over one already there:
//  - with encoder.json + vocab.bpe read (no tokenizer.json) and neither
//    vocab.json nor merges.txt there: vocab.json (encoder.json's bytes) and
//    merges.txt ("#version: 0.2", then vocab.bpe's merges one a line, each
//    line ended by '\n': GPT2Tokenizer drops the first line and the empty
//    last one);
//  - with no tokenizer_config.json: one naming "tokenizer_class"
//    (GPT2Tokenizer for GPT-2's files, PreTrainedTokenizerFast for a
//    tokenizer.json) and the special tokens the tokenizer has: the EOS
//    lazytrain ends samples with (data::resolve_special_ids), and for
//    GPT2Tokenizer <|endoftext|> as BOS and UNK as GPT-2's published
//    tokenizer_config.json has them, or for a tokenizer.json the pad
//    token its "padding" names (or special_tokens_map.json's, which
//    transformers also reads; no bos_token: the post-processor puts the
//    BOS, and a template's {{ bos_token }} must render as in training); and
//    "clean_up_tokenization_spaces": false, so that transformers decodes
//    as lazytrain does (transformers 4.x otherwise defaults to removing
//    the space before punctuation).
// A tokenizer this program cannot read gets no tokenizer_config.json (its
// tokens are unknown); a folder with only a tokenizer.model, or no
// tokenizer, is left as it is. Returns the names of the files written.
// What is written is computed once per process for the same input bytes
// (each checkpoint of a run copies the same tokenizer).
std::vector<std::string> write_tokenizer_files_for_transformers(
    const std::filesystem::path& folder);

}  // namespace lt::train
