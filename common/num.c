/* num.c: checked number parsing (see num.h). */
#include "common/num.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

static int suffix_multiplier(const char *s, int64_t *mul)
{
    static const char letters[] = "KMGT";
    *mul = 1;
    if (*s == '\0')
        return 0;
    char c = (char)(s[0] & ~0x20);
    const char *p = c ? strchr(letters, c) : NULL;
    if (!p)
        return -1;
    int power = (int)(p - letters) + 1;
    int64_t base = 1000;
    if (s[1] == 'i' && s[2] == '\0')
        base = 1024;
    else if (s[1] != '\0')
        return -1;
    for (int i = 0; i < power; i++)
        *mul *= base;
    return 0;
}

int gk_parse_i64(const char *text, int64_t min, int64_t max, int64_t *out, const char *what,
                 gk_err *e)
{
    if (!text || !*text)
        return gk_errf(e, GK_EUSAGE, "%s: empty value, expected an integer", what);
    errno = 0;
    char *end;
    long long v = strtoll(text, &end, 10);
    int64_t mul = 1;
    if (end == text || errno == ERANGE)
        goto bad;
    if ((*end == 'e' || *end == 'E') && end[1] >= '0' && end[1] <= '9') {
        char *end2;
        long ex = strtol(end + 1, &end2, 10);
        if (*end2 != '\0' || ex > 18)
            goto bad;
        while (ex-- > 0)
            mul *= 10;
    } else if (suffix_multiplier(end, &mul) != 0) {
        goto bad;
    }
    if (v != 0 && (v > INT64_MAX / mul || v < INT64_MIN / mul))
        return gk_errf(e, GK_EUSAGE, "%s: '%s' is too large", what, text);
    v *= mul;
    if (v < min || v > max)
        return gk_errf(e, GK_EUSAGE, "%s: %s is out of range [%lld, %lld]", what, text,
                       (long long)min, (long long)max);
    *out = v;
    return 0;
bad:
    return gk_errf(e, GK_EUSAGE, "%s: '%s' is not an integer", what, text);
}

int gk_parse_double(const char *text, double min, double max, double *out, const char *what,
                    gk_err *e)
{
    if (!text || !*text)
        return gk_errf(e, GK_EUSAGE, "%s: empty value, expected a number", what);
    errno = 0;
    char *end;
    double v = strtod(text, &end);
    if (end == text || *end != '\0' || errno == ERANGE || !isfinite(v))
        return gk_errf(e, GK_EUSAGE, "%s: '%s' is not a number", what, text);
    if (v < min || v > max)
        return gk_errf(e, GK_EUSAGE, "%s: %s is out of range [%g, %g]", what, text, min, max);
    *out = v;
    return 0;
}
