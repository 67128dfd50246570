/* encode_text.h: text -> token ids for a model, the one way the tools do it (gpt-sample's
 * prompt, gpt-evalppl's text inputs, gpt-train's sample start): invalid UTF-8 is replaced by
 * U+FFFD and counted (the caller warns, as gpt-tokenize does), then BPE (tiktoken's encoding)
 * or char-level encoding with the vocabulary; optionally <|endoftext|> first.
 * Owns: nothing past a call but a gk_text_encoder (its BPE encoder and buffer, until freed); the
 * ids array is the caller's (free()).
 * Thread safety: gk_text_encode is reentrant (each call makes its own BPE encoder); an encoder is
 * one thread's; v is only read. */
#ifndef GK_ENCODE_TEXT_H
#define GK_ENCODE_TEXT_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/text/vocab.h"

enum {
    GK_ENCODE_EOT_FIRST = 1, /* start with <|endoftext|> when the vocabulary has it (BPE) */
    GK_ENCODE_SPECIAL = 2,   /* a literal "<|endoftext|>" in the text is that token (BPE) */
};

/* Appends the ids of text[0..len) to the growable array *ids (length *n, capacity *cap;
 * realloc'd, *ids may start NULL). *replaced: invalid UTF-8 sequences replaced by U+FFFD (may
 * be NULL). A character a char vocabulary lacks is GK_EFORMAT naming it and its byte offset
 * (in the sanitized text); GK_ENOMEM when out of memory. */
int gk_text_encode(const gk_vocab *v, const char *text, size_t len, int flags, uint32_t **ids,
                   size_t *n, size_t *cap, size_t *replaced, gk_err *e);

/* The same for many texts with one encoder (the BPE encoder's set-up and cache kept between
 * texts): create, run as gk_text_encode, free (NULL-safe). v must outlive it. */
typedef struct gk_text_encoder gk_text_encoder;
int gk_text_encoder_create(gk_text_encoder **out, const gk_vocab *v, gk_err *e);
int gk_text_encoder_run(gk_text_encoder *t, const char *text, size_t len, int flags,
                        uint32_t **ids, size_t *n, size_t *cap, size_t *replaced, gk_err *e);
void gk_text_encoder_free(gk_text_encoder *t);

/* The token a generation with no prompt starts from: <|endoftext|>, or for a char vocabulary
 * the newline. GK_EFORMAT when the vocabulary has neither. */
int gk_text_start_token(const gk_vocab *v, uint32_t *id, gk_err *e);

#endif
