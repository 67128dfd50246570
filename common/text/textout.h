/* textout.h: streaming token bytes out as UTF-8 text without ever splitting a character.
 * A byte-level BPE token may end inside a multi-byte character; its incomplete tail is held back
 * until the next token completes it. Invalid sequences (and a tail never completed) come out as
 * U+FFFD, as Python's bytes.decode(errors="replace") does.
 * Owns: gk_textout, a small pending buffer and an output buffer (init/free). One thread each. */
#ifndef GS_TEXTOUT_H
#define GS_TEXTOUT_H

#include <stddef.h>
#include <stdio.h>

typedef struct gk_textout {
    FILE *fp;                 /* NULL: collect into out only */
    unsigned char hold[4];    /* incomplete character carried to the next push */
    size_t nhold;
    char *out;                /* sanitized bytes of the last push (for tests), malloc'd */
    size_t out_cap, out_len;
    char *tmp;                /* hold + token bytes */
    size_t tmp_cap;
} gk_textout;

void gk_textout_init(gk_textout *t, FILE *fp);
void gk_textout_free(gk_textout *t);
/* Length of the incomplete-but-valid character at the end of s[0..n) (0..3). */
size_t gk_utf8_tail(const unsigned char *s, size_t n);
/* Appends bytes; writes (and leaves in t->out) every complete character. 0, or -1 on a write
 * or allocation failure (errno set). */
int gk_textout_push(gk_textout *t, const void *bytes, size_t n);
/* Writes what is held (as U+FFFD: it was never completed). */
int gk_textout_finish(gk_textout *t);

#endif
