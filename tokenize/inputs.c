/* inputs.c: operands to inputs: files, directories, glob patterns (see inputs.h). */
#include "inputs.h"

#include <dirent.h>
#include <errno.h>
#include <glob.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/grow.h"

int tk_inputs_add_entry(tk_inputs *in, const char *path, long long size, tk_remote rem, gk_err *e)
{
    if (in->n == in->cap) {
        int cap = in->cap ? in->cap * 2 : 16;
        char **np = realloc(in->paths, (size_t)cap * sizeof *np);
        if (np)
            in->paths = np;
        long long *ns = np ? realloc(in->sizes, (size_t)cap * sizeof *ns) : NULL;
        if (ns)
            in->sizes = ns;
        tk_remote *nr = ns ? realloc(in->remote, (size_t)cap * sizeof *nr) : NULL;
        if (!nr)
            return gk_errf(e, GK_ENOMEM, "out of memory");
        in->remote = nr;
        in->cap = cap;
    }
    if (!(in->paths[in->n] = strdup(path)))
        return gk_errf(e, GK_ENOMEM, "out of memory");
    in->sizes[in->n] = size;
    in->remote[in->n] = rem;
    in->n++;
    return 0;
}

int tk_inputs_add(tk_inputs *in, const char *path, gk_err *e)
{
    struct stat st;
    long long size = strcmp(path, "-") && stat(path, &st) == 0 && S_ISREG(st.st_mode)
                         ? (long long)st.st_size : -1;
    return tk_inputs_add_entry(in, path, size, (tk_remote){NULL, 0, 0}, e);
}

static int add_dataset(tk_inputs *in, const char *url, const gk_hub_conf *hub, gk_err *e)
{
    if (!hub)
        return gk_errf(e, GK_EUSAGE, "%s: hub datasets are not read here", url);
    gk_hub_dataset **ns = realloc(in->sets, (size_t)(in->nsets + 1) * sizeof *ns);
    if (!ns)
        return gk_errf(e, GK_ENOMEM, "out of memory");
    in->sets = ns;
    gk_hub_dataset *d;
    int rc = gk_hub_dataset_open(&d, url, hub, e);
    if (rc)
        return rc;
    in->sets[in->nsets++] = d;
    const char *repo_end = strchr(strchr(url + strlen("hf://datasets/"), '/') + 1, '/');
    for (int i = 0; rc == 0 && i < gk_hub_dataset_files(d); i++) {
        char name[2048];
        snprintf(name, sizeof name, "%.*s/%s", (int)(repo_end - url), url,
                 gk_hub_dataset_file(d, i));
        rc = tk_inputs_add_entry(in, name, gk_hub_dataset_size(d, i), (tk_remote){d, i, 0}, e);
    }
    return rc;
}

static void *prefetch_main(void *arg)
{
    tk_inputs *in = arg;
    tk_prefetch *pf = &in->pf;
    pf->rc = gk_hub_dataset_fetch(in->remote[pf->i].d, in->remote[pf->i].i, pf->path,
                                  sizeof pf->path, 1, &pf->cancel, &pf->err);
    return NULL;
}

/* Waits for the download in the background (stopping it first if cancel); its result. */
static int prefetch_join(tk_inputs *in, int cancel, gk_err *e)
{
    if (!in->pf.running)
        return 0;
    if (cancel)
        atomic_store(&in->pf.cancel, 1);
    pthread_join(in->pf.thread, NULL);
    in->pf.running = 0;
    if (in->pf.rc && e)
        *e = in->pf.err;
    return in->pf.rc;
}

/* Starts downloading the first remote input after i, if any (a failure to start a thread
 * leaves it to tk_inputs_fetch). Only one dataset call runs at a time: the caller's waits. */
static void prefetch_after(tk_inputs *in, int i)
{
    int j = i + 1;
    while (j < in->n && !in->remote[j].d)
        j++;
    if (j >= in->n)
        return;
    in->pf.i = j;
    in->pf.rc = 0;
    atomic_store(&in->pf.cancel, 0);
    in->pf.running = pthread_create(&in->pf.thread, NULL, prefetch_main, in) == 0;
}

int tk_inputs_fetch(tk_inputs *in, int i, char *path, size_t cap, gk_err *e)
{
    int rc = 0;
    if (in->pf.running && in->pf.i == i) {
        if ((rc = prefetch_join(in, 0, e)) == 0 && strlen(in->pf.path) >= cap)
            rc = gk_errf(e, GK_EUSAGE, "%s: path too long", in->pf.path);
        if (rc == 0)
            strcpy(path, in->pf.path);
    } else if (in->remote[i].s3) {
        rc = tk_inputs_fetch_s3(in, i, path, cap, e);
    } else if (in->remote[i].d) {
        prefetch_join(in, 1, NULL);
        rc = gk_hub_dataset_fetch(in->remote[i].d, in->remote[i].i, path, cap, 0, NULL, e);
    } else if (strlen(in->paths[i]) >= cap) {
        rc = gk_errf(e, GK_EUSAGE, "%s: path too long", in->paths[i]);
    } else {
        strcpy(path, in->paths[i]);
    }
    if (rc == 0 && !in->pf.running)
        prefetch_after(in, i);
    return rc;
}

