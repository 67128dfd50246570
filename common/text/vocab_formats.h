/* vocab_formats.h: the vocabulary file formats, for vocab_load.c (which picks one) and the
 * modules that implement them: vocab_bpe.c (BPE) and vocab_char.c (char). Built on the core in
 * vocab_int.h. Thread safety: each call builds its own vocab; no shared state. */
#ifndef GK_VOCAB_FORMATS_H
#define GK_VOCAB_FORMATS_H

#include <stddef.h>

#include "common/err.h"
#include "common/text/vocab.h"

/* Format readers and writers (vocab_bpe.c). gk_vocab_parse_bpe reads the JSON object text
 * json[0..jlen) and the merges text (may be NULL: none kept); messages name jname and mname.
 * gk_vocab_load_json_dir reads the two files and parses them with it. */
int gk_vocab_parse_bpe(gk_vocab **out, const char *json, size_t jlen, const char *jname,
                       const char *merges, size_t mlen, const char *mname, gk_err *e);
int gk_vocab_load_json_dir(gk_vocab **out, const char *json, const char *merges, gk_err *e);
int gk_vocab_bpe_json(const gk_vocab *v, char **out, size_t *len, gk_err *e);
int gk_vocab_load_tiktoken(gk_vocab **out, const char *path, gk_err *e);

/* Char vocab: the JSON array text[0..len) (messages name name), a file of it, and v as that
 * text (compact, one line, newline-terminated). */
int gk_vocab_parse_chars(gk_vocab **out, const char *text, size_t len, const char *name, gk_err *e);
int gk_vocab_load_chars(gk_vocab **out, const char *path, gk_err *e);
int gk_vocab_chars_json(const gk_vocab *v, char **out, size_t *len, gk_err *e);

#endif
