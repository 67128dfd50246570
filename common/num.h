/* num.h: checked parsing of numbers given by users (options, config values).
 * Owns nothing; pure functions, thread-safe. Never atoi: every character is checked, overflow
 * and range are errors naming `what` (the option or key) and the text. */
#ifndef GK_NUM_H
#define GK_NUM_H

#include <stdint.h>

#include "common/err.h"

/* Integer with an optional suffix: K M G T (x1000^n) or Ki Mi Gi Ti (x1024^n); also a plain
 * integral scientific form such as 1e8. Must lie in [min, max]. Returns 0 or GK_EUSAGE. */
int gk_parse_i64(const char *text, int64_t min, int64_t max, int64_t *out, const char *what,
                 gk_err *e);
/* Finite double in [min, max] (strtod syntax, whole string). Returns 0 or GK_EUSAGE. */
int gk_parse_double(const char *text, double min, double max, double *out, const char *what,
                    gk_err *e);

#endif
