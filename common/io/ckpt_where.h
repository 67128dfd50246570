/* ckpt_where.h: the one resolver of what a user names as a checkpoint (gpt-sample -m,
 * gpt-evalppl -m, gpt-ckpt's operand, gpt-train's init_from path) to the file or object that
 * holds it, so that the paths of a local run work the same for a bucket, where gpt-train's
 * out_dir keeps its latest checkpoint's name in the object PREFIX/latest (a pointer) rather than
 * a symbolic link latest.safetensors:
 *   DIR (a directory: an out_dir)          -> DIR/latest.safetensors
 *   s3://B/P/latest.safetensors, absent    -> s3://B/P/NAME, NAME what s3://B/P/latest holds
 *   s3://B/P/latest (the pointer)          -> s3://B/P/NAME
 *   s3://B/P or s3://B/P/ (no such object) -> s3://B/P/NAME when s3://B/P/latest exists;
 *   s3://B or s3://B/                         likewise s3://B/latest
 * Anything else is returned as it is (opening it says what is wrong). Library code: the S3
 * client's settings come from env (gk_s3_conf_discover), as the tools pass getenv. */
#ifndef GK_CKPT_WHERE_H
#define GK_CKPT_WHERE_H

#include <stddef.h>

#include "common/err.h"
#include "common/s3/s3.h"

/* path resolved into out (cap bytes). Errors: a URL that does not parse, a pointer that names
 * no checkpoint. A request that fails leaves the path as given (its open says why). */
int gk_ckpt_where(const char *path, gk_s3_getenv env, void *ud, char *out, size_t cap, gk_err *e);
/* The same with the client's settings given (conf may be NULL for a local path). */
int gk_ckpt_where_conf(const char *path, const gk_s3_conf *conf, char *out, size_t cap, gk_err *e);

#endif