void tk_inputs_stop(tk_inputs *in)
{
    prefetch_join(in, 1, NULL); /* a download stopped early resumes next time */
}

static int by_name(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The names in dir (no hidden ones), sorted; *n of them. */
static int list_dir(const char *dir, char ***names, size_t *n, gk_err *e)
{
    DIR *d = opendir(dir);
    if (!d)
        return gk_errno(e, dir);
    size_t cap = 0;
    int rc = 0;
    *names = NULL;
    *n = 0;
    struct dirent *ent;
    errno = 0;
    while (rc == 0 && (ent = readdir(d))) {
        if (ent->d_name[0] == '.')
            continue;
        if (gk_grow(names, &cap, *n + 1, sizeof **names, 64)) {
            rc = gk_errf(e, GK_ENOMEM, "out of memory");
            break;
        }
        if (!((*names)[*n] = strdup(ent->d_name)))
            rc = gk_errf(e, GK_ENOMEM, "out of memory");
        else
            (*n)++;
    }
    if (rc == 0 && errno)
        rc = gk_errno(e, dir);
    closedir(d);
    if (rc == 0 && *n > 1) /* qsort takes no NULL, even for no names */
        qsort(*names, *n, sizeof **names, by_name);
    return rc;
}

static int add_dir(tk_inputs *in, const char *dir, int depth, gk_err *e)
{
    if (depth > 64)
        return gk_errf(e, GK_EFORMAT, "%s: directories nested too deep", dir);
    char **names = NULL;
    size_t n = 0;
    int rc = list_dir(dir, &names, &n, e);
    for (size_t i = 0; i < n; i++) {
        size_t len = strlen(dir) + strlen(names[i]) + 2;
        char *path = rc ? NULL : malloc(len);
        struct stat st, lst;
        if (!rc && !path)
            rc = gk_errf(e, GK_ENOMEM, "out of memory");
        if (!rc) {
            snprintf(path, len, "%s%s%s", dir, dir[strlen(dir) - 1] == '/' ? "" : "/", names[i]);
            if (lstat(path, &lst) != 0 || stat(path, &st) != 0)
                rc = gk_errno(e, path);
            else if (S_ISDIR(lst.st_mode))
                rc = add_dir(in, path, depth + 1, e);
            else if (S_ISREG(st.st_mode))
                rc = tk_inputs_add(in, path, e);
        }
        free(path);
        free(names[i]);
    }
    free(names);
    return rc;
}

static int add_glob(tk_inputs *in, const char *pattern, gk_err *e)
{
    glob_t g;
    int r = glob(pattern, GLOB_ERR, NULL, &g);
    if (r == GLOB_NOMATCH)
        return gk_errf(e, GK_ENOTFOUND, "%s: no file matches this pattern", pattern);
    if (r != 0) {
        globfree(&g);
        return r == GLOB_NOSPACE ? gk_errf(e, GK_ENOMEM, "out of memory")
                                 : gk_errf(e, GK_EIO, "%s: cannot read a directory of this pattern",
                                           pattern);
    }
    int rc = 0;
    for (size_t i = 0; rc == 0 && i < g.gl_pathc; i++) {
        struct stat st;
        const char *p = g.gl_pathv[i];
        rc = stat(p, &st) == 0 && S_ISDIR(st.st_mode) ? add_dir(in, p, 0, e)
                                                      : tk_inputs_add(in, p, e);
    }
    globfree(&g);
    return rc;
}

int tk_inputs_expand(tk_inputs *in, const char *operand, const gk_hub_conf *hub, gk_err *e)
{
    struct stat st;
    if (strcmp(operand, "-") == 0)
        return tk_inputs_add(in, operand, e);
    if (gk_hub_is_dataset_url(operand))
        return add_dataset(in, operand, hub, e);
    if (gk_s3_is_url(operand))
        return tk_inputs_add_s3(in, operand, e);
    if (stat(operand, &st) == 0 && S_ISDIR(st.st_mode)) {
        int before = in->n, rc = add_dir(in, operand, 0, e);
        if (rc == 0 && in->n == before)
            rc = gk_errf(e, GK_ENOTFOUND, "%s: a directory with no files in it", operand);
        return rc;
    }
    if (stat(operand, &st) == 0)
        return tk_inputs_add(in, operand, e);
    if (strpbrk(operand, "*?["))
        return add_glob(in, operand, e);
    return tk_inputs_add(in, operand, e); /* opening it says what is wrong */
}

void tk_inputs_free(tk_inputs *in)
{
    prefetch_join(in, 1, NULL); /* a download stopped early resumes next time */
    tk_inputs_done_s3(in, 1, NULL); /* rc 1: e is not written */
    for (int i = 0; i < in->n; i++)
        free(in->paths[i]);
    for (int i = 0; i < in->nsets; i++)
        gk_hub_dataset_close(in->sets[i]);
    free(in->paths);
    free(in->sizes);
    free(in->remote);
    free(in->sets);
    memset(in, 0, sizeof *in);
}
