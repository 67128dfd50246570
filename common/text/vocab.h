/* vocab.h: a tokenizer vocabulary: GPT-2 byte-level BPE or char-level (nanoGPT shakespeare_char).
 * Owns: gk_vocab, created by gk_vocab_load / gk_vocab_load_mem / gk_vocab_from_chars, freed by
 * gk_vocab_free; pointers it returns live as long as it (gk_vocab_to_json and gk_vocab_merges
 * return malloc'd copies). Read-only after creation: share it between threads.
 *
 * Formats read (gk_vocab_load's path):
 *  - a directory holding encoder.json + vocab.bpe (OpenAI names) or vocab.json + merges.txt
 *    (HuggingFace names). The JSON object maps token -> id; keys are in GPT-2's bytes_to_unicode
 *    alphabet (each char stands for one byte); "<|endoftext|>" is the special token. Ids must be
 *    exactly 0..N-1. The merges file: optional "#version..." first line, then lines "A B" where
 *    A, B and AB must all be tokens; its raw text is kept (gk_vocab_merges_text). The first line
 *    may name the pre-tokenizer pattern (pretok.h) as " pattern: NAME" after the version
 *    ("#version: 0.2 pattern: gpt4", as gpt-tokenize --learn --pattern gpt4 writes it; other
 *    readers skip the line); without it the pattern is GPT-2's.
 *  - a .tiktoken file: lines "BASE64 RANK", ranks exactly 0..N-1 (id = rank); the special
 *    token "<|endoftext|>" is added as id N (so no rank may have that text: its JSON copy
 *    would hold the key twice).
 *  - a char vocab file: a JSON array of one-character strings in id order, code points
 *    strictly ascending (what gk_vocab_save_chars writes).
 * In memory (gk_vocab_load_mem; a checkpoint's U8 tensors tokenizer.vocab, tokenizer.merges):
 * the vocab.json text (JSON object: BPE) or the char vocab's JSON array, plus the merges text.
 * BPE merges follow tiktoken: the rank of merging two adjacent parts is the id of the token
 * equal to their concatenated bytes (the lowest wins, leftmost on ties). For GPT-2 this is
 * the merge order of vocab.bpe (merge line i makes token 256 + i).
 *
 * Fingerprint (gk_vocab_fingerprint; stored in shard headers and checkpoints): zlib CRC-32
 *  - BPE: over, for each id 0..N-1 in order, u32le(id) u32le(byte length) then the token's
 *    bytes; the special token contributes its text "<|endoftext|>". Equal for the same
 *    vocabulary whichever file format it came from. With another pattern than GPT-2's the CRC
 *    then goes on over the pattern's name ("gpt4"): the same tokens cut otherwise are another
 *    tokenizer.
 *  - char: over the code points in id order, each as u32le. */
#ifndef GK_VOCAB_H
#define GK_VOCAB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "common/err.h"
#include "common/text/pretok.h"

enum { GK_VOCAB_BPE = 1, GK_VOCAB_CHAR = 2 };

typedef struct gk_vocab gk_vocab;

/* Loads a vocabulary from path (see the formats above) into *out. Errors name the file and
 * the problem: GK_ENOTFOUND (missing file), GK_EFORMAT (bad JSON with line:col, duplicate or
 * missing ids, bad merge at file:line, bad base64...), GK_EIO, GK_ENOMEM. */
int gk_vocab_load(gk_vocab **out, const char *path, gk_err *e);

/* Loads a vocabulary from texts in memory (need not be NUL-terminated): vocab_json[0..vocab_len)
 * is a JSON object (BPE, as in vocab.json) or a JSON array (char vocab, as gk_vocab_save_chars
 * writes); merges[0..merges_len) is the merges.txt text for BPE (NULL or empty: none kept, and
 * gk_vocab_merges regenerates it), NULL or empty for a char vocab. Errors as gk_vocab_load's,
 * naming origin (e.g. "model.safetensors:tokenizer.vocab") for the JSON and "origin (merges)"
 * for the merges: "origin:line:col: ..." for bad JSON, "origin (merges):line: ..." for a bad
 * merge. GK_EFORMAT for anything else than an object or array. */
int gk_vocab_load_mem(gk_vocab **out, const char *vocab_json, size_t vocab_len, const char *merges,
                      size_t merges_len, const char *origin, gk_err *e);

/* The vocabulary as text into *out (malloc'd, NUL-terminated; caller frees) and *len.
 * BPE: HuggingFace's vocab.json, byte for byte what OpenAI's encoder.json is (Python json.dumps
 * style: {"!": 0, "\"": 1, ...}, keys in the byte alphabet with non-ASCII as \uXXXX, in id
 * order, "<|endoftext|>" at its id). Char: the JSON array gk_vocab_save_chars writes (with its
 * newline). gk_vocab_load_mem reads either back to the same ids and fingerprint. GK_ENOMEM. */
