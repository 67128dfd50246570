/* ckpt_src.c: a named checkpoint resolved, and downloaded when in a bucket (see ckpt_src.h). */
#include "common/io/ckpt_src.h"

#include <unistd.h>

#include "common/io/ckpt_where.h"
#include "common/s3/s3.h"

int gk_ckpt_src_open(gk_ckpt_src *s, const char *path, const gk_env *env, gk_err *e)
{
    s->where[0] = '\0';
    s->fd = -1;
    s->bytes = -1;
    s->retries = 0;
    int rc = gk_ckpt_where(path, env->getenv_fn, NULL, s->where, sizeof s->where, e);
    if (!rc && gk_s3_is_url(s->where))
        rc = gk_s3_fetch_url(s->where, env->getenv_fn, NULL, env->tmpdir, &s->fd, &s->bytes,
                             &s->retries, e);
    return rc;
}

void gk_ckpt_src_close(gk_ckpt_src *s)
{
    if (s->fd >= 0)
        close(s->fd);
    s->fd = -1;
}
