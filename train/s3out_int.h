/* s3out_int.h: what s3out.c and s3unsent.c share of an out_dir in a bucket (see s3out.h). */
#ifndef TR_S3OUT_INT_H
#define TR_S3OUT_INT_H

#include <pthread.h>
#include <stdio.h>

#include "common/io/stagedir.h"
#include "s3out.h"

struct tr_s3out {
    gk_s3 *s3;
    char given[1400];    /* out_dir as set */
    char url[1400];      /* s3://BUCKET/PREFIX as given, without a trailing '/' */
    char bucket[256];
    char prefix[1100];   /* "" or "PREFIX/" */
    gk_stagedir stage;   /* TMPDIR/gpt-train.XXXXXX, locked while this run lives */
    char unsent[4200];   /* TMPDIR/gpt-train-unsent.HASH: a checkpoint whose upload failed */
    int locked;
    pthread_t renewer;   /* renews the lock every TR_S3_LOCK_RENEW_S while running */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int renewing, quit;
};

static inline void key_of(const tr_s3out *o, const char *name, char *key, size_t cap)
{
    snprintf(key, cap, "%s%s", o->prefix, name);
}

/* The name PREFIX/latest holds into name ("" when there is none). */
int tr_s3out_read_latest(tr_s3out *o, char *name, size_t cap, gk_err *e);

/* s3unsent.c: the checkpoint whose upload failed for good, kept for the next run. */
void tr_unsent_dir(tr_s3out *o, const char *tmpdir);
void tr_unsent_keep(tr_s3out *o, const char *name, char *kept, size_t cap);
int tr_unsent_pick_up(tr_s3out *o, const char *init_from, gk_err *e);

#endif