int gk_vocab_to_json(const gk_vocab *v, char **out, size_t *len, gk_err *e);

/* The merges.txt text for a BPE vocab into *out (malloc'd, NUL-terminated; caller frees) and
 * *len: the kept merges text if the vocab was loaded with one, else regenerated from the ranks:
 * "#version: 0.2" (and " pattern: NAME" for another than GPT-2's) then, for each token of two
 * or more bytes in id (= rank) order, "A B" where A and B are the two parts tiktoken's merge of
 * the token's bytes joins last (equal to vocab.bpe for GPT-2). A token the merges cannot make
 * from lower ranks is GK_EFORMAT naming it. For a char vocab *out = NULL, *len = 0 and 0 is
 * returned. GK_ENOMEM. */
int gk_vocab_merges(const gk_vocab *v, char **out, size_t *len, gk_err *e);

/* A BPE vocab as HuggingFace tokenizers' tokenizer.json into *out (malloc'd, NUL-terminated;
 * caller frees) and *len: a byte-level BPE model with the vocab.json and merges.txt above, the
 * pre-tokenizer of the pattern (GPT-2's: ByteLevel with its regex; another: Split on the
 * pattern, then ByteLevel), <|endoftext|> and the printable ASCII tokens after it (gpt-tokenize
 * --special's) as special added tokens.
 * transformers' PreTrainedTokenizerFast and tokenizers' Tokenizer.from_file encode with it as
 * gk_bpe does. GK_EUSAGE for a char vocab; GK_ENOMEM. */
int gk_vocab_hf_json(const gk_vocab *v, char **out, size_t *len, gk_err *e);

/* Makes a char-level vocab: id i is codepoints[i]; they must be strictly ascending and valid
 * (<= 0x10FFFF, not surrogates), else GK_EUSAGE. n may be 0. */
int gk_vocab_from_chars(gk_vocab **out, const uint32_t *codepoints, size_t n, gk_err *e);

/* Writes a char vocab as a JSON array of one-character strings (UTF-8), then a newline. */
int gk_vocab_save_chars(const gk_vocab *v, FILE *f, gk_err *e);

void gk_vocab_free(gk_vocab *v); /* accepts NULL */

int gk_vocab_type(const gk_vocab *v);        /* GK_VOCAB_BPE or GK_VOCAB_CHAR */
enum { GK_GPT2_VOCAB_SIZE = 50257 }; /* GPT-2 BPE: 50000 merges + 256 bytes + <|endoftext|> */
uint32_t gk_vocab_size(const gk_vocab *v);   /* number of ids incl. special (GPT-2: 50257) */
int32_t gk_vocab_eot(const gk_vocab *v);     /* id of <|endoftext|>; -1 for char vocabs */
int gk_vocab_pattern(const gk_vocab *v);     /* GK_PATTERN_* (pretok.h): BPE pre-tokenizer */
uint32_t gk_vocab_fingerprint(const gk_vocab *v);

/* Raw bytes of token id (*len set): for eot its text "<|endoftext|>", for char vocabs the UTF-8
 * of the code point. NULL (and *len = 0) for an id >= gk_vocab_size. */
const unsigned char *gk_vocab_token(const gk_vocab *v, uint32_t id, size_t *len);

/* Raw text of the merges file (NUL-terminated, *len set if len != NULL); NULL for char and
 * .tiktoken vocabs and those loaded without merges (gk_vocab_merges makes one for those). */
const char *gk_vocab_merges_text(const gk_vocab *v, size_t *len);

/* Where to load a vocab from, written to out[0..cap): option if not NULL, else $GPT_VOCAB,
 * else the HuggingFace cache ($HF_HOME, default ~/.cache/huggingface:
 * hub/models--gpt2/snapshots/ * / with vocab.json + merges.txt), else gk_datadir() if it
 * holds encoder.json + vocab.bpe. GK_ENOTFOUND (with a hint) if none; GK_EUSAGE if too long.
 * The variables are those the tool gave gk_vocab_set_search (none before it is called). */
int gk_vocab_find(char *out, size_t cap, const char *option, gk_err *e);

/* The tool's $GPT_VOCAB, $HF_HOME and $HOME (common/env.h; NULL or "": unset) for every later
 * gk_vocab_find, which the model loader calls deep inside the tools: called once by a tool's
 * main before any thread starts; the strings must outlive those calls. */
void gk_vocab_set_search(const char *gpt_vocab, const char *hf_home, const char *home);

/* Char-level encoding: appends the id of each code point of text[0..len) to the growable
 * array *ids (length *n, capacity *cap; realloc'd). A character not in the vocab (or invalid
 * UTF-8) is GK_EFORMAT naming it as U+XXXX and its byte offset. v must be a char vocab. */
int gk_char_encode(const gk_vocab *v, const char *text, size_t len, uint32_t **ids, size_t *n,
                   size_t *cap, gk_err *e);

#endif
