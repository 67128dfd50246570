/* vocab.h: a tokenizer vocabulary: GPT-2 byte-level BPE or char-level (nanoGPT shakespeare_char).
 * Owns: gk_vocab, created by gk_vocab_load / gk_vocab_from_chars, freed by gk_vocab_free;
 * pointers it returns live as long as it. Read-only after creation: share it between threads.
 *
 * Formats read (gk_vocab_load's path):
 *  - a directory holding encoder.json + vocab.bpe (OpenAI names) or vocab.json + merges.txt
 *    (HuggingFace names). The JSON object maps token -> id; keys are in GPT-2's bytes_to_unicode
 *    alphabet (each char stands for one byte); "<|endoftext|>" is the special token. Ids must be
 *    exactly 0..N-1. The merges file: optional "#version..." first line, then lines "A B" where
 *    A, B and AB must all be tokens; its raw text is kept (gk_vocab_merges_text).
 *  - a .tiktoken file: lines "BASE64 RANK", ranks exactly 0..N-1 (id = rank); the special
 *    token "<|endoftext|>" is added as id N.
 *  - a char vocab file: a JSON array of one-character strings in id order, code points
 *    strictly ascending (what gk_vocab_save_chars writes).
 * BPE merges follow tiktoken: the rank of merging two adjacent parts is the id of the token
 * equal to their concatenated bytes (the lowest wins, leftmost on ties). For GPT-2 this is
 * the merge order of vocab.bpe (merge line i makes token 256 + i).
 *
 * Fingerprint (gk_vocab_fingerprint; stored in shard headers and checkpoints): zlib CRC-32
 *  - BPE: over, for each id 0..N-1 in order, u32le(id) u32le(byte length) then the token's
 *    bytes; the special token contributes its text "<|endoftext|>". Equal for the same
 *    vocabulary whichever file format it came from.
 *  - char: over the code points in id order, each as u32le. */
#ifndef GK_VOCAB_H
#define GK_VOCAB_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "err.h"

enum { GK_VOCAB_BPE = 1, GK_VOCAB_CHAR = 2 };

typedef struct gk_vocab gk_vocab;

/* Loads a vocabulary from path (see the formats above) into *out. Errors name the file and
 * the problem: GK_ENOTFOUND (missing file), GK_EFORMAT (bad JSON with line:col, duplicate or
 * missing ids, bad merge at file:line, bad base64...), GK_EIO, GK_ENOMEM. */
int gk_vocab_load(gk_vocab **out, const char *path, gk_err *e);

/* Makes a char-level vocab: id i is codepoints[i]; they must be strictly ascending and valid
 * (<= 0x10FFFF, not surrogates), else GK_EUSAGE. n may be 0. */
int gk_vocab_from_chars(gk_vocab **out, const uint32_t *codepoints, size_t n, gk_err *e);

/* Writes a char vocab as a JSON array of one-character strings (UTF-8), then a newline. */
int gk_vocab_save_chars(const gk_vocab *v, FILE *f, gk_err *e);

void gk_vocab_free(gk_vocab *v); /* accepts NULL */

int gk_vocab_type(const gk_vocab *v);        /* GK_VOCAB_BPE or GK_VOCAB_CHAR */
uint32_t gk_vocab_size(const gk_vocab *v);   /* number of ids incl. special (GPT-2: 50257) */
int32_t gk_vocab_eot(const gk_vocab *v);     /* id of <|endoftext|>; -1 for char vocabs */
uint32_t gk_vocab_fingerprint(const gk_vocab *v);

/* Raw bytes of token id (*len set): for eot its text "<|endoftext|>", for char vocabs the UTF-8
 * of the code point. NULL (and *len = 0) for an id >= gk_vocab_size. */
const unsigned char *gk_vocab_token(const gk_vocab *v, uint32_t id, size_t *len);

/* Raw text of the merges file (NUL-terminated, *len set if len != NULL); NULL for char and
 * .tiktoken vocabs. */
const char *gk_vocab_merges_text(const gk_vocab *v, size_t *len);

/* Where to load a vocab from, written to out[0..cap): option if not NULL, else $GPT_VOCAB,
 * else the HuggingFace cache ($HF_HOME, default ~/.cache/huggingface:
 * hub/models--gpt2/snapshots/ * / with vocab.json + merges.txt), else GPTKIT_DATADIR if it
 * holds encoder.json + vocab.bpe. GK_ENOTFOUND (with a hint) if none; GK_EUSAGE if too long. */
int gk_vocab_find(char *out, size_t cap, const char *option, gk_err *e);

/* Char-level encoding: appends the id of each code point of text[0..len) to the growable
 * array *ids (length *n, capacity *cap; realloc'd). A character not in the vocab (or invalid
 * UTF-8) is GK_EFORMAT naming it as U+XXXX and its byte offset. v must be a char vocab. */
int gk_char_encode(const gk_vocab *v, const char *text, size_t len, uint32_t **ids, size_t *n,
                   size_t *cap, gk_err *e);

#endif
